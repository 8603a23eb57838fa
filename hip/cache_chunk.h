/* Chunks of a latent-cache token on the device (MLA.md section 4), for the
 * writer, the gather and the fused RoPE + cache write. Byte offsets come
 * from core/ref/cache_layout.h, the file the reference and the CPU backend
 * use; element values follow core/ref/cache.c:
 *
 *     BF16 element:       RNE(v)
 *     fp8 element:        sat_fp8(fl(v / k_scale))                (NORMAL, SHUFFLED)
 *     FP8_SCALED nope:    s = 2^ceil(log2(max(fl(amax / fp8_max), 1e-4))) per 128
 *                         dims, value sat_fp8(fl(v / s)); rope dims RNE(v) as bf16
 *
 * with format_bits' NaN rule for the fp32 divisions and products, so NaN
 * bytes match the host's too. A token's dims split into chunks of up to 8:
 * nope chunks at 0, 8, ... < L, then rope chunks at L, L + 8, ... . Each
 * chunk is one contiguous run of bytes in every layout (SHUFFLED tiles hold
 * 8 or 16 consecutive dims, and L, R are multiples of them there), so it
 * moves as one 16- or 8-byte access where aligned. */
#ifndef MLA_HIP_CACHE_CHUNK_H
#define MLA_HIP_CACHE_CHUNK_H

#include "hip/chunk8.h"

#include "core/ref/cache_layout.h"

constexpr int kGroupChunks = MLA_CL_SCALE_GROUP / kChunk; /* FP8_SCALED: chunks per scale */
static_assert(MLA_WAVE_SIZE % kGroupChunks == 0, "scale teams must not straddle waves");

/* The cache's element type CT (BF16 or an fp8) is the kernels' template
 * parameter; the layout is a run-time value (offset arithmetic only). */
struct cache_dev {
    uint8_t *data;
    int64_t block_stride; /* bytes (cache.stride[0]) */
    uint32_t L, R, bs;    /* 32-bit unsigned: kernel arguments live in scalar registers,
                           * and 32 x 32 -> 64 multiply-adds take them as they are */
    int32_t layout;
    float k_scale;
};

MLA_DEV bool cache_fp8s(const cache_dev &c) { return c.layout == MLA_CL_FP8_SCALED; }

/* Dims from d of this chunk are bf16 in the cache. */
template <int CT> MLA_DEV bool cache_bf16_at(const cache_dev &c, int64_t d)
{
    return CT == MLA_DTYPE_BF16 || (cache_fp8s(c) && d >= c.L);
}

/* Byte address of dim d of token t of block `block`: a chunk's run starts
 * here. The element size is a constant of CT, so the layout's divisions by
 * the tile width K are shifts. */
template <int CT>
MLA_DEV uint8_t *cache_at(const cache_dev &c, int64_t block, int64_t t, int64_t d)
{
    uint8_t *blk = c.data + block * c.block_stride;
    if (cache_fp8s(c))
        return blk + (d < c.L ? mla_cl_fp8s_value_byte(t, d, c.L, c.R)
                              : mla_cl_fp8s_rope_byte(t, d - c.L, c.L, c.R));
    return blk + mla_cl_elem_byte(c.layout, t, d, c.L, c.R, c.bs, dtype_bytes<CT>);
}

/* (block, token in block) of a slot >= 0. */
struct cache_pos {
    int64_t block, t;
};

/* mla_cl_slot_block / mla_cl_slot_token. 32-bit division for slots below
 * 2^32; above, an fp64 quotient corrected exactly in integers (the compiler's
 * 64-bit division by a uniform divisor takes more scalar registers than
 * these kernels have left). */
MLA_DEV cache_pos slot_pos(const cache_dev &c, int64_t slot)
{
    cache_pos p;
    const uint32_t bs = c.bs;
    if ((uint64_t)slot <= 0xFFFFFFFFull) {
        p.block = (uint32_t)slot / bs;
        p.t = (uint32_t)slot % bs;
        return p;
    }
    int64_t q = (int64_t)((double)slot / (double)bs); /* within a few units of the quotient */
    int64_t r = slot - q * (int64_t)bs;
    while (r < 0) {
        --q;
        r += bs;
    }
    while (r >= (int64_t)bs) {
        ++q;
        r -= bs;
    }
    p.block = q;
    p.t = r;
    return p;
}


