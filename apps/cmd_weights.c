/* mla weights: seeded random weights of a config as a safetensors file
 * with DeepSeek's names (for tests, benchmarks and the layer without a
 * real checkpoint), and a listing of any safetensors file. */
#include <stdlib.h>
#include <string.h>

#include "apps/cmd.h"
#include "apps/progress.h"
#include "apps/suggest.h"

void usage_weights(FILE *out)
{
    fprintf(out,
            "usage: mla weights generate --config NAME (--out FILE | --checkpoint DIR [--shards N])\n"
            "                            [--seed N] [--first N] [--layers N] [--fp8] [--mxfp4 LIST]\n"
            "       mla weights info FILE [--config NAME [--layer N]]\n"
            "       mla weights inspect DIR [--layer N] [--tp RANK/WORLD] [--json]\n\n"
            "generate writes layers FIRST .. FIRST+LAYERS-1 (default 0, 1) of a config preset\n"
            "(`mla plan --list`), seeded (default 0): bf16 weights, or with --fp8 e4m3fn\n"
            "weights with 128x128 block scales (*.weight_scale_inv; the indexer's\n"
            "weights_proj stays bf16). --mxfp4 makes the listed projections MXFP4 (packed\n"
            "*.weight U8 [out, in/2] + *.weight_scale U8 [out, in/32], as AMD Quark ships\n"
            "them); LIST is comma-separated from q_a, q_b (q_proj), kv_a, kv_b, o,\n"
            "idx_wq_b, idx_wk, idx_weights_proj.\n"
            "--checkpoint writes a Hugging Face checkpoint directory instead (config.json, and\n"
            "N shards with model.safetensors.index.json, or one model.safetensors).\n"
            "info lists the tensors (name, dtype, shape, bytes) and the metadata; with\n"
            "--config it also loads layer N (default 0) and prints each weight's format.\n"
            "inspect reads a checkpoint directory's config.json and index (no tensor data)\n"
            "and lists what the library would load of each layer (or layer N): every\n"
            "tensor's name, file dtype, format, shape as loaded (the rank's slice with --tp)\n"
            "and shard; and what it would refuse, with why. Exit 1 when a layer is refused.\n");
}

/* Sets the format of each listed projection. */
static int parse_mxfp4(char *list, mla_layer_weight_formats *f)
{
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        mla_weight_format *slot = !strcmp(tok, "q_a")                ? &f->q_a_proj
                                  : !strcmp(tok, "q_b")              ? &f->q_b_proj
                                  : !strcmp(tok, "kv_a")             ? &f->kv_a_proj_with_mqa
                                  : !strcmp(tok, "kv_b")             ? &f->kv_b_proj
                                  : !strcmp(tok, "o")                ? &f->o_proj
                                  : !strcmp(tok, "idx_wq_b")         ? &f->idx_wq_b
                                  : !strcmp(tok, "idx_wk")           ? &f->idx_wk
                                  : !strcmp(tok, "idx_weights_proj") ? &f->idx_weights_proj
                                                                     : NULL;
        if (!slot) {
            fprintf(stderr, "mla weights: unknown projection '%s' in --mxfp4\n", tok);
            return -1;
        }
        *slot = MLA_WEIGHT_MXFP4;
    }
    return 0;
}

static int fail(mla_context *ctx, mla_status st, const char *what)
{
    fprintf(stderr, "mla weights: %s: %s (%s: %s)\n", what, mla_status_name(st),
            mla_context_error_param(ctx), mla_context_error_detail(ctx));
    return MLA_EXIT_FAIL;
}

