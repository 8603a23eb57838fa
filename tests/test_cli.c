/* The mla command's manners and its issue-18 regressions: a RoPE table
 * whose size overflows and kv_lora + rope overflowing are usage errors, not
 * heap overflows; tensor names with control bytes are printed escaped;
 * mistyped commands, ops and presets get a suggestion; --json output of
 * info, plan, demo and weights inspect parses as JSON; weights inspect and
 * demo --model / --tp run a generated checkpoint and a refused slice exits
 * 1. argv[1]: the mla executable. */
#define _XOPEN_SOURCE 700
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "core/json_mini.h"
#include "mla/mla.h"
#include "tests/test_util.h"

static const char *mla_exe, *root = "test_cli.tmp";
static char out[1 << 16];

/* Runs `mla ARGS`, stdout and stderr into out; the exit code. */
static int run(const char *args)
{
    char cmd[2000], path[300];
    snprintf(path, sizeof path, "%s/out.txt", root);
    snprintf(cmd, sizeof cmd, "'%s' %s > %s 2>&1", mla_exe, args, path);
    const int rc = system(cmd);
    FILE *fp = fopen(path, "rb");
    const size_t n = fp ? fread(out, 1, sizeof out - 1, fp) : 0;
    out[n] = '\0';
    if (fp)
        fclose(fp);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int has(const char *s)
{
    const int ok = strstr(out, s) != NULL;
    if (!ok)
        fprintf(stderr, "expected '%s' in:\n%s\n", s, out);
    return ok;
}

/* The output is one JSON document (whitespace around it). */
static int is_json(void)
{
    mla_json_value v;
    size_t at = 0;
    const int ok = mla_json_value_parse(out, strlen(out), &v, &at) == MLA_JSON_OK && v.type == MLA_JSON_OBJECT;
    if (!ok)
        fprintf(stderr, "not JSON (byte %zu):\n%s\n", at, out);
    mla_json_value_free(&v);
    return ok;
}

/* A .npy of n f32 values 0.5 (1-D) or an i32 vector. */
static void npy(const char *name, const char *descr, const char *shape, int n, int bytes_each)
{
    char path[300], head[128];
    snprintf(path, sizeof path, "%s/%s", root, name);
    int hl = snprintf(head, sizeof head, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                      descr, shape);
    while ((10 + hl + 1) % 64)
        head[hl++] = ' ';
    head[hl++] = '\n';
    FILE *fp = fopen(path, "wb");
    const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)hl, 0};
    fwrite(pre, 1, 10, fp);
    fwrite(head, 1, (size_t)hl, fp);
    for (int i = 0; i < n * bytes_each; ++i)
        fputc(bytes_each == 4 && descr[1] == 'f' ? "\0\0\0\x3f"[i % 4] : 0, fp);
    fclose(fp);
}

static void test_overflows(void)
{
    npy("x.npy", "<f4", "(2, 64)", 128, 4);
    npy("pos.npy", "<i4", "(2,)", 2, 4);
    npy("lens.npy", "<i4", "(1,)", 1, 4);
    npy("bt.npy", "<i4", "(1, 1)", 1, 4);
    char a[1200];
    snprintf(a, sizeof a,
             "op rope --in x=%s/x.npy --in positions=%s/pos.npy --out y=%s/y.npy --param "
             "max_pos=144115188075855872 --param rope_dim=64 --backend reference",
             root, root, root);
    CHECK(run(a) == 2 && has("does not fit in 64 bits"));
    snprintf(a, sizeof a,
             "op cache_gather --in cache=%s/x.npy --in block_table=%s/bt.npy --in "
             "seq_lens=%s/lens.npy --out out=%s/o.npy --param kv_lora=9223372036854775807 "
             "--param rope=64 --param out_dtype=f32 --backend reference",
             root, root, root, root);
    CHECK(run(a) == 2 && has("overflows 64 bits"));
    snprintf(a, sizeof a,
             "op rope --in x=%s/x.npy --in positions=%s/pos.npy --out y=%s/y.npy --param "
             "max_pos=64 --backend reference --stride x=9223372036854775807,1",
             root, root, root);
    CHECK(run(a) == 2 && has("span more than 64 bits"));
    snprintf(a, sizeof a,
             "op rope --in x=%s/x.npy --in positions=%s/pos.npy --out y=%s/y.npy --param "
             "max_pos=64 --backend reference --shape y=2,64 --stride y=64,1",
             root, root, root);
    CHECK(run(a) == 0);
}

