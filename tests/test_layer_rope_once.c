/* RoPE-once for the whole layer (MLA.md section 3, seed 000): on every
 * backend this build runs (reference, cpu; hip when a GPU answers), for
 * test-tiny, test-tiny-noq and test-tiny-indexer (sparse), the three RoPE
 * sites (SEPARATE, FUSED_CACHE, ATTENTION) run through mla_layer_forward
 * (a prefill of two sequences, then decode steps) must leave byte-identical
 * caches and give identical y; and every prefill token's cached row must be
 * [k_nope | k_pe rotated once by its position], with the unrotated k_pe from
 * the same backend's public ops and the rotation computed here (fp32, each
 * product rounded, one rounding to bf16).
 * Negative control: the layer with a forced second rotation (the attention
 * call rotates q and the keys again after the plan's site did) must give a
 * different y, so the comparison above would catch seed 000's bug. */
#include <stdlib.h>
#include <string.h>

#include "tests/layer_run.h"
#include "tests/test_rope_row.h"
#include "tests/test_util.h"

/* The prefill's rows in a NORMAL bf16 cache (row of slot s at s * D). */
static int rows_rotated_once(const layer_model *m, const lr_result *r)
{
    const int64_t L = m->cfg.kv_lora, R = m->cfg.rope, D = L + R;
    const uint16_t *cache = (const uint16_t *)r->cache;
    uint16_t want[128];
    int bad = 0;
    for (int64_t t = 0; t < r->T[0]; ++t) {
        const uint16_t *row = cache + r->slot_prefill[t] * D, *kv = r->kv_prefill + t * D;
        test_rope_row(kv + L, R, m->hcos, m->hsin, r->pos_prefill[t], want);
        bad += memcmp(row, kv, (size_t)L * 2) != 0;
        bad += memcmp(row + L, want, (size_t)R * 2) != 0;
    }
    return bad == 0;
}

static int same_y(const lr_result *a, const lr_result *b, int64_t hidden)
{
    int same = a->steps == b->steps;
    for (int s = 0; same && s < a->steps; ++s)
        same = !memcmp(a->y[s], b->y[s], (size_t)(a->T[s] * hidden) * sizeof(double));
    return same;
}

static void run_config(mla_context *ctx, const char *cfg)
{
    layer_model m;
    if (layer_model_make(ctx, cfg, 0, 0xABCDu, &m) != 0) {
        CHECK(!"model");
        return;
    }
    const int sparse = m.cfg.index_heads > 0;
    lr_case c = {0, 0, MLA_DTYPE_BF16, MLA_DTYPE_F32, 2, {sparse ? 67 : 5, 3},
                 2, 0, MLA_DTYPE_BF16};
    static const int sites[3] = {MLA_ROPE_SITE_FUSED_CACHE, MLA_ROPE_SITE_SEPARATE,
                                 MLA_ROPE_SITE_ATTENTION};
    lr_result r[3], twice;
    int ok = 1;
    for (int s = 0; s < 3; ++s) {
        c.site = sites[s];
        mla_status st = lr_run(ctx, &m, &c, 0, &r[s]);
        CHECK_STATUS(st, MLA_OK);
        ok &= st == MLA_OK;
    }
    if (ok) {
        int same = 1, once = 1;
        for (int s = 0; s < 3; ++s) {
            const int rs = rows_rotated_once(&m, &r[s]);
            CHECK(rs);
            once &= rs;
        }
        for (int s = 1; s < 3; ++s) {
            const int cs = r[s].cache_bytes == r[0].cache_bytes &&
                           !memcmp(r[s].cache, r[0].cache, r[0].cache_bytes);
            const int ys = same_y(&r[s], &r[0], m.cfg.hidden);
            CHECK(cs);
            CHECK(ys);
            same &= cs && ys;
        }
        printf("%s %s%s: sites separate / fused_cache / attention: caches and y %s; "
               "keys rotated once: %s\n",
               mla_backend_name(mla_context_backend(ctx)), cfg, sparse ? " (sparse)" : "",
               same ? "identical" : "DIFFERENT", once ? "yes" : "NO");
        /* the negative control: rotated at the fused site and inside attention */
        c.site = MLA_ROPE_SITE_FUSED_CACHE;
        c.rotate_twice = 1;
        CHECK_STATUS(lr_run(ctx, &m, &c, 0, &twice), MLA_OK);
        const int differs = twice.steps == 0 || !same_y(&twice, &r[0], m.cfg.hidden);
        CHECK(differs);
        printf("  rotated twice: y %s\n", differs ? "differs (caught)" : "THE SAME (not caught)");
        lr_free(&twice);
    }
    for (int s = 0; s < 3; ++s)
        lr_free(&r[s]);
    layer_model_free(&m);
}

static void run_backend(mla_backend b)
{
    mla_context *ctx = NULL;
    mla_status st = mla_context_create(b, NULL, &ctx);
    if (st != MLA_OK) {
        printf("%s: not run (%s)\n", mla_backend_name(b), mla_status_name(st));
        return;
    }
    static const char *const configs[] = {"test-tiny", "test-tiny-noq", "test-tiny-indexer"};
    for (int i = 0; i < 3; ++i)
        run_config(ctx, configs[i]);
    mla_context_destroy(ctx);
}

int main(void)
{
    run_backend(MLA_BACKEND_REFERENCE);
    run_backend(MLA_BACKEND_CPU);
    run_backend(MLA_BACKEND_HIP);
    return TEST_SUMMARY();
}
