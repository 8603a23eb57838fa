/* Negative controls of the prepare-path comparators: one deliberately wrong
 * kernel per new comparison (bit-exact RoPE, the GEMM and RMSNorm bounds, the
 * quantized q_out bound, raw cache bytes, gathered rows), each compiled into
 * this test only and copied into the slot of a reference or CPU table. Each
 * must be reported as FAIL by the comparator named. Two of them are the
 * RoPE-once failures of MLA.md (section 3): rotating twice, and a cache
 * written SHUFFLED but read as NORMAL. */
#include <math.h>
#include <stdio.h>

#include "tests/conformance_negative.h"

static int64_t off3(const mla_tensor *t, int64_t i, int64_t j, int64_t k)
{
    return i * t->stride[0] + j * t->stride[1] + k * t->stride[2];
}

/* bits: RoPE with fused multiply-adds (out_a = fma(a, c, -b s)). */
static mla_status rope_fma(mla_context *ctx, const mla_rope_args *a)
{
    (void)ctx;
    const int64_t T = a->x.shape[0], H = a->x.shape[1], D = a->x.shape[2], half = a->rope_dim / 2;
    float *row = malloc((size_t)D * sizeof *row);
    for (int64_t t = 0; row && t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
            const int64_t pos = neg_index(&a->positions, t);
            for (int64_t d = 0; d < D; ++d)
                row[d] = neg_load(&a->x, off3(&a->x, t, h, d));
            for (int64_t i = 0; i < half; ++i) {
                const int64_t ia = a->style == MLA_ROPE_NEOX ? i : 2 * i;
                const int64_t ib = a->style == MLA_ROPE_NEOX ? i + half : 2 * i + 1;
                const float c = neg_load(&a->cos, pos * a->cos.stride[0] + i * a->cos.stride[1]);
                const float s = neg_load(&a->sin, pos * a->sin.stride[0] + i * a->sin.stride[1]);
                const float x0 = row[ia], x1 = row[ib];
                row[ia] = fmaf(x0, c, -(x1 * s));
                row[ib] = fmaf(x0, s, x1 * c);
            }
            for (int64_t d = 0; d < D; ++d)
                neg_store(&a->y, off3(&a->y, t, h, d), row[d]);
        }
    free(row);
    return row ? MLA_OK : MLA_ERR_OUT_OF_MEMORY;
}

/* A copy of a [P, n] table, negated or not, contiguous. */
static mla_tensor table_copy(const mla_tensor *src, float sign)
{
    mla_tensor t = neg_alloc(MLA_DTYPE_F32, 2, src->shape);
    for (int64_t p = 0; t.data && p < src->shape[0]; ++p)
        for (int64_t i = 0; i < src->shape[1]; ++i)
            ((float *)t.data)[p * src->shape[1] + i] =
                sign * neg_load(src, p * src->stride[0] + i * src->stride[1]);
    return t;
}

/* bits: RoPE with the sign of sin flipped (rotating by -pos). */
static mla_status rope_sin_flipped(mla_context *ctx, const mla_rope_args *a)
{
    mla_rope_args b = *a;
    b.sin = table_copy(&a->sin, -1.0f);
    mla_status st = b.sin.data ? neg_base->rope(ctx, &b) : MLA_ERR_OUT_OF_MEMORY;
    free(b.sin.data);
    return st;
}

/* bound: a batched GEMM ignoring its output strides: y written as a
 * contiguous [B, M, N] tensor, so the [H, T, L] view of a [T, H, L] buffer
 * gets head-major rows (batch and row dims swapped in memory). Only where
 * that stays inside the view's span (dense views); others run correctly. */
static mla_status gemm_ignores_y_strides(mla_context *ctx, const mla_batched_gemm_args *a)
{
    mla_batched_gemm_args b = *a;
    int64_t span = 0;
    for (int d = 0; d < 3; ++d)
        span += (a->y.shape[d] - 1) * a->y.stride[d];
    if (span + 1 == mla_tensor_numel(&a->y))
        mla_tensor_init(&b.y, a->y.data, a->y.dtype, a->y.memory, 3, a->y.shape);
    return neg_base->batched_gemm(ctx, &b);
}

/* bound: RMSNorm without eps. */
static mla_status rmsnorm_no_eps(mla_context *ctx, const mla_rmsnorm_args *a)
{
    mla_rmsnorm_args b = *a;
    b.eps = 0.0f;
    return neg_base->rmsnorm(ctx, &b);
}

