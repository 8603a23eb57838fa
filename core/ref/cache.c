/* Reference latent cache writer and gather (MLA.md section 4). Offsets come
 * from core/ref/cache_layout.h; element values, from the fp32 value v of an
 * input (any float dtype, loaded exactly):
 *
 *     BF16 element:        RNE(v)
 *     fp8 element:         sat_fp8(fl(v / k_scale))          (NORMAL, SHUFFLED)
 *     FP8_SCALED, per group of 128 nope dims:
 *                          s = 2^ceil(log2(max(fl(amax / fp8_max), 1e-4)))
 *                          value sat_fp8(fl(v / s)), s stored as fp32;
 *                          rope dims RNE(v) as bf16
 *
 * fp8_max is 448 (e4m3fn) or 224 (e4m3fnuz). The gather returns NORMAL rows
 * [k_nope | k_pe] dequantized in fp32 (fp8 * k_scale, fp8 * s, bf16 as is),
 * rounded once to out's dtype. Multi-byte fields are little-endian. */
#include <stdlib.h>

#include "core/checked.h"
#include "core/ref/cache_layout.h"
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

_Static_assert(MLA_CL_NORMAL == (int)MLA_CACHE_NORMAL &&
                   MLA_CL_SHUFFLED == (int)MLA_CACHE_SHUFFLED &&
                   MLA_CL_FP8_SCALED == (int)MLA_CACHE_FP8_SCALED,
               "cache_layout.h repeats the values of mla_cache_layout");

/* ------------------------------------------------ little-endian fields */

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v & 0xFFu);
    p[1] = (uint8_t)(v >> 8);
}

static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static void put_f32(uint8_t *p, float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    for (int i = 0; i < 4; ++i)
        p[i] = (uint8_t)(u >> (8 * i));
}