/* FP8_SCALED: the scale of the 128-dim group whose 16 nope chunks a team of
 * 16 consecutive lanes holds (the chunk at d0 with n values here; n = 0 on
 * lanes without one). amax keeps the group's last NaN (by dim, sign
 * cleared), as the host's loop does; then fl(amax / fp8_max), the 1e-4
 * floor (a NaN passes with its bits), and 2^ceil(log2) from the exponent
 * bits. Every lane of the wave calls it: the team reduction shuffles. */
template <int CT>
MLA_DEV float fp8s_group_scale(int64_t d0, int n, const float v[kChunk])
{
    long long key = 0;
#pragma unroll
    for (int j = 0; j < kChunk; ++j) {
        const uint32_t a = mla_fb_bits(v[j]) & 0x7FFFFFFFu;
        const long long k =
            a > 0x7F800000u ? (1ll << 62) | ((long long)(d0 + j) << 32) | a : (long long)a;
        key = (j < n && k > key) ? k : key;
    }
    key = team_max_i64(key, kGroupChunks);
    const float fp8_max = CT == MLA_DTYPE_FP8_E4M3FNUZ ? 224.0f : 448.0f;
    const float q = mla_fb_div(mla_fb_float((uint32_t)key), fp8_max);
    return mla_fb_pow2_ceil(mla_fb_floor_pos(q, 1e-4f));
}

/* Stores the n values of the chunk at dim d0 of the token at `at`, encoded
 * as the cache holds them; s is the FP8_SCALED group scale of a nope chunk.
 * The lane holding a group's first chunk also stores the scale. */
template <int CT, int MODE = kAuto>
MLA_DEV void cache_put(const cache_dev &c, cache_pos at, int64_t d0, int n, const float v[kChunk],
                       float s)
{
    uint32_t w[4] = {0, 0, 0, 0};
    int nbytes = n;
    if (cache_bf16_at<CT>(c, d0)) {
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
            w[j / 2] |= (uint32_t)mla_fb_f32_to_bf16(v[j]) << (16 * (j % 2));
        nbytes = 2 * n;
    } else if constexpr (CT != MLA_DTYPE_BF16) {
        const float div = cache_fp8s(c) ? s : c.k_scale;
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
            w[j / 4] |= encode_value<CT>(mla_fb_div(v[j], div)) << (8 * (j % 4));
    }
    store_bytes<MODE>(cache_at<CT>(c, at.block, at.t, d0), w, nbytes);
    if (cache_fp8s(c) && d0 < c.L && d0 % MLA_CL_SCALE_GROUP == 0) {
        const uint32_t sw[4] = {mla_fb_bits(s), 0, 0, 0};
        uint8_t *blk = c.data + at.block * c.block_stride;
        store_bytes<MODE>(blk + mla_cl_fp8s_scale_byte(at.t, d0 / MLA_CL_SCALE_GROUP, c.L, c.R), sw,
                          4);
    }
}

/* cache_put for a chunk of rope dims r0 .. r0+n-1 (no scale groups there):
 * bf16 in FP8_SCALED, the cache's element type otherwise. */
template <int CT, int MODE>
MLA_DEV void cache_put_rope(const cache_dev &c, cache_pos at, int64_t r0, int n,
                            const float v[kChunk])
{
    uint8_t *blk = c.data + at.block * c.block_stride;
    uint32_t w[4] = {0, 0, 0, 0};
    if (CT == MLA_DTYPE_BF16 || cache_fp8s(c)) {
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
            w[j / 2] |= (uint32_t)mla_fb_f32_to_bf16(v[j]) << (16 * (j % 2));
        uint8_t *p = blk + (cache_fp8s(c) ? mla_cl_fp8s_rope_byte(at.t, r0, c.L, c.R)
                                          : mla_cl_elem_byte(c.layout, at.t, c.L + r0, c.L, c.R,
                                                             c.bs, dtype_bytes<CT>));
        store_bytes<MODE>(p, w, 2 * n);
    } else if constexpr (CT != MLA_DTYPE_BF16) {
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
            w[j / 4] |= encode_value<CT>(mla_fb_div(v[j], c.k_scale)) << (8 * (j % 4));
        store_bytes<MODE>(blk + mla_cl_elem_byte(c.layout, at.t, c.L + r0, c.L, c.R, c.bs, 1), w,
                          n);
    }
}