/* bound: linear accumulating in bf16 (each partial sum rounded to bf16). */
static mla_status linear_bf16_acc(mla_context *ctx, const mla_linear_args *a)
{
    (void)ctx;
    const int64_t T = a->x.shape[0], K = a->x.shape[1], N = a->w.shape[0];
    for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k) {
                float w = neg_load(&a->w, n * a->w.stride[0] + k * a->w.stride[1]);
                if (a->w_scale.data)
                    w *= neg_load(&a->w_scale, (n / 128) * a->w_scale.stride[0] +
                                                   (k / 128) * a->w_scale.stride[1]);
                const float p = neg_load(&a->x, t * a->x.stride[0] + k * a->x.stride[1]) * w;
                acc = mla_bf16_to_f32(mla_f32_to_bf16(acc + p));
            }
            neg_store(&a->y, t * a->y.stride[0] + n * a->y.stride[1], acc);
        }
    return MLA_OK;
}

/* bound (quantized q_out): MXFP4 q_out by the OCP rule (no round-up of
 * amax), from the same fp32 normalized rows. */
static mla_status qk_mxfp4_ocp(mla_context *ctx, const mla_qk_rmsnorm_args *a)
{
    if (a->q_out.dtype != MLA_DTYPE_FP4X2)
        return neg_base->qk_rmsnorm(ctx, a);
    mla_qk_rmsnorm_args b = *a;
    b.q_out = neg_alloc(MLA_DTYPE_F32, 2, a->q.shape);
    mla_status st = b.q_out.data ? neg_base->qk_rmsnorm(ctx, &b) : MLA_ERR_OUT_OF_MEMORY;
    mla_mxfp4_quant_args m = {b.q_out,          a->q_out,      a->q_scales, MLA_SCALE_ROW_MAJOR,
                              MLA_MXFP4_OCP,    a->q.shape[0], a->q.shape[1]};
    if (st == MLA_OK)
        st = neg_base->mxfp4_quant(ctx, &m);
    free(b.q_out.data);
    return st;
}

/* bound (quantized q_out): fp8 q_out whose scales are twice what the codes need. */
static mla_status qk_fp8_scales_doubled(mla_context *ctx, const mla_qk_rmsnorm_args *a)
{
    mla_status st = neg_base->qk_rmsnorm(ctx, a);
    if (st != MLA_OK || a->q_scales.dtype != MLA_DTYPE_F32)
        return st;
    for (int64_t t = 0; t < a->q_scales.shape[0]; ++t)
        for (int64_t g = 0; g < a->q_scales.shape[1]; ++g) {
            const int64_t o = t * a->q_scales.stride[0] + g * a->q_scales.stride[1];
            neg_store(&a->q_scales, o, 2.0f * neg_load(&a->q_scales, o));
        }
    return MLA_OK;
}

/* Element offset of (token t, dim d) inside a block in aiter's OLD shuffled
 * form: each 16-token group holds its nope tiles and then its rope tiles. */
static int64_t old_shuffle_elem(int64_t t, int64_t d, int64_t L, int64_t R, int64_t K)
{
    const int64_t g = (t / 16) * 16 * (L + R), i = t % 16;
    if (d < L)
        return g + (d / K) * 16 * K + i * K + d % K;
    return g + 16 * L + ((d - L) / K) * 16 * K + i * K + (d - L) % K;
}

/* bits (cache bytes): SHUFFLED written with the old aiter offsets. The
 * values come from the correct writer into a NORMAL scratch cache. */
static mla_status cache_write_old_shuffle(mla_context *ctx, const mla_cache_write_args *a)
{
    if (a->desc.layout != MLA_CACHE_SHUFFLED)
        return neg_base->cache_write(ctx, a);
    mla_cache_write_args b = *a;
    b.desc.layout = MLA_CACHE_NORMAL;
    const int64_t shape[2] = {a->desc.num_blocks, a->block_bytes};
    b.cache = neg_alloc(MLA_DTYPE_U8, 2, shape);
    mla_status st = b.cache.data ? neg_base->cache_write(ctx, &b) : MLA_ERR_OUT_OF_MEMORY;
    const int64_t L = a->desc.kv_lora, R = a->desc.rope, bs = a->desc.block_size;
    const int64_t eb = (int64_t)mla_dtype_size(a->desc.dtype);
    for (int64_t j = 0; st == MLA_OK && j < a->k_nope.shape[0]; ++j) {
        const int64_t slot = neg_index(&a->slots, j);
        if (slot < 0)
            continue;
        const unsigned char *src = (unsigned char *)b.cache.data + (slot / bs) * a->block_bytes;
        unsigned char *dst = (unsigned char *)a->cache.data + (slot / bs) * a->cache.stride[0];
        for (int64_t d = 0; d < L + R; ++d)
            memcpy(dst + old_shuffle_elem(slot % bs, d, L, R, 16 / eb) * eb,
                   src + ((slot % bs) * (L + R) + d) * eb, (size_t)eb);
    }
    free(b.cache.data);
    return st;
}

