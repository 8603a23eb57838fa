/* Controls of the DSA indexer's conformance (MLA.md section 6, seed 002).
 *
 * Seed 002's two bugs, which must be reported as FAIL:
 * (a) a K cache written SHUFFLE and read as NORMAL: a gather and a logits
 *     kernel that read every cache as NORMAL, and a composite that writes
 *     with the resolved layout and gathers with NORMAL (indexer_k_roundtrip,
 *     caught against the golden vectors as well as the reference);
 * (b) a fast path that assumed the RoPE rotated k in place while the RoPE it
 *     called returned a new tensor: a composite that calls mla_rope out of
 *     place into a new buffer and then quantizes and caches the ORIGINAL,
 *     unrotated k (indexer_rope_k_cache); the cache bytes must FAIL.
 * One wrong kernel per comparator besides: top-k with ties to the higher
 * index and with -0 below +0, a search whose top-k ranks whole rows instead
 * of each row's causal bound, logits without relu and without the causal
 * mask among the next_n (-inf positions), a K cache writer whose scale is
 * not rounded up under ue8m0, that ignores a forced layout, k's strides, or
 * writes a stray scale, LayerNorm without eps and with the unbiased variance,
 * a Hadamard transform missing a butterfly level or the 1/sqrt(D), head
 * weights with the constants folded first.
 * Positive controls, which must PASS (the bounds are not too tight): fp32
 * logits with k scaled before the dot, FMA dots and the heads summed
 * backwards; fp32 one-pass LayerNorm in the folded form x (r w) + (b - mu r w);
 * fp32 butterflies with the levels in reverse order and the scale applied
 * first; head weights in MLA.md's order, written here (bit-exact). The
 * kernels written here run once (on the reference table); the wrappers of a
 * table's own kernels run on the reference and the CPU tables. */
#include <math.h>
#include <stdio.h>

#include "conformance/cases_indexer.h"
#include "tests/conformance_negative.h"

static int64_t off2(const mla_tensor *t, int64_t i, int64_t j)
{
    return i * t->stride[0] + j * t->stride[1];
}

static int32_t load_i32(const mla_tensor *t, int64_t off)
{
    int32_t v;
    memcpy(&v, neg_at(t, off), 4);
    return v;
}

/* ------------------------------------------------- wrong cache kernels */

/* (a) bits: a gather that reads every cache as NORMAL. */
static mla_status gather_as_normal(mla_context *ctx, const mla_indexer_cache_args *a)
{
    mla_indexer_cache_args b = *a;
    b.desc.layout = MLA_INDEXER_NORMAL;
    return neg_base->indexer_k_gather(ctx, &b);
}

/* (a) bound: a logits kernel that reads every cache as NORMAL. */
static mla_status logits_as_normal(mla_context *ctx, const mla_indexer_logits_args *a)
{
    mla_indexer_logits_args b = *a;
    b.desc.layout = MLA_INDEXER_NORMAL;
    return neg_base->indexer_logits(ctx, &b);
}

/* bits: under ue8m0 the scale is not rounded up to a power of two. */
static mla_status write_no_roundup(mla_context *ctx, const mla_indexer_cache_args *a)
{
    mla_indexer_cache_args b = *a;
    b.desc.ue8m0 = 0;
    return neg_base->indexer_k_cache_write(ctx, &b);
}

/* bits: a writer that ignores a forced layout (always the block-size rule),
 * where the rule's layout fits the block (SHUFFLE needs 16-token tiles). */
static mla_status write_ignores_forced_layout(mla_context *ctx, const mla_indexer_cache_args *a)
{
    mla_indexer_cache_args b = *a;
    if (a->desc.block_size == 1 || a->desc.block_size % 16 == 0)
        b.desc.layout = mla_indexer_layout_for(a->desc.block_size);
    return neg_base->indexer_k_cache_write(ctx, &b);
}

/* bits: reads k as a contiguous row-major tensor. */
static mla_status write_ignores_k_strides(mla_context *ctx, const mla_indexer_cache_args *a)
{
    mla_indexer_cache_args b = *a;
    mla_tensor_init(&b.k, a->k.data, a->k.dtype, a->k.memory, 2, a->k.shape);
    return neg_base->indexer_k_cache_write(ctx, &b);
}

