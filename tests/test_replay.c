/* The dump switch and mla op --replay: a call dumped through the
 * environment (MLA_DUMP) and through mla_context_set_dump replays; a
 * missing, altered or unlisted file is refused naming it; a changed result
 * is caught (bit-defined op, and a GEMM outside its bound); a refused call
 * replays as refused; nothing is written with the switch off, past
 * MLA_DUMP_MAX, or for an op not named. argv[1]: the mla executable. */
#define _XOPEN_SOURCE 700 /* setenv, realpath */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mla/mla.h"
#include "tests/dump_tamper.h"
#include "tests/test_util.h"

static const char *mla_exe, *root = "test_replay.tmp";

/* mla op --replay DIR's exit code, its output kept in DIR.log. */
static int replay(const char *dir, const char *backend)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' op --replay '%s' --backend %s > '%s.log' 2>&1", mla_exe, dir,
             backend, dir);
    return sh(cmd);
}

static int log_has(const char *dir, const char *text)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "grep -q -- '%s' '%s.log'", text, dir);
    return sh(cmd) == 0;
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Flips bit 4 of byte `at` of a .npy file's data and records the new hash
 * in the manifest, so that only the comparison can catch it. */
static void tamper(const char *dir, const char *file, long at)
{
    if (tamper_bits(dir, file, at, 0x10) != 0)
        fprintf(stderr, "could not alter %s/%s\n", dir, file);
}