/* bits (gathered rows): a gather that reads every cache as NORMAL. */
static mla_status gather_as_normal(mla_context *ctx, const mla_cache_gather_args *a)
{
    mla_cache_gather_args b = *a;
    if (b.desc.layout == MLA_CACHE_SHUFFLED)
        b.desc.layout = MLA_CACHE_NORMAL;
    return neg_base->cache_gather(ctx, &b);
}

/* A [n0, n1] (2-D) or [n0, 1, n1] view of rows r0.. of a 2-D tensor. */
static mla_tensor rows_of(const mla_tensor *t, int64_t r0, int as3d)
{
    mla_tensor v = *t;
    v.data = neg_at(t, r0 * t->stride[0]);
    v.shape[0] = t->shape[0] - r0;
    if (as3d) {
        v.ndim = 3;
        v.shape[2] = t->shape[1], v.stride[2] = t->stride[1];
        v.shape[1] = 1, v.stride[1] = t->shape[1] * t->stride[1];
    }
    return v;
}

/* (a) bits: rotates twice, as a separate RoPE before a fused kernel that
 * rotates again: mla_rope's result (fp32) fed to the fused op as q_pe, k_pe. */
static mla_status rope_cache_twice(mla_context *ctx, const mla_rope_cache_op_args *a)
{
    mla_rope_cache_op_args b = *a;
    const int64_t R = a->desc.rope;
    b.q_pe = neg_alloc(MLA_DTYPE_F32, 3, a->q_pe.shape);
    b.k_pe = neg_alloc(MLA_DTYPE_F32, 2, a->k_pe.shape);
    mla_status st = b.q_pe.data && b.k_pe.data ? MLA_OK : MLA_ERR_OUT_OF_MEMORY;
    mla_rope_args rq = {a->cos, a->sin, a->q_pos, a->q_pe, b.q_pe, a->style, R};
    mla_rope_args rk = {a->cos,          a->sin,         a->k_pos, rows_of(&a->k_pe, 0, 1),
                        rows_of(&b.k_pe, 0, 1), a->style, R};
    if (st == MLA_OK && a->q_pe.shape[0])
        st = neg_base->rope(ctx, &rq);
    if (st == MLA_OK)
        st = neg_base->rope(ctx, &rk);
    if (st == MLA_OK)
        st = neg_base->rope_cache(ctx, &b);
    free(b.q_pe.data);
    free(b.k_pe.data);
    return st;
}

/* bits: aiter's fused kernel, which leaves keys without a query (j >= T)
 * unrotated: the fused op on the first T keys, a plain write for the rest. */
static mla_status rope_cache_keys_unrotated(mla_context *ctx, const mla_rope_cache_op_args *a)
{
    const int64_t T = a->q_nope.shape[0], Tk = a->k_nope.shape[0];
    mla_rope_cache_op_args b = *a;
    b.k_nope.shape[0] = b.k_pe.shape[0] = b.k_pos.shape[0] = b.slots.shape[0] = T;
    b.k_pe_out.shape[0] = T;
    mla_status st = T ? neg_base->rope_cache(ctx, &b) : MLA_OK;
    mla_cache_write_args w = {a->desc,
                              a->block_bytes,
                              a->cache,
                              rows_of(&a->k_nope, T, 0),
                              rows_of(&a->k_pe, T, 0),
                              rows_of(&a->slots, T, 0)};
    if (st == MLA_OK && Tk > T)
        st = neg_base->cache_write(ctx, &w);
    return st;
}

/* (b) directly: a cache written SHUFFLED and gathered by a table whose
 * gather reads NORMAL gives rows that differ from the values written. */
