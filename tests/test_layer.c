/* The whole layer (mla_layer_forward) against the float64 reference
 * (conformance/layer_ref64.h: values in double, error scale propagated from the
 * library's roundings; accepted when |y - ref| <= 6 sd per element), on one
 * backend: `test_layer reference|cpu|hip` (hip: exit 77 without a GPU).
 *
 * Cases: test-tiny, test-tiny-noq, test-tiny-indexer (dense and sparse,
 * contexts longer than its top-k of 64, so the selection is real), and a
 * DeepSeek-V2-Lite-shaped layer with a short context; bf16 and fp8 block
 * weights (kv_b_proj bf16, or fp8 with one scale per tensor: the loader's
 * FP8_TENSOR form), and MXFP4 (q_a, q_b, kv_a, kv_b with the loader's W_kc / W_vc
 * operands, o_proj through the fused flatten quant and the a4w4 GEMM); the
 * three RoPE sites; bf16 and fp8 latent caches; bf16 and f32
 * activations; f32 and bf16 y. Each runs a chunked prefill of two sequences (cu_q_lens) and decode
 * steps (next_n = 1) over a paged cache whose blocks are out of order.
 * Sparse: the reference attends over the library's top-k (the indexer ops
 * have their own conformance cases), which must be a valid causal
 * selection. The attention's forms: the forced expanded form on every
 * step (prefill chunks and decode) at both rotating-before sites, bf16 and
 * f32 activations, bf16 and fp8 caches, and AUTO choosing it for a prefill
 * of mla_layer_expanded_min_rows tokens and the absorbed form for its decode
 * steps. Negative control: the layer with a forced second rotation
 * (inside attention as well as at the plan's site) must fail the bound. */
#include <stdlib.h>
#include <string.h>

#include "tests/layer_run.h"
#include "tests/test_util.h"

typedef struct layer_case {
    const char *cfg;
    int fmt; /* 0 bf16, 1 fp8 blocks, 2 MXFP4 */
    lr_case c;
    mla_layer_form form;
} layer_case;

#define BF MLA_DTYPE_BF16
#define F8 MLA_DTYPE_FP8_E4M3FN
#define F32 MLA_DTYPE_F32
#define EXP MLA_LAYER_FORM_EXPANDED
#define AUTO MLA_LAYER_FORM_AUTO
#define AUTO_ROWS 86 /* mla_layer_expanded_min_rows(test-tiny): 2 128 64 / 192, rounded up */

static const layer_case cases[] = {
    {"test-tiny", 0, {-1, 0, BF, F32, 2, {5, 3}, 2, 0, BF}, AUTO},
    {"test-tiny", 0, {MLA_ROPE_SITE_SEPARATE, 0, BF, F32, 2, {5, 3}, 2, 0, BF}, AUTO},
    {"test-tiny", 0, {MLA_ROPE_SITE_ATTENTION, 0, BF, F32, 2, {5, 3}, 2, 0, BF}, AUTO},
    {"test-tiny", 1, {-1, 0, BF, BF, 2, {6, 1}, 2, 0, BF}, AUTO},
    {"test-tiny", 0, {-1, 0, F8, F32, 2, {5, 3}, 2, 0, BF}, AUTO},
    {"test-tiny", 1, {MLA_ROPE_SITE_ATTENTION, 0, F8, F32, 2, {4, 4}, 1, 0, BF}, AUTO},
    {"test-tiny-noq", 0, {-1, 0, BF, F32, 2, {5, 3}, 2, 0, BF}, AUTO},
    {"test-tiny-noq", 1, {MLA_ROPE_SITE_ATTENTION, 0, BF, F32, 2, {2, 7}, 2, 0, BF}, AUTO},
    {"test-tiny-indexer", 0, {-1, 1, BF, F32, 2, {5, 3}, 1, 0, BF}, AUTO},
    {"test-tiny-indexer", 0, {-1, 0, BF, F32, 2, {70, 4}, 2, 0, BF}, AUTO},
    {"test-tiny-indexer", 1, {MLA_ROPE_SITE_ATTENTION, 0, BF, F32, 2, {66, 2}, 1, 0, BF}, AUTO},
    {"test-tiny", 2, {-1, 0, BF, F32, 2, {5, 3}, 2, 0, BF}, AUTO},
    {"test-tiny", 3, {-1, 0, BF, F32, 2, {5, 3}, 1, 0, BF}, AUTO},
    {"test-tiny-noq", 3, {MLA_ROPE_SITE_ATTENTION, 0, F8, BF, 2, {2, 4}, 1, 0, BF}, AUTO},
    {"test-tiny", 2, {MLA_ROPE_SITE_ATTENTION, 0, BF, BF, 2, {4, 2}, 1, 0, BF}, AUTO},
    {"test-tiny-noq", 2, {-1, 0, F8, F32, 2, {3, 5}, 1, 0, BF}, AUTO},
    {"DeepSeek-V2-Lite", 0, {-1, 0, BF, F32, 2, {2, 1}, 1, 0, BF}, AUTO},
    {"DeepSeek-V2-Lite", 1, {MLA_ROPE_SITE_ATTENTION, 0, BF, F32, 1, {3}, 1, 0, BF}, AUTO},
    /* f32 activations at every RoPE site (the HIP fused site once wrote zeros) */
    {"test-tiny", 0, {MLA_ROPE_SITE_FUSED_CACHE, 0, BF, F32, 2, {5, 3}, 2, 0, F32}, AUTO},
    {"test-tiny", 0, {MLA_ROPE_SITE_SEPARATE, 0, F8, BF, 2, {5, 3}, 1, 0, F32}, AUTO},
    {"test-tiny", 1, {MLA_ROPE_SITE_ATTENTION, 0, BF, F32, 2, {4, 4}, 1, 0, F32}, AUTO},
    {"test-tiny-noq", 0, {-1, 0, F8, F32, 2, {2, 7}, 2, 0, F32}, AUTO},
    {"test-tiny-indexer", 0, {-1, 0, BF, F32, 2, {70, 4}, 1, 0, F32}, AUTO},
    {"DeepSeek-V2-Lite", 0, {MLA_ROPE_SITE_FUSED_CACHE, 0, BF, F32, 1, {3}, 1, 0, F32}, AUTO},
    /* the expanded form: forced, and AUTO's choice for a long enough prefill */
    {"test-tiny", 0, {-1, 0, BF, F32, 2, {5, 3}, 2, 0, BF}, EXP},
    {"test-tiny-noq", 0, {MLA_ROPE_SITE_SEPARATE, 0, F8, BF, 2, {2, 7}, 1, 0, F32}, EXP},
    {"test-tiny-indexer", 0, {MLA_ROPE_SITE_FUSED_CACHE, 1, BF, F32, 2, {6, 2}, 1, 0, F32}, EXP},
    {"DeepSeek-V2-Lite", 0, {-1, 0, BF, F32, 1, {3}, 1, 0, BF}, EXP},
    {"test-tiny", 0, {-1, 0, BF, F32, 1, {AUTO_ROWS}, 1, 0, BF}, AUTO},
};

