/* Where a value lives in a block of the MLA latent cache (MLA.md section 4):
 * the byte-offset math of the three layouts, shared by the reference, the
 * CPU backend (C11) and the HIP backend (HIP / CUDA device code), so that a
 * layout is written down once.
 *
 * A slot names (block, token t): block = slot / block_size, t = slot %
 * block_size; a block starts at cache.data + block * cache.stride[0] bytes.
 * Inside a block, with D = L + R:
 *   NORMAL:   element t * D + d.
 *   SHUFFLED: tiles of 16 tokens x K elements (K * element size = 16 bytes:
 *             K = 8 for bf16, 16 for fp8), all nope data first, then all rope:
 *     nope d < L:     (t/16)*16*L + (d/K)*16*K + (t%16)*K + d%K
 *     rope r = d - L: block_size*L + (t/16)*16*R + (r/K)*16*K + (t%16)*K + r%K
 *   FP8_SCALED: token t at byte t * (L + 4 * L/128 + 2 * R): L fp8 values,
 *     L/128 fp32 scales (little-endian), R bf16 rope values (little-endian).
 * Element offsets times the element size are byte offsets. Everything is
 * 64-bit integer arithmetic on non-negative values. */
#ifndef MLA_CORE_REF_CACHE_LAYOUT_H
#define MLA_CORE_REF_CACHE_LAYOUT_H

#include "core/format_bits.h" /* MLA_HD */

/* Values of mla_cache_layout (mla_prepare.h), repeated so that device code
 * needs no host header. */
#define MLA_CL_NORMAL 0
#define MLA_CL_SHUFFLED 1
#define MLA_CL_FP8_SCALED 2

#define MLA_CL_TILE_TOKENS 16  /* tokens per SHUFFLED tile */
#define MLA_CL_TILE_BYTES 16   /* bytes of one tile row */
#define MLA_CL_SCALE_GROUP 128 /* FP8_SCALED: nope dims per fp32 scale */

MLA_HD int64_t mla_cl_slot_block(int64_t slot, int64_t block_size)
{
    return slot / block_size;
}

MLA_HD int64_t mla_cl_slot_token(int64_t slot, int64_t block_size)
{
    return slot % block_size;
}

/* K of the SHUFFLED tiles: elements per 16-byte tile row. */
MLA_HD int64_t mla_cl_shuffle_k(int64_t elem_bytes)
{
    return MLA_CL_TILE_BYTES / elem_bytes;
}

/* NORMAL: element t * (L + R) + d. */
MLA_HD int64_t mla_cl_normal_elem(int64_t t, int64_t d, int64_t L, int64_t R)
{
    return t * (L + R) + d;
}

/* SHUFFLED: the tile formula of the header comment. */
MLA_HD int64_t mla_cl_shuffled_elem(int64_t t, int64_t d, int64_t L, int64_t R, int64_t block_size,
                                    int64_t K)
{
    const int64_t n = MLA_CL_TILE_TOKENS;
    if (d < L)
        return (t / n) * n * L + (d / K) * n * K + (t % n) * K + d % K;
    const int64_t r = d - L;
    return block_size * L + (t / n) * n * R + (r / K) * n * K + (t % n) * K + r % K;
}

/* Byte offset in its block of element (t, d) of a NORMAL or SHUFFLED cache
 * whose elements are elem_bytes wide (2: bf16, 1: fp8). */
MLA_HD int64_t mla_cl_elem_byte(int32_t layout, int64_t t, int64_t d, int64_t L, int64_t R,
                                int64_t block_size, int64_t elem_bytes)
{
    const int64_t e = layout == MLA_CL_SHUFFLED ? mla_cl_shuffled_elem(t, d, L, R, block_size,
                                                                       mla_cl_shuffle_k(elem_bytes))
                                                : mla_cl_normal_elem(t, d, L, R);
    return e * elem_bytes;
}

/* FP8_SCALED: bytes of one token, L + 4 * L/128 + 2 * R (656 for 512 + 64). */
MLA_HD int64_t mla_cl_fp8s_token_bytes(int64_t L, int64_t R)
{
    return L + 4 * (L / MLA_CL_SCALE_GROUP) + 2 * R;
}

/* FP8_SCALED: byte of the fp8 value of nope dim d < L of token t. */
MLA_HD int64_t mla_cl_fp8s_value_byte(int64_t t, int64_t d, int64_t L, int64_t R)
{
    return t * mla_cl_fp8s_token_bytes(L, R) + d;
}

/* FP8_SCALED: first byte of the fp32 scale of group g (dims 128g .. 128g+127). */
MLA_HD int64_t mla_cl_fp8s_scale_byte(int64_t t, int64_t g, int64_t L, int64_t R)
{
    return t * mla_cl_fp8s_token_bytes(L, R) + L + 4 * g;
}

/* FP8_SCALED: first byte of the bf16 rope value r < R of token t. */
MLA_HD int64_t mla_cl_fp8s_rope_byte(int64_t t, int64_t r, int64_t L, int64_t R)
{
    return t * mla_cl_fp8s_token_bytes(L, R) + L + 4 * (L / MLA_CL_SCALE_GROUP) + 2 * r;
}

#endif