/* bits: also copies each written scale into the next token's scale (when no
 * row writes that token): a stray write into bytes the call does not own. */
static mla_status write_stray_scale(mla_context *ctx, const mla_indexer_cache_args *a)
{
    mla_status st = neg_base->indexer_k_cache_write(ctx, a);
    const int64_t T = a->k.shape[0], bs = a->desc.block_size, D = a->desc.head_dim;
    for (int64_t i = 0; st == MLA_OK && i < T; ++i) {
        const int64_t slot = neg_index(&a->slots, i), next = slot + 1;
        int owned = 0;
        for (int64_t j = 0; j < T; ++j)
            owned |= neg_index(&a->slots, j) == next;
        if (slot < 0 || next % bs == 0 || owned)
            continue;
        unsigned char *blk = (unsigned char *)a->cache.data + (slot / bs) * a->cache.stride[0];
        memcpy(blk + conf_idx_scale_byte(next % bs, bs, D),
               blk + conf_idx_scale_byte(slot % bs, bs, D), 4);
    }
    return st;
}

/* ---------------------------------------------------------- top-k */

/* A contiguous copy of logits [R, N] (any strides): each row reversed within
 * its length, or with -0 made the negative number nearest zero. */
static mla_tensor logits_copy(const mla_topk_args *a, int reverse, int zero_below)
{
    mla_tensor t = neg_alloc(MLA_DTYPE_F32, 2, a->logits.shape);
    const int64_t R = a->logits.shape[0], N = a->logits.shape[1];
    for (int64_t r = 0; t.data && r < R; ++r) {
        const int64_t len = neg_index(&a->lengths, r);
        for (int64_t n = 0; n < N; ++n) {
            const int64_t src = reverse && n < len ? len - 1 - n : n;
            float v = neg_load(&a->logits, off2(&a->logits, r, src));
            if (zero_below && v == 0.0f && signbit(v))
                v = -0x1p-149f; /* -0 ranked below +0 (the float's bits as the key) */
            ((float *)t.data)[r * N + n] = v;
        }
    }
    return t;
}

/* bits: ties go to the HIGHER index (the base top-k of the reversed rows,
 * mapped back: the chosen set of the higher ties, in descending index
 * order, so reversed once more within the chosen). */
static mla_status topk_ties_high(mla_context *ctx, const mla_topk_args *a)
{
    mla_topk_args b = *a;
    b.logits = logits_copy(a, 1, 0);
    mla_status st = b.logits.data ? neg_base->topk(ctx, &b) : MLA_ERR_OUT_OF_MEMORY;
    for (int64_t r = 0; st == MLA_OK && r < a->indices.shape[0]; ++r) {
        const int64_t len = neg_index(&a->lengths, r), m = a->k < len ? a->k : len;
        for (int64_t c = 0; c < m; ++c) {
            int32_t *p = (int32_t *)neg_at(&a->indices, off2(&a->indices, r, c));
            *p = (int32_t)(len - 1 - *p);
        }
        for (int64_t c = 0; c < m / 2; ++c) {
            int32_t *p = (int32_t *)neg_at(&a->indices, off2(&a->indices, r, c)),
                    *q = (int32_t *)neg_at(&a->indices, off2(&a->indices, r, m - 1 - c)), t = *p;
            *p = *q;
            *q = t;
        }
    }
    free(b.logits.data);
    return st;
}

/* bits: -0 ranked below +0 (a radix select on the raw bits). */
static mla_status topk_signed_zeros(mla_context *ctx, const mla_topk_args *a)
{
    mla_topk_args b = *a;
    b.logits = logits_copy(a, 0, 1);
    mla_status st = b.logits.data ? neg_base->topk(ctx, &b) : MLA_ERR_OUT_OF_MEMORY;
    free(b.logits.data);
    return st;
}

/* bits (the search): every row ranked over its whole width instead of its
 * causal bound, so rows shorter than k hold -inf positions, not -1. */