static int generate(int argc, char **argv)
{
    const char *config = NULL, *out = NULL, *dir = NULL;
    int64_t seed = 0, first = 0, layers = 1, shards = 1;
    int fp8 = 0;
    char *mx = NULL;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--fp8"))
            fp8 = 1;
        else if (!v)
            bad = 1;
        else if (!strcmp(a, "--config"))
            config = v, ++i;
        else if (!strcmp(a, "--out"))
            out = v, ++i;
        else if (!strcmp(a, "--checkpoint"))
            dir = v, ++i;
        else if (!strcmp(a, "--shards"))
            bad = mla_app_parse_i64(v, &shards) || shards < 1 || shards > 99999, ++i;
        else if (!strcmp(a, "--mxfp4"))
            mx = argv[++i];
        else if (!strcmp(a, "--seed"))
            bad = mla_app_parse_i64(v, &seed), ++i;
        else if (!strcmp(a, "--first"))
            bad = mla_app_parse_i64(v, &first), ++i;
        else if (!strcmp(a, "--layers"))
            bad = mla_app_parse_i64(v, &layers), ++i;
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "mla weights generate: bad argument '%s'\n", a);
            return MLA_EXIT_USAGE;
        }
    }
    mla_model_config cfg;
    if (!config || !out == !dir) {
        fprintf(stderr, "mla weights generate: --config PRESET and one of --out FILE, "
                        "--checkpoint DIR are required\n");
        return MLA_EXIT_USAGE;
    }
    if (mla_model_config_preset(config, &cfg) != MLA_OK) {
        fprintf(stderr, "mla weights generate: unknown config '%s'", config);
        mla_suggest_preset(stderr, config);
        fprintf(stderr, " (mla plan --list)\n");
        return MLA_EXIT_USAGE;
    }
    mla_layer_weight_formats fm = {0};
    if (fp8) {
        fm.q_a_proj = fm.q_b_proj = fm.kv_a_proj_with_mqa = fm.kv_b_proj = fm.o_proj =
            MLA_WEIGHT_FP8_BLOCK;
        fm.idx_wq_b = fm.idx_wk = MLA_WEIGHT_FP8_BLOCK; /* weights_proj stays bf16, as in V3.2 */
    }
    if (mx && parse_mxfp4(mx, &fm) != 0)
        return MLA_EXIT_USAGE;
    mla_context *ctx = NULL;
    mla_status st = mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ctx);
    if (st != MLA_OK) {
        fprintf(stderr, "mla weights: no context: %s\n", mla_status_name(st));
        return MLA_EXIT_FAIL;
    }
    mla_generate_options o;
    mla_generate_options_default(&o);
    o.first = first, o.count = layers, o.seed = (uint64_t)seed, o.formats = &fm;
    o.shards = (int32_t)shards;
    mla_progress pr;
    mla_progress_begin(&pr, "generating");
    o.progress = mla_progress_cb;
    o.progress_user = &pr;
    st = dir ? mla_checkpoint_generate(ctx, dir, &cfg, &o)
             : mla_weights_generate(ctx, out, &cfg, first, layers, (uint64_t)seed, &fm);
    mla_progress_end(&pr);
    int rc = st == MLA_OK ? MLA_EXIT_OK : fail(ctx, st, "generate");
    if (st == MLA_OK)
        printf("wrote %s: %s layers %lld..%lld, seed %lld\n", dir ? dir : out, cfg.name,
               (long long)first, (long long)(first + layers - 1), (long long)seed);
    mla_context_destroy(ctx);
    return rc;
}

static void print_formats(const mla_layer_weights_ex *w, const mla_model_config *cfg)
{
    const mla_layer_weight_formats *f = &w->formats;
    if (cfg->q_lora > 0)
        printf("  q_a_proj            %s\n", mla_weight_format_name(f->q_a_proj));
    printf("  %-19s %s\n", cfg->q_lora > 0 ? "q_b_proj" : "q_proj",
           mla_weight_format_name(f->q_b_proj));
    printf("  kv_a_proj_with_mqa  %s\n", mla_weight_format_name(f->kv_a_proj_with_mqa));
    printf("  kv_b_proj           %s%s\n", mla_weight_format_name(f->kv_b_proj),
           f->kv_b_proj == MLA_WEIGHT_MXFP4 ? " (W_kc re-quantized along nope at load)" : "");
    printf("  o_proj              %s\n", mla_weight_format_name(f->o_proj));
    if (w->has_indexer)
        printf("  indexer             wq_b %s, wk %s, weights_proj %s\n",
               mla_weight_format_name(f->idx_wq_b), mla_weight_format_name(f->idx_wk),
               mla_weight_format_name(f->idx_weights_proj));
    printf("  %lld bytes in context memory\n", (long long)w->storage_bytes);
}