static float get_f32(const uint8_t *p)
{
    uint32_t u = 0;
    for (int i = 0; i < 4; ++i)
        u |= (uint32_t)p[i] << (8 * i);
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* ---------------------------------------------------------- the values */

/* sat_fp8(fl(v / scale)): the quotient in fp32, then the saturating fp8. */
static uint8_t fp8_code(float v, float scale, mla_dtype fp8)
{
    const float q = v / scale;
    return mla_f32_to_fp8(q, fp8, MLA_SATURATE);
}

/* 2^ceil(log2 q) for q > 0, exactly from q's exponent: q = f * 2^e with f in
 * [0.5, 1); f == 0.5 means q already is a power of two. NaN / inf stay. */
static float pow2_ceil(float q)
{
    if (!isfinite(q))
        return q;
    int e;
    const float f = frexpf(q, &e);
    return f == 0.5f ? q : ldexpf(1.0f, e);
}

/* FP8_SCALED scale of the 128 values v: 2^ceil(log2(max(fl(amax / fp8_max),
 * 1e-4))). amax keeps a NaN (then the scale and the values are NaN). */
static float group_scale(const float *v, mla_dtype fp8)
{
    float amax = 0.0f;
    for (int i = 0; i < MLA_CL_SCALE_GROUP; ++i) {
        const float m = fabsf(v[i]);
        if (isnan(m) || m > amax)
            amax = m;
    }
    const float fp8_max = fp8 == MLA_DTYPE_FP8_E4M3FNUZ ? 224.0f : 448.0f;
    float q = amax / fp8_max;
    if (q < 1e-4f) /* false for NaN */
        q = 1e-4f;
    return pow2_ceil(q);
}

static uint8_t *block_at(const mla_tensor *cache, int64_t block)
{
    return (uint8_t *)cache->data + block * cache->stride[0];
}

/* ---------------------------------------------------------- the writer */

/* FP8_SCALED token t of a block: L fp8 values, L/128 scales, R bf16. */
static void write_fp8_scaled(const mla_cache_desc *d, uint8_t *blk, int64_t t, const float *row)
{
    const int64_t L = d->kv_lora, R = d->rope;
    for (int64_t g = 0; g < L / MLA_CL_SCALE_GROUP; ++g) {
        const float *v = row + g * MLA_CL_SCALE_GROUP;
        const float s = group_scale(v, d->dtype);
        put_f32(blk + mla_cl_fp8s_scale_byte(t, g, L, R), s);
        for (int64_t i = 0; i < MLA_CL_SCALE_GROUP; ++i)
            blk[mla_cl_fp8s_value_byte(t, g * MLA_CL_SCALE_GROUP + i, L, R)] =
                fp8_code(v[i], s, d->dtype);
    }
    for (int64_t r = 0; r < R; ++r)
        put_u16(blk + mla_cl_fp8s_rope_byte(t, r, L, R), mla_f32_to_bf16(row[L + r]));
}

void mla_ref_cache_write_slot(const mla_cache_desc *d, const mla_tensor *cache, int64_t slot,
                              const float *row)
{
    const int64_t L = d->kv_lora, R = d->rope, bs = d->block_size;
    uint8_t *blk = block_at(cache, mla_cl_slot_block(slot, bs));
    const int64_t t = mla_cl_slot_token(slot, bs);
    if (d->layout == MLA_CACHE_FP8_SCALED) {
        write_fp8_scaled(d, blk, t, row);
        return;
    }
    const int64_t eb = (int64_t)mla_dtype_size(d->dtype);
    for (int64_t i = 0; i < L + R; ++i) {
        uint8_t *p = blk + mla_cl_elem_byte((int32_t)d->layout, t, i, L, R, bs, eb);
        if (d->dtype == MLA_DTYPE_BF16)
            put_u16(p, mla_f32_to_bf16(row[i]));
        else
            *p = fp8_code(row[i], d->k_scale, d->dtype);
    }
}

mla_status mla_ref_cache_write(mla_context *ctx, const mla_cache_write_args *a)
{
    const int64_t L = a->desc.kv_lora, R = a->desc.rope, T = a->k_nope.shape[0];
    float *row;
    MLA_TRY(mla_alloc_array(ctx, (void **)&row, L + R, 1, sizeof *row, "cache_desc"));
    for (int64_t t = 0; t < T; ++t) {
        const int64_t slot = mla_ref_load_index(&a->slots, t * a->slots.stride[0]);
        if (slot < 0) /* "do not write" */
            continue;
        for (int64_t i = 0; i < L; ++i)
            row[i] = mla_ref_load_f32(&a->k_nope, mla_ref_offset2(&a->k_nope, t, i));
        for (int64_t r = 0; r < R; ++r)
            row[L + r] = mla_ref_load_f32(&a->k_pe, mla_ref_offset2(&a->k_pe, t, r));
        mla_ref_cache_write_slot(&a->desc, &a->cache, slot, row);
    }
    free(row);
    return MLA_OK;
}

/* ---------------------------------------------------------- the gather */

/* Dim i of token t of a block, dequantized exactly in float64: an fp8 code
 * (4 significant bits) times an fp32 scale is exact in 53 bits. */
static double read_value_f64(const mla_cache_desc *d, const uint8_t *blk, int64_t t, int64_t i)
{
    const int64_t L = d->kv_lora, R = d->rope;
    if (d->layout == MLA_CACHE_FP8_SCALED) {
        if (i >= L)
            return mla_bf16_to_f32(get_u16(blk + mla_cl_fp8s_rope_byte(t, i - L, L, R)));
        const float s = get_f32(blk + mla_cl_fp8s_scale_byte(t, i / MLA_CL_SCALE_GROUP, L, R));
        return (double)mla_fp8_to_f32(blk[mla_cl_fp8s_value_byte(t, i, L, R)], d->dtype) * s;
    }
    const int64_t eb = (int64_t)mla_dtype_size(d->dtype);
    const uint8_t *p = blk + mla_cl_elem_byte((int32_t)d->layout, t, i, L, R, d->block_size, eb);
    if (d->dtype == MLA_DTYPE_BF16)
        return mla_bf16_to_f32(get_u16(p));
    return (double)mla_fp8_to_f32(*p, d->dtype) * d->k_scale;
}

/* Dim i of token t of a block, dequantized in fp32: the exact value rounded
 * once, the same bits as fp8 * scale computed in fp32. */
static float read_value(const mla_cache_desc *d, const uint8_t *blk, int64_t t, int64_t i)
{
    return (float)read_value_f64(d, blk, t, i);
}

void mla_ref_cache_read_row(const mla_cache_desc *desc, const mla_tensor *cache, int64_t block,
                            int64_t t, double *row)
{
    const uint8_t *blk = block_at(cache, block);
    for (int64_t i = 0; i < desc->kv_lora + desc->rope; ++i)
        row[i] = read_value_f64(desc, blk, t, i);
}

/* out row n = token j of sequence s, for s in order and j < seq_lens[s]:
 * block block_table[s, j / block_size], token j % block_size. */
mla_status mla_ref_cache_gather(mla_context *ctx, const mla_cache_gather_args *a)
{
    (void)ctx;
    const mla_cache_desc *d = &a->desc;
    const int64_t S = a->seq_lens.shape[0], D = d->kv_lora + d->rope, bs = d->block_size;
    int64_t n = 0;
    for (int64_t s = 0; s < S; ++s) {
        const int64_t len = mla_ref_load_index(&a->seq_lens, s * a->seq_lens.stride[0]);
        for (int64_t j = 0; j < len; ++j, ++n) {
            const int64_t block =
                mla_ref_load_index(&a->block_table, mla_ref_offset2(&a->block_table, s, j / bs));
            const uint8_t *blk = block_at(&a->cache, block);
            for (int64_t i = 0; i < D; ++i)
                mla_ref_store_f32(&a->out, mla_ref_offset2(&a->out, n, i),
                                  read_value(d, blk, j % bs, i), MLA_SATURATE);
        }
    }
    return MLA_OK;
}