static mla_status topk_whole_rows(mla_context *ctx, const mla_topk_args *a)
{
    mla_topk_args b = *a;
    b.lengths = neg_alloc(MLA_DTYPE_I32, 1, a->lengths.shape);
    for (int64_t r = 0; b.lengths.data && r < a->lengths.shape[0]; ++r)
        ((int32_t *)b.lengths.data)[r] = (int32_t)a->logits.shape[1];
    mla_status st = b.lengths.data ? neg_base->topk(ctx, &b) : MLA_ERR_OUT_OF_MEMORY;
    free(b.lengths.data);
    return st;
}

/* ----------------------------------- logits, fp32 (positive) and variants */

enum { LG_NO_RELU = 1, LG_NO_CAUSAL = 2 };
static int lg_flags;

/* fp32 paged logits computed differently from the reference: k scaled by its
 * scale before the dot, the dot as a chain of FMAs, the heads summed from the
 * last. Correct unless lg_flags says otherwise. */
static mla_status logits_fp32(mla_context *ctx, const mla_indexer_logits_args *a)
{
    (void)ctx;
    const int64_t B = a->context_lens.shape[0], nn = a->next_n, N = a->logits.shape[1];
    const int64_t Hi = a->q.shape[1], D = a->desc.head_dim, bs = a->desc.block_size;
    for (int64_t b = 0; b < B; ++b) {
        const int64_t len = load_i32(&a->context_lens, b * a->context_lens.stride[0]);
        for (int64_t j = 0; j < nn; ++j) {
            const int64_t r = b * nn + j, bound = lg_flags & LG_NO_CAUSAL ? len : len - nn + j + 1;
            for (int64_t n = 0; n < N; ++n) {
                float *out = (float *)neg_at(&a->logits, off2(&a->logits, r, n));
                if (n >= bound) {
                    *out = -INFINITY;
                    continue;
                }
                const int32_t blk = load_i32(&a->block_table, off2(&a->block_table, b, n / bs));
                const unsigned char *base =
                    (const unsigned char *)a->cache.data + blk * a->cache.stride[0];
                float s, k[CONF_IDX_D], acc = 0.0f;
                memcpy(&s, base + conf_idx_scale_byte(n % bs, bs, D), 4);
                for (int64_t i = 0; i < D; ++i)
                    k[i] = mla_fp8_to_f32(
                               base[conf_idx_value_byte((int32_t)a->desc.layout, n % bs, i, D)],
                               a->desc.dtype) *
                           s;
                for (int64_t h = Hi - 1; h >= 0; --h) {
                    float dot = 0.0f;
                    for (int64_t i = 0; i < D; ++i)
                        dot = fmaf(neg_load(&a->q, r * a->q.stride[0] + h * a->q.stride[1] +
                                                       i * a->q.stride[2]),
                                   k[i], dot);
                    if (!(lg_flags & LG_NO_RELU))
                        dot = dot > 0.0f ? dot : 0.0f;
                    acc += neg_load(&a->w, off2(&a->w, r, h)) * dot;
                }
                *out = acc;
            }
        }
    }
    return MLA_OK;
}

/* -------------------------------- LayerNorm, fp32 (positive) and variants */

enum { LN_NO_EPS = 1, LN_UNBIASED = 2 };
static int ln_flags;

/* fp32, one pass (sum and sum of squares, var = E[x^2] - mean^2), the folded
 * form y = x (r w) + (b - mean r w). */
static mla_status layernorm_fp32(mla_context *ctx, const mla_layernorm_args *a)
{
    (void)ctx;
    const int64_t T = a->x.shape[0], D = a->x.shape[1];
    const float eps = ln_flags & LN_NO_EPS ? 0.0f : a->eps;
    for (int64_t t = 0; t < T; ++t) {
        float s = 0.0f, s2 = 0.0f;
        for (int64_t d = 0; d < D; ++d) {
            const float x = neg_load(&a->x, off2(&a->x, t, d));
            s += x;
            s2 += x * x;
        }
        const float mean = s / (float)D;
        float var = ln_flags & LN_UNBIASED ? (s2 - (float)D * mean * mean) / (float)(D - 1)
                                           : s2 / (float)D - mean * mean;
        var = var > 0.0f ? var : 0.0f;
        const float r = 1.0f / sqrtf(var + eps);
        for (int64_t d = 0; d < D; ++d) { /* read x before y is written (in place) */
            const float w = neg_load(&a->w, d * a->w.stride[0]) * r;
            const float c = neg_load(&a->b, d * a->b.stride[0]) - mean * w;
            neg_store(&a->y, off2(&a->y, t, d), neg_load(&a->x, off2(&a->x, t, d)) * w + c);
        }
    }
    return MLA_OK;
}