static int info(int argc, char **argv)
{
    const char *path = NULL, *config = NULL;
    int64_t layer = 0;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (a[0] != '-' && !path)
            path = a;
        else if (!v)
            bad = 1;
        else if (!strcmp(a, "--config"))
            config = v, ++i;
        else if (!strcmp(a, "--layer"))
            bad = mla_app_parse_i64(v, &layer), ++i;
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "mla weights info: bad argument '%s'\n", a);
            return MLA_EXIT_USAGE;
        }
    }
    mla_model_config cfg;
    if (!path) {
        fprintf(stderr, "mla weights info: FILE needed\n");
        return MLA_EXIT_USAGE;
    }
    if (config && mla_model_config_preset(config, &cfg) != MLA_OK) {
        fprintf(stderr, "mla weights info: unknown config '%s'", config);
        mla_suggest_preset(stderr, config);
        fprintf(stderr, "\n");
        return MLA_EXIT_USAGE;
    }
    mla_context *ctx = NULL;
    mla_status st = mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ctx);
    if (st != MLA_OK) {
        fprintf(stderr, "mla weights: no context: %s\n", mla_status_name(st));
        return MLA_EXIT_FAIL;
    }
    mla_safetensors *f = NULL;
    st = mla_safetensors_open(ctx, path, &f);
    if (st != MLA_OK) {
        int rc = fail(ctx, st, path);
        mla_context_destroy(ctx);
        return rc;
    }
    static const char *keys[] = {"format", "mla.config", "mla.seed", "mla.formats"};
    char text[600];
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; ++k)
        if (mla_safetensors_metadata(f, keys[k]))
            printf("%s: %s\n", keys[k],
                   mla_app_printable(mla_safetensors_metadata(f, keys[k]), text, sizeof text));
    printf("%lld tensors\n", (long long)mla_safetensors_count(f));
    for (int64_t i = 0; i < mla_safetensors_count(f); ++i) {
        mla_safetensors_info t;
        mla_safetensors_info_at(f, i, &t);
        char shape[128] = "[";
        for (int32_t d = 0; d < t.ndim; ++d) {
            size_t n = strlen(shape);
            snprintf(shape + n, sizeof shape - n, "%s%lld", d ? ", " : "", (long long)t.shape[d]);
        }
        strncat(shape, "]", sizeof shape - strlen(shape) - 1);
        char nm[600];
        printf("  %-56s %-8s %-20s %lld\n", mla_app_printable(t.name, nm, sizeof nm), t.file_dtype, shape,
               (long long)t.bytes);
    }
    int rc = MLA_EXIT_OK;
    if (config) {
        mla_layer_weights_ex w;
        st = mla_layer_weights_load(ctx, f, &cfg, layer, NULL, &w);
        if (st != MLA_OK) {
            rc = fail(ctx, st, "load");
        } else {
            printf("layer %lld of %s loads:\n", (long long)layer, cfg.name);
            print_formats(&w, &cfg);
            mla_layer_weights_free(ctx, &w);
        }
    }
    mla_safetensors_close(f);
    mla_context_destroy(ctx);
    return rc;
}

static const char *weights_sub_at(int i, void *user)
{
    return ((const char *const *)user)[i];
}

int cmd_weights(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "generate"))
        return generate(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "info"))
        return info(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "inspect"))
        return weights_inspect(argc - 1, argv + 1);
    if (argc >= 2) {
        static const char *const subs[] = {"generate", "info", "inspect", NULL};
        fprintf(stderr, "mla weights: unknown subcommand '%s'", argv[1]);
        mla_suggest(stderr, argv[1], weights_sub_at, (void *)subs);
        fprintf(stderr, "\n");
    }
    usage_weights(stderr);
    return MLA_EXIT_USAGE;
}