static const char *const fmt_names[] = {"bf16", "fp8", "mxfp4", "fp8t"};

static const char *site_name(int site)
{
    return site < 0 ? "default" : mla_rope_site_name((mla_rope_site)site);
}

static void run_case(mla_context *ctx, const layer_case *k, int negative)
{
    layer_model m;
    if (layer_model_make(ctx, k->cfg, k->fmt, 0xC0FFEEu + (uint32_t)k->fmt, &m) != 0) {
        CHECK(!"model");
        return;
    }
    lr_case c = k->c;
    c.rotate_twice = negative;
    lr_result r;
    mla_status st = lr_run_form(ctx, &m, &c, k->form, 1, &r);
    CHECK_STATUS(st, MLA_OK);
    if (st == MLA_OK) {
        /* forced: every step expanded; AUTO: the prefill of AUTO_ROWS rows only */
        const int want = k->form == EXP ? r.steps : c.prefill[0] >= AUTO_ROWS;
        const int pass = r.max_ratio <= 1.0 && r.topk_bad == 0 && r.expanded_steps == want;
        printf("%-18s %-5s act %-4s site %-11s %-7s cache %-11s y %-4s form %-4s (%d/%d "
               "expanded): max |err| %.3g (max |y| %.3g), err / (6 sd) %.3f%s%s\n",
               k->cfg, fmt_names[k->fmt], c.act == F32 ? "f32" : "bf16", site_name(c.site),
               m.cfg.index_heads > 0 ? (c.dense ? "dense" : "sparse") : "dense",
               mla_dtype_name(c.cache_dtype), mla_dtype_name(c.y_dtype),
               k->form == EXP ? "exp" : "auto", r.expanded_steps, r.steps, r.max_err, r.max_abs_y,
               r.max_ratio, r.topk_bad ? " BAD TOP-K" : "",
               negative ? (pass ? "  <- negative control PASSED (wrong)"
                                : "  (negative control: fails, as it must)")
                        : "");
        CHECK(negative ? !pass : pass);
    }
    lr_free(&r);
    layer_model_free(&m);
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "reference";
    mla_backend b = MLA_BACKEND_REFERENCE;
    if (!strcmp(name, "cpu"))
        b = MLA_BACKEND_CPU;
    else if (!strcmp(name, "hip"))
        b = MLA_BACKEND_HIP;
    mla_context *ctx = NULL;
    mla_status st = mla_context_create(b, NULL, &ctx);
    if (st != MLA_OK) {
        printf("%s: not run (%s)\n", name, mla_status_name(st));
        return b == MLA_BACKEND_HIP ? 77 : 1;
    }
    printf("%s (%s)\n", mla_backend_name(b), mla_context_device_name(ctx));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
        run_case(ctx, &cases[i], 0);
    /* the negative control: rotated twice, on the default site and the separate
     * one */
    run_case(ctx, &cases[0], 1);
    run_case(ctx, &cases[1], 1);
    const int64_t n = mla_layer_expanded_min_rows(&(mla_model_config){.kv_lora = 128, .nope = 32,
                                                                     .v = 32});
    CHECK(n == AUTO_ROWS);
    mla_context_destroy(ctx);
    return TEST_SUMMARY();
}