/* ---------------------------------- Hadamard, fp32 (positive) and variants */

static int had_skip_level, had_no_norm;

/* fp32 butterflies, the levels from the widest to the narrowest, the
 * normalisation fl(1/sqrt(D)) applied first. */
static mla_status hadamard_fp32(mla_context *ctx, const mla_hadamard_args *a)
{
    (void)ctx;
    const int64_t T = a->x.shape[0], H = a->x.shape[1], D = a->x.shape[2];
    float *row = malloc((size_t)D * sizeof *row);
    if (!row)
        return MLA_ERR_OUT_OF_MEMORY;
    const float c = had_no_norm ? 1.0f : (float)(1.0 / sqrt((double)D));
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
            const int64_t o = t * a->x.stride[0] + h * a->x.stride[1];
            for (int64_t i = 0; i < D; ++i)
                row[i] = neg_load(&a->x, o + i * a->x.stride[2]) * c;
            for (int64_t w = D / 2; w >= 1; w /= 2) {
                if (had_skip_level && w == 1)
                    continue;
                for (int64_t i0 = 0; i0 < D; i0 += 2 * w)
                    for (int64_t i = i0; i < i0 + w; ++i) {
                        const float x0 = row[i], x1 = row[i + w];
                        row[i] = x0 + x1;
                        row[i + w] = x0 - x1;
                    }
            }
            const int64_t oy = t * a->y.stride[0] + h * a->y.stride[1];
            for (int64_t i = 0; i < D; ++i)
                neg_store(&a->y, oy + i * a->y.stride[2], row[i]);
        }
    free(row);
    return MLA_OK;
}

/* ----------------------------------------------------------- head weights */

static int hw_folded;

/* w_out = fl(fl(fl(w s_q) c_d) c_h), c_d = fl(128^-0.5), c_h = fl(Hi^-0.5)
 * (MLA.md section 6); folded: w (s_q (c_d c_h)), which rounds differently. */
static mla_status head_weights_spec(mla_context *ctx, const mla_head_weights_args *a)
{
    (void)ctx;
    const int64_t T = a->w.shape[0], Hi = a->w.shape[1];
    const float cd = (float)(1.0 / sqrt(128.0)), ch = (float)(1.0 / sqrt((double)Hi));
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < Hi; ++h) {
            const float w = neg_load(&a->w, off2(&a->w, t, h));
            const float s = neg_load(&a->s_q, off2(&a->s_q, t, h));
            const float v = hw_folded ? w * (s * (cd * ch)) : w * s * cd * ch;
            neg_store(&a->w_out, off2(&a->w_out, t, h), v);
        }
    return MLA_OK;
}

/* ------------------------------------------------ the composites (swaps) */

/* (a) through the harness: the cache written with its resolved layout and
 * gathered as NORMAL (seed 002's hardcoded reader). */
static mla_status roundtrip_read_normal(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    mla_indexer_cache_desc d = conf_idx_desc(c), r = d;
    r.layout = MLA_INDEXER_NORMAL;
    mla_status st = mla_indexer_k_cache_write(ctx, &d, &t[CONF_RT_CACHE], &t[CONF_RT_K],
                                              &t[CONF_RT_SLOTS]);
    if (st == MLA_OK)
        st = mla_indexer_k_gather(ctx, &r, &t[CONF_RT_CACHE], &t[CONF_RT_TABLE], &t[CONF_RT_CU],
                                  &t[CONF_RT_FP8], &t[CONF_RT_SCALE]);
    return st;
}