static void shuffled_read_as_normal(mla_backend_ops *wrong)
{
    enum { T = 20, L = 128, R = 16, BS = 16, NB = 2 };
    mla_cache_desc d = {MLA_CACHE_SHUFFLED, MLA_DTYPE_BF16, NB, BS, L, R, 1.0f};
    int64_t bb = 0;
    mla_cache_block_bytes(&d, &bb);
    const int64_t ks[2] = {T, L + R}, cs[2] = {NB, bb}, ss[1] = {T}, bts[2] = {1, NB}, one = 1;
    mla_tensor kv = neg_alloc(MLA_DTYPE_BF16, 2, ks), out = neg_alloc(MLA_DTYPE_BF16, 2, ks);
    mla_tensor cache = neg_alloc(MLA_DTYPE_U8, 2, cs), slots = neg_alloc(MLA_DTYPE_I32, 1, ss);
    int32_t table[NB] = {0, 1}, len[1] = {T};
    mla_tensor bt, sl;
    mla_tensor_init(&bt, table, MLA_DTYPE_I32, MLA_MEMORY_HOST, 2, bts);
    mla_tensor_init(&sl, len, MLA_DTYPE_I32, MLA_MEMORY_HOST, 1, &one);
    for (int64_t i = 0; i < T * (L + R); ++i) /* distinct bf16 values */
        ((uint16_t *)kv.data)[i] = mla_f32_to_bf16((float)(i % 251) - 125.0f);
    for (int32_t t = 0; t < T; ++t)
        ((int32_t *)slots.data)[t] = t;
    mla_tensor kn = kv, kp = kv;
    kn.shape[1] = L;
    kp.shape[1] = R;
    kp.data = neg_at(&kv, L);
    mla_context *ref = NULL, *bad = NULL;
    int differ = 0, same_ref = 1;
    mla_status st = mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ref);
    if (st == MLA_OK)
        st = mla_context_create_with_ops(wrong, NULL, &bad);
    if (st == MLA_OK)
        st = mla_cache_write(ref, &d, &cache, &kn, &kp, &slots);
    if (st == MLA_OK)
        st = mla_cache_gather(ref, &d, &cache, &bt, &sl, &out);
    for (int64_t i = 0; st == MLA_OK && i < T * (L + R); ++i)
        same_ref &= ((uint16_t *)out.data)[i] == ((uint16_t *)kv.data)[i];
    if (st == MLA_OK)
        st = mla_cache_gather(bad, &d, &cache, &bt, &sl, &out);
    for (int64_t t = 0; st == MLA_OK && t < T; ++t)
        differ += memcmp(neg_at(&out, t * (L + R)), neg_at(&kv, t * (L + R)), 2 * (L + R)) != 0;
    mla_conformance_summary none;
    memset(&none, 0, sizeof none);
    char what[160];
    snprintf(what, sizeof what, "SHUFFLED cache read as NORMAL: %d of %d gathered rows differ "
             "from the written values (the reference's gather gives them back)", differ, T);
    neg_expect(st == MLA_OK && same_ref && differ > T / 2, what, &none);
    mla_context_destroy(bad);
    mla_context_destroy(ref);
    free(kv.data), free(out.data), free(cache.data), free(slots.data);
}

/* A table with no rope slot: its cases are "unsupported (op)", not FAIL. */
static void empty_slot(const mla_backend_ops *from)
{
    mla_backend_ops t = *from;
    t.rope = NULL;
    mla_conformance_summary s;
    int rc = neg_run(&t, "no rope kernel", "rope", &s);
    char what[160];
    snprintf(what, sizeof what, "%s without a rope slot reports unsupported (op), not FAIL",
             from->name);
    neg_expect(rc == 0 && s.failed == 0 && s.unsupported > 0 && s.passed == 0, what, &s);
}

void neg_prepare_controls(const mla_backend_ops *from)
{
    mla_backend_ops t = *from;
    const mla_conformance_failure BITS = MLA_CONF_FAIL_BITS, BOUND = MLA_CONF_FAIL_BOUND;
    t.rope = rope_fma;
    neg_negative(from, &t, "rope with an FMA", "rope", BITS);
    t = *from, t.rope = rope_sin_flipped;
    neg_negative(from, &t, "rope with sin's sign flipped", "rope", BITS);
    t = *from, t.batched_gemm = gemm_ignores_y_strides;
    neg_negative(from, &t, "batched gemm ignoring y's strides", "batched_gemm", BOUND);
    t = *from, t.rmsnorm = rmsnorm_no_eps;
    neg_negative(from, &t, "rmsnorm without eps", "rmsnorm", BOUND);
    t = *from, t.linear = linear_bf16_acc;
    neg_negative(from, &t, "linear accumulating in bf16", "linear", BOUND);
    t = *from, t.qk_rmsnorm = qk_mxfp4_ocp;
    neg_negative(from, &t, "qk rmsnorm with MXFP4 q_out by the OCP rule", "qk_rmsnorm", BOUND);
    t = *from, t.qk_rmsnorm = qk_fp8_scales_doubled;
    neg_negative(from, &t, "qk rmsnorm with fp8 q_scales doubled", "qk_rmsnorm", BOUND);
    t = *from, t.cache_write = cache_write_old_shuffle;
    neg_negative(from, &t, "cache write with the old aiter shuffle", "cache_write", BITS);
    t = *from, t.cache_gather = gather_as_normal;
    neg_negative(from, &t, "(b) SHUFFLED cache gathered as NORMAL", "cache_gather", BITS);
    shuffled_read_as_normal(&t);
    t = *from, t.rope_cache = rope_cache_twice;
    neg_negative(from, &t, "(a) RoPE applied twice (mla_rope, then the fused op)", "rope_cache",
                 BITS);
    t = *from, t.rope_cache = rope_cache_keys_unrotated;
    neg_negative(from, &t, "fused op leaving keys without a query unrotated", "rope_cache", BITS);
    empty_slot(from);
}