/* The n values of the chunk at dim d0 of token t of `block`, dequantized in
 * fp32 as the reference's gather reads them (fp8 * k_scale, fp8 * s, bf16). */
template <int CT>
MLA_DEV void cache_get(const cache_dev &c, int64_t block, int64_t t, int64_t d0, int n,
                       float v[kChunk])
{
    const uint8_t *p = cache_at<CT>(c, block, t, d0);
    uint32_t w[4];
    if (cache_bf16_at<CT>(c, d0)) {
        load_bytes(p, w, 2 * n);
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
            v[j] = mla_fb_bf16_to_f32((uint16_t)(w[j / 2] >> (16 * (j % 2))));
        return;
    }
    if constexpr (CT != MLA_DTYPE_BF16) {
        float s = c.k_scale;
        if (cache_fp8s(c)) {
            const uint8_t *blk = c.data + block * c.block_stride;
            uint32_t sw[4];
            load_bytes(blk + mla_cl_fp8s_scale_byte(t, d0 / MLA_CL_SCALE_GROUP, c.L, c.R), sw, 4);
            s = mla_fb_float(sw[0]);
        }
        load_bytes(p, w, n);
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
            v[j] = mla_fb_mul(unpack_value<CT>(w, j), s);
    }
}

/* The device view of a validated descriptor and cache tensor; fails when a
 * dim does not fit the view's 32 bits. */
static inline mla_status make_cache_dev(mla_context *ctx, const mla_cache_desc &d,
                                        const mla_tensor &cache, cache_dev &c)
{
    mla_status st = check_dim32(ctx, d.kv_lora + d.rope, "cache_desc.kv_lora");
    if (st == MLA_OK)
        st = check_dim32(ctx, d.block_size, "cache_desc.block_size");
    c.data = static_cast<uint8_t *>(cache.data);
    c.block_stride = cache.stride[0];
    c.L = (uint32_t)d.kv_lora;
    c.R = (uint32_t)d.rope;
    c.bs = (uint32_t)d.block_size;
    c.layout = (int32_t)d.layout;
    c.k_scale = d.k_scale;
    return st;
}

/* Every 8-value chunk of a token is full and aligned for the wide access
 * (16 bytes of bf16, 8 of fp8; FP8_SCALED scales 4) in every block and
 * token: the cache side of a kWide launch. */
static inline bool cache_wide_ok(const mla_cache_desc &d, const mla_tensor &cache)
{
    const int64_t L = d.kv_lora, R = d.rope, eb = (int64_t)mla_dtype_size(d.dtype);
    if (L % kChunk || R % kChunk || reinterpret_cast<uintptr_t>(cache.data) % 16 ||
        cache.stride[0] % 16)
        return false;
    switch (d.layout) {
    case MLA_CACHE_FP8_SCALED: { /* L fp8 values, L/128 scales, bf16 rope */
        const int64_t head = L + 4 * (L / MLA_CL_SCALE_GROUP);
        return (head + 2 * R) % 16 == 0 && head % 16 == 0;
    }
    case MLA_CACHE_SHUFFLED: /* 16-byte tile rows; L, R multiples of their width */
        return true;
    default:
        return ((L + R) * eb) % (8 * eb) == 0 && (L * eb) % (8 * eb) == 0;
    }
}

/* Items of one token: its nope chunks, then `rope_items` for the rope dims,
 * padded for FP8_SCALED so that every scale group's 16 chunks sit on 16
 * consecutive lanes (items and block starts are multiples of 16). */
static inline int64_t token_items(const mla_cache_desc &d, int64_t rope_items)
{
    const int64_t n = (d.kv_lora + kChunk - 1) / kChunk + rope_items;
    return d.layout == MLA_CACHE_FP8_SCALED ? (n + kGroupChunks - 1) / kGroupChunks * kGroupChunks
                                            : n;
}

#endif