/* (b) the fast path: mla_rope returns the rotated k in a new buffer, but the
 * path assumed it rotated k in place and caches the ORIGINAL k. */
static mla_status rope_assumed_in_place(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    mla_indexer_cache_desc d = conf_idx_desc(c);
    mla_status st = mla_rope(ctx, &t[CONF_RK_COS], &t[CONF_RK_SIN], &t[CONF_RK_POS], &t[CONF_RK_K],
                             &t[CONF_RK_ROT], (mla_rope_style)c->p.idx.style);
    if (st == MLA_OK) /* should have been t[CONF_RK_ROT] */
        st = mla_indexer_k_cache_write(ctx, &d, &t[CONF_RK_CACHE], &t[CONF_RK_K],
                                       &t[CONF_RK_SLOTS]);
    return st;
}

/* Runs the conformance of one suite with its exec swapped on the tested
 * side; the report is kept in log (NUL-terminated, truncated to len). */
static int run_swap(const mla_backend_ops *ops, const char *label, const conf_suite *swap,
                    mla_conformance_summary *sum, char *log, size_t len)
{
    mla_conformance_options opt;
    mla_conformance_options_init(&opt);
    opt.op_pattern = swap->name;
    opt.suite = MLA_CONF_SUITE_LISTED; /* as neg_run */
    FILE *f = tmpfile();
    int rc = mla_conformance_run_ops_swap(&opt, ops, label, swap, f ? f : stdout, sum);
    log[0] = '\0';
    if (f) {
        rewind(f);
        size_t n = fread(log, 1, len - 1, f);
        log[n] = '\0';
        const char *show = getenv("MLA_NEGATIVE_LOG");
        if (show && *show == '1')
            fputs(log, stdout);
        fclose(f);
    }
    return rc;
}

/* Every failure line of the log ("FAIL op case ...") names `output` as its
 * first mismatch. */
static int fails_name(const char *log, const char *output)
{
    char want[64];
    snprintf(want, sizeof want, "): %s[", output);
    int n = 0;
    for (const char *p = strstr(log, "FAIL "); p; p = strstr(p + 1, "FAIL ")) {
        if (p != log && p[-1] != '\n')
            continue; /* the table's result column */
        const char *eol = strchr(p, '\n');
        const char *hit = strstr(p, want);
        if (!hit || (eol && hit > eol))
            return 0;
        ++n;
    }
    return n > 0;
}

static void swap_controls(const mla_backend_ops *from)
{
    static char log[1 << 16];
    mla_conformance_summary s;
    char what[200];
    int rc;

    conf_suite rt = conf_suite_indexer_k_roundtrip;
    rt.exec = roundtrip_read_normal;
    rc = run_swap(from, "write SHUFFLE, gather NORMAL", &rt, &s, log, sizeof log);
    snprintf(what, sizeof what, "(a) %s: a cache written SHUFFLE and gathered as NORMAL is caught "
             "by bits (golden and generated), NORMAL caches still pass", from->name);
    neg_expect(rc == 1 && s.by_kind[MLA_CONF_FAIL_BITS] >= 8 && s.passed >= 8 &&
                   fails_name(log, "k_fp8"),
               what, &s);

    conf_suite rk = conf_suite_indexer_rope_k_cache;
    rk.exec = rope_assumed_in_place;
    rc = run_swap(from, "RoPE assumed in place", &rk, &s, log, sizeof log);
    snprintf(what, sizeof what, "(b) %s: caching the unrotated k after an out-of-place mla_rope "
             "is caught by the cache bytes (bits) in every case", from->name);
    neg_expect(rc == 1 && s.failed > 0 && s.failed == s.cases &&
                   s.by_kind[MLA_CONF_FAIL_BITS] == s.failed && fails_name(log, "cache"),
               what, &s);
}

/* A cache written SHUFFLE by the reference and gathered through the public
 * API with the layout forced to NORMAL gives rows that differ from the rows
 * gathered as SHUFFLE. */