static mla_tensor host(mla_dtype dt, int32_t nd, const int64_t *shape, float fill)
{
    mla_tensor t;
    mla_tensor_init(&t, NULL, dt, MLA_MEMORY_HOST, nd, shape);
    const int64_t n = mla_tensor_numel(&t);
    t.data = calloc((size_t)n + 1, mla_dtype_size(dt));
    for (int64_t i = 0; i < n; ++i) {
        const float v = fill * (float)((i * 7919) % 23 - 11) / 11.0f;
        if (dt == MLA_DTYPE_F32)
            ((float *)t.data)[i] = v;
        else if (dt == MLA_DTYPE_BF16)
            ((uint16_t *)t.data)[i] = mla_f32_to_bf16(v);
    }
    return t;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    static char exe[4096];
    if (!realpath(argv[1], exe)) /* replay.sh runs from its folder */
        return 2;
    mla_exe = exe;
    char cmd[2400], dir[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", root, root);
    if (sh(cmd) != 0)
        return 1;
    mla_tensor x = host(MLA_DTYPE_F32, 2, (int64_t[]){4, 64}, 1.0f);
    mla_tensor w = host(MLA_DTYPE_BF16, 2, (int64_t[]){16, 64}, 0.5f);
    mla_tensor y = host(MLA_DTYPE_F32, 2, (int64_t[]){4, 16}, 0);
    mla_tensor c = host(MLA_DTYPE_BF16, 2, (int64_t[]){4, 64}, 0);

    /* through the environment, read at context creation */
    snprintf(dir, sizeof dir, "%s/env", root);
    setenv("MLA_DUMP", "linear", 1);
    setenv("MLA_DUMP_DIR", dir, 1);
    setenv("MLA_DUMP_MAX", "2", 1);
    mla_context *ctx = NULL;
    CHECK_STATUS(mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ctx), MLA_OK);
    unsetenv("MLA_DUMP");
    CHECK(strstr(mla_context_dump_status(ctx), "dumping 'linear'") != NULL);
    CHECK_STATUS(mla_convert(ctx, &x, &c, MLA_SATURATE), MLA_OK); /* not named: not dumped */
    for (int i = 0; i < 3; ++i) /* the third is past MLA_DUMP_MAX */
        CHECK_STATUS(mla_linear(ctx, &x, &w, NULL, &y), MLA_OK);
    snprintf(cmd, sizeof cmd, "%s/0000-linear/replay.sh", dir);
    CHECK(exists(cmd));
    snprintf(cmd, sizeof cmd, "%s/0001-linear", dir);
    CHECK(exists(cmd));
    snprintf(cmd, sizeof cmd, "%s/0002-linear", dir);
    CHECK(!exists(cmd));
    snprintf(cmd, sizeof cmd, "%s/0000-convert", dir);
    CHECK(!exists(cmd));
    snprintf(dir, sizeof dir, "%s/env/0000-linear", root);
    CHECK(replay(dir, "reference") == 0 && log_has(dir, "bit-identical"));
    CHECK(replay(dir, "cpu") == 0);
    /* the replay line runs as a script too */
    snprintf(cmd, sizeof cmd, "MLA='%s' sh %s/replay.sh > /dev/null 2>&1 && test -f %s/got.y.npy",
             mla_exe, dir, dir);
    CHECK(sh(cmd) == 0);
    /* a GEMM's result moved by 16 ulp (within its bound, 2 gamma_67 S, and
     * not the same bits on the dumping backend), then by 2^-3 (outside) */
    snprintf(dir, sizeof dir, "%s/env/0001-linear", root);
    tamper(dir, "out.y.npy", 0);
    CHECK(replay(dir, "reference") == 1 && log_has(dir, "DIFFERENT"));
    CHECK(replay(dir, "cpu") == 0 && log_has(dir, "within"));
    tamper(dir, "out.y.npy", 2);
    CHECK(replay(dir, "cpu") == 1 && log_has(dir, "OUTSIDE"));
    mla_context_destroy(ctx);

    /* through the context option; off by default now */
    CHECK_STATUS(mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ctx), MLA_OK);
    CHECK(*mla_context_dump_status(ctx) == '\0');
    snprintf(dir, sizeof dir, "%s/opt", root);
    CHECK_STATUS(mla_context_set_dump(ctx, "convert,linear", dir, 0), MLA_OK);
    CHECK_STATUS(mla_convert(ctx, &x, &c, MLA_SATURATE), MLA_OK);
    mla_tensor bad = y;
    bad.shape[1] = 15; /* a refused call is dumped too */
    CHECK_STATUS(mla_linear(ctx, &x, &w, NULL, &bad), MLA_ERR_SHAPE);
    CHECK(!strcmp(mla_context_error_param(ctx), "y.shape[1]") ||
          strstr(mla_context_error_param(ctx), "y") != NULL); /* the call's record is kept */
    /* descriptors the call refuses are not read by its dump (it runs first) */
    mla_tensor huge = x, deep = x, none = x;
    huge.stride[0] = INT64_MAX;
    deep.ndim = 99;
    none.data = NULL;
    CHECK(mla_linear(ctx, &huge, &w, NULL, &y) != MLA_OK);
    CHECK(mla_linear(ctx, &deep, &w, NULL, &y) != MLA_OK);
    CHECK(mla_linear(ctx, &none, &w, NULL, &y) == MLA_ERR_NULL_POINTER);
    CHECK(mla_linear(ctx, &x, &w, NULL, &deep) != MLA_OK);
    CHECK_STATUS(mla_context_set_dump(ctx, "nonsense", dir, 0), MLA_OK);
    CHECK(strstr(mla_context_dump_status(ctx), "'nonsense'") != NULL);
    CHECK_STATUS(mla_context_set_dump(ctx, NULL, NULL, 0), MLA_OK);
    CHECK_STATUS(mla_convert(ctx, &x, &c, MLA_SATURATE), MLA_OK);
    snprintf(cmd, sizeof cmd, "%s/0002-convert", dir);
    CHECK(!exists(cmd)); /* off again */
    mla_context_destroy(ctx);

    snprintf(dir, sizeof dir, "%s/opt/0001-linear", root);
    CHECK(replay(dir, "cpu") == 0 && log_has(dir, "refused when dumped"));
    snprintf(dir, sizeof dir, "%s/opt/0000-convert", root);
    CHECK(replay(dir, "cpu") == 0);
    tamper(dir, "out.y.npy", 0); /* a bit-defined op: any change fails */
    CHECK(replay(dir, "cpu") == 1 && log_has(dir, "bit-defined"));

    /* a missing, an altered and an unlisted file: refused by name before running */
    snprintf(cmd, sizeof cmd, "cp -r %s/env/0000-linear %s/m && rm %s/m/in.w.npy", root, root,
             root);
    CHECK(sh(cmd) == 0);
    snprintf(dir, sizeof dir, "%s/m", root);
    CHECK(replay(dir, "reference") == 2 && log_has(dir, "in.w.npy is missing"));
    snprintf(cmd, sizeof cmd, "cp -r %s/env/0000-linear %s/a && printf x >> %s/a/in.x.npy", root,
             root, root);
    CHECK(sh(cmd) == 0);
    snprintf(dir, sizeof dir, "%s/a", root);
    CHECK(replay(dir, "reference") == 2 && log_has(dir, "in.x.npy was altered"));
    snprintf(cmd, sizeof cmd,
             "cp -r %s/env/0000-linear %s/r && sed -i 's/--param dtype=f32/--param dtype=bf16/' "
             "%s/r/replay.sh",
             root, root, root);
    CHECK(sh(cmd) == 0);
    snprintf(dir, sizeof dir, "%s/r", root);
    CHECK(replay(dir, "reference") == 2 && log_has(dir, "replay.sh was altered"));
    snprintf(cmd, sizeof cmd,
             "cp -r %s/env/0000-linear %s/u && sed -i '/in.w.npy/d' %s/u/manifest.txt", root, root,
             root);
    CHECK(sh(cmd) == 0);
    snprintf(dir, sizeof dir, "%s/u", root);
    CHECK(replay(dir, "reference") == 2 && log_has(dir, "in.w.npy, which the manifest"));
    snprintf(cmd, sizeof cmd, "cp -r %s/env/0000-linear %s/n && rm %s/n/manifest.txt", root, root,
             root);
    CHECK(sh(cmd) == 0);
    snprintf(dir, sizeof dir, "%s/n", root);
    CHECK(replay(dir, "reference") == 2 && log_has(dir, "manifest.txt is missing"));
    free(x.data), free(w.data), free(y.data), free(c.data);
    return TEST_SUMMARY();
}