static void test_names(void)
{
    /* a tensor name with an escape sequence and a newline in it */
    char path[300];
    snprintf(path, sizeof path, "%s/evil.safetensors", root);
    const char *header = "{\"bad\\u001b[31mname\\nx\":{\"dtype\":\"U8\",\"shape\":[1],"
                         "\"data_offsets\":[0,1]}}";
    FILE *fp = fopen(path, "wb");
    unsigned char len[8] = {0};
    const size_t n = strlen(header);
    len[0] = (unsigned char)n;
    fwrite(len, 1, 8, fp);
    fwrite(header, 1, n, fp);
    fputc(0, fp);
    fclose(fp);
    char a[400];
    snprintf(a, sizeof a, "weights info %s", path);
    CHECK(run(a) == 0 && has("bad\\x1B[31mname\\x0Ax") && !strchr(out, 0x1B));
}

static void test_manners(void)
{
    CHECK(run("demi") == 2 && has("did you mean 'demo'"));
    CHECK(run("help wieghts") == 2 && has("did you mean 'weights'"));
    CHECK(run("op atention") == 2 && has("did you mean 'attention'"));
    CHECK(run("plan --config deepseek-v2-lite") == 0); /* presets in any case */
    CHECK(run("plan --config DeepSeek-V4") == 2 && has("did you mean 'DeepSeek-V3'"));
    CHECK(run("weights generate --config kimi-k3 --out x") == 2 && has("did you mean 'Kimi-K2'"));
    CHECK(run("weights inspekt x") == 2 && has("did you mean 'inspect'"));
    CHECK(run("info --json") == 0 && is_json());
    CHECK(run("plan --config test-tiny --json") == 0 && is_json());
}

static void test_checkpoint_cli(void)
{
    char a[600];
    snprintf(a, sizeof a,
             "weights generate --config test-tiny-indexer --checkpoint %s/ck --layers 2 "
             "--shards 3",
             root);
    CHECK(run(a) == 0);
    snprintf(a, sizeof a, "weights inspect %s/ck --json", root);
    CHECK(run(a) == 0 && is_json() && has("\"refused\": 0"));
    snprintf(a, sizeof a, "weights inspect %s/ck --tp 1/2", root);
    CHECK(run(a) == 0 && has("loads 2 heads") && has("indexer.wq_b.weight"));
    snprintf(a, sizeof a, "weights inspect %s/ck --tp 0/3", root); /* 4 heads over 3 ranks */
    CHECK(run(a) == 1 && has("REFUSED") && has("options.world_size"));
    snprintf(a, sizeof a, "plan --model %s/ck --json", root);
    CHECK(run(a) == 0 && is_json() && has("\"index_heads\": 8"));
    snprintf(a, sizeof a,
             "demo --backend cpu --model %s/ck --layer 1 --tp 1/2 --context 70 --prefill 4 --batch "
             "2 --steps 2 --no-ceilings --json",
             root);
    CHECK(run(a) == 0 && is_json() && has("\"within\": true") && has("\"heads\": 2"));
    snprintf(a, sizeof a, "demo --backend reference --model %s/ck --layer 2 --steps 1", root);
    CHECK(run(a) == 1 && has("layer 2"));
    snprintf(a, sizeof a, "demo --model %s/ck --weights %s/ck", root, root);
    CHECK(run(a) == 2);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    mla_exe = argv[1];
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", root, root);
    if (system(cmd) != 0)
        return 1;
    test_overflows();
    test_names();
    test_manners();
    test_checkpoint_cli();
    return TEST_SUMMARY();
}