static void direct_shuffle_as_normal(void)
{
    enum { T = 40, BS = 16, NB = 3 };
    mla_indexer_cache_desc d = {NB, BS, CONF_IDX_D, MLA_DTYPE_FP8_E4M3FN, MLA_INDEXER_LAYOUT_AUTO,
                                1};
    int64_t bb = 0;
    mla_indexer_cache_block_bytes(&d, &bb);
    const int64_t ks[2] = {T, CONF_IDX_D}, cs[2] = {NB, bb}, ts[1] = {T}, bts[2] = {1, NB},
                  two = 2;
    mla_tensor k = neg_alloc(MLA_DTYPE_F32, 2, ks), cache = neg_alloc(MLA_DTYPE_U8, 2, cs);
    mla_tensor slots = neg_alloc(MLA_DTYPE_I32, 1, ts), bt = neg_alloc(MLA_DTYPE_I32, 2, bts);
    mla_tensor f1 = neg_alloc(MLA_DTYPE_FP8_E4M3FN, 2, ks),
               f2 = neg_alloc(MLA_DTYPE_FP8_E4M3FN, 2, ks);
    mla_tensor s1 = neg_alloc(MLA_DTYPE_F32, 1, ts), s2 = neg_alloc(MLA_DTYPE_F32, 1, ts);
    mla_tensor cu = neg_alloc(MLA_DTYPE_I32, 1, &two);
    for (int64_t i = 0; i < T * CONF_IDX_D; ++i)
        ((float *)k.data)[i] = (float)((i * 37) % 101) - 50.0f;
    for (int32_t t = 0; t < T; ++t)
        ((int32_t *)slots.data)[t] = t;
    for (int32_t b = 0; b < NB; ++b)
        ((int32_t *)bt.data)[b] = b;
    ((int32_t *)cu.data)[0] = 0, ((int32_t *)cu.data)[1] = T;
    memset(cache.data, 0, (size_t)(NB * bb));
    mla_context *ref = NULL;
    mla_status st = mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ref);
    if (st == MLA_OK)
        st = mla_indexer_k_cache_write(ref, &d, &cache, &k, &slots);
    if (st == MLA_OK)
        st = mla_indexer_k_gather(ref, &d, &cache, &bt, &cu, &f1, &s1);
    mla_indexer_cache_desc n = d;
    n.layout = MLA_INDEXER_NORMAL;
    if (st == MLA_OK)
        st = mla_indexer_k_gather(ref, &n, &cache, &bt, &cu, &f2, &s2);
    int differ = 0;
    for (int64_t t = 0; st == MLA_OK && t < T; ++t)
        differ += memcmp(neg_at(&f1, t * CONF_IDX_D), neg_at(&f2, t * CONF_IDX_D), CONF_IDX_D) != 0;
    mla_conformance_summary none;
    memset(&none, 0, sizeof none);
    char what[200];
    snprintf(what, sizeof what, "(a) direct: a SHUFFLE cache gathered with the layout forced to "
             "NORMAL: %d of %d rows differ from the SHUFFLE gather", differ, T);
    neg_expect(st == MLA_OK && differ > T / 2 && !memcmp(s1.data, s2.data, 4 * T), what, &none);
    mla_context_destroy(ref);
    free(k.data), free(cache.data), free(slots.data), free(bt.data), free(f1.data);
    free(f2.data), free(s1.data), free(s2.data), free(cu.data);
}

/* A table without an indexer_logits slot: "unsupported (op)", not FAIL. */
static void empty_slot(const mla_backend_ops *from)
{
    mla_backend_ops t = *from;
    t.indexer_logits = NULL;
    mla_conformance_summary s;
    int rc = neg_run(&t, "no indexer_logits kernel", "indexer_logits", &s);
    char what[160];
    snprintf(what, sizeof what, "%s without an indexer_logits slot reports unsupported (op)",
             from->name);
    neg_expect(rc == 0 && s.failed == 0 && s.unsupported > 0 && s.passed == 0, what, &s);
}

void neg_indexer_controls(const mla_backend_ops *from)
{
    const mla_conformance_failure BITS = MLA_CONF_FAIL_BITS, BOUND = MLA_CONF_FAIL_BOUND;
    mla_backend_ops t;
    t = *from, t.indexer_k_gather = gather_as_normal;
    neg_negative(from, &t, "(a) gather reading a SHUFFLE cache as NORMAL", "indexer_k_gather",
                 BITS);
    t = *from, t.indexer_logits = logits_as_normal;
    neg_negative(from, &t, "(a) logits reading a SHUFFLE cache as NORMAL", "indexer_logits",
                 BOUND);
    swap_controls(from);
    t = *from, t.indexer_k_cache_write = write_no_roundup;
    neg_negative(from, &t, "k cache with the scale not rounded up under ue8m0",
                 "indexer_k_cache_write", BITS);
    neg_negative(from, &t, "k cache with the scale not rounded up under ue8m0 (golden)",
                 "indexer_k_roundtrip", BITS);
    t = *from, t.indexer_k_cache_write = write_ignores_forced_layout;
    neg_negative(from, &t, "k cache writer ignoring a forced layout", "indexer_k_cache_write",
                 BITS);
    t = *from, t.indexer_k_cache_write = write_ignores_k_strides;
    neg_negative(from, &t, "k cache writer ignoring k's strides", "indexer_k_cache_write", BITS);
    t = *from, t.indexer_k_cache_write = write_stray_scale;
    neg_negative(from, &t, "k cache writer with a stray scale write", "indexer_k_cache_write",
                 BITS);
    t = *from, t.topk = topk_ties_high;
    neg_negative(from, &t, "top-k with ties to the higher index", "topk", BITS);
    t = *from, t.topk = topk_signed_zeros;
    neg_negative(from, &t, "top-k ranking -0 below +0", "topk", BITS);
    t = *from, t.topk = topk_whole_rows;
    neg_negative(from, &t, "search ranking whole rows, not each row's causal bound",
                 "indexer_search", BITS);
    t = *from, t.indexer_logits = logits_as_normal;
    neg_negative(from, &t, "(a) search reading a SHUFFLE cache as NORMAL", "indexer_search",
                 BOUND);
    if (from != &mla_reference_ops) /* the rest are written here: any base table will do */
        return;

    t = *from, t.indexer_logits = logits_fp32, lg_flags = 0;
    neg_positive(from, &t, "fp32 logits (k scaled first, FMA dots, heads backwards)",
                 "indexer_logits");
    lg_flags = LG_NO_RELU;
    neg_negative(from, &t, "logits without relu", "indexer_logits", BOUND);
    lg_flags = LG_NO_CAUSAL;
    neg_negative(from, &t, "logits without the causal mask among next_n (-inf positions)",
                 "indexer_logits", MLA_CONF_FAIL_CLASS);
    lg_flags = 0;

    t = *from, t.layernorm = layernorm_fp32, ln_flags = 0;
    neg_positive(from, &t, "fp32 one-pass layernorm, folded x (r w) + (b - mean r w)",
                 "layernorm");
    ln_flags = LN_NO_EPS;
    neg_negative(from, &t, "layernorm without eps", "layernorm", BOUND);
    ln_flags = LN_UNBIASED;
    neg_negative(from, &t, "layernorm with the unbiased variance", "layernorm", BOUND);
    ln_flags = 0;

    t = *from, t.hadamard = hadamard_fp32;
    neg_positive(from, &t, "fp32 hadamard, levels widest first, scaled first", "hadamard");
    had_skip_level = 1;
    neg_negative(from, &t, "hadamard missing a butterfly level", "hadamard", BOUND);
    had_skip_level = 0, had_no_norm = 1;
    neg_negative(from, &t, "hadamard without 1/sqrt(D)", "hadamard", BOUND);
    had_no_norm = 0;

    t = *from, t.indexer_head_weights = head_weights_spec, hw_folded = 0;
    neg_positive(from, &t, "head weights in MLA.md's order, written here",
                 "indexer_head_weights");
    hw_folded = 1;
    neg_negative(from, &t, "head weights with the constants folded first",
                 "indexer_head_weights", BITS);
    hw_folded = 0;

    direct_shuffle_as_normal();
    empty_slot(from);
}
