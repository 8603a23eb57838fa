/* Where a value lives in a block of the DSA indexer K cache (MLA.md section 6):
 * the byte-offset math of the two layouts, shared by the reference, the CPU
 * backend (C11) and the HIP backend (HIP / CUDA device code), so that the
 * layout is written down once (seed 002: a writer and a reader that disagreed
 * on it took GSM8K from 0.95 to 0.01).
 *
 * A slot names (block, token t): block = slot / block_size, t = slot %
 * block_size; a block starts at cache.data + block * cache.stride[0] bytes
 * and holds, with D = head_dim (128 in the model):
 *   bytes [0, block_size * D):                 the fp8 values, one byte each
 *     NORMAL:  value (t, d) at t * D + d
 *     SHUFFLE: 16 x 16 tiles (block_size and D multiples of 16), value (t, d) at
 *              (t/16)*16*D + (d/16)*16*16 + (t%16)*16 + d%16
 *   bytes [block_size * D, block_size * (D + 4)): one fp32 scale per token,
 *     little-endian, token t's at block_size * D + 4 * t.
 * The layout is never AUTO here: the entry points resolve it through
 * mla_indexer_layout_for. Everything is 64-bit integer arithmetic on
 * non-negative values. */
#ifndef MLA_CORE_REF_INDEXER_LAYOUT_H
#define MLA_CORE_REF_INDEXER_LAYOUT_H

#include "core/format_bits.h" /* MLA_HD, mla_fb_bits, mla_fb_float */

/* Values of mla_indexer_layout (mla_indexer.h), repeated so that device code
 * needs no host header. */
#define MLA_IL_NORMAL 1
#define MLA_IL_SHUFFLE 2

#define MLA_IL_TILE 16 /* SHUFFLE: tokens and dims per tile */
#define MLA_IL_SCALE_BYTES 4

/* NORMAL: t * D + d. */
MLA_HD int64_t mla_il_normal_byte(int64_t t, int64_t d, int64_t D)
{
    return t * D + d;
}

/* SHUFFLE: the 16 x 16 tile formula of the header comment. */
MLA_HD int64_t mla_il_shuffle_byte(int64_t t, int64_t d, int64_t D)
{
    const int64_t n = MLA_IL_TILE;
    return (t / n) * n * D + (d / n) * n * n + (t % n) * n + d % n;
}

/* Byte offset in its block of the fp8 value (t, d) in layout (MLA_IL_*). */
MLA_HD int64_t mla_il_value_byte(int32_t layout, int64_t t, int64_t d, int64_t D)
{
    return layout == MLA_IL_SHUFFLE ? mla_il_shuffle_byte(t, d, D) : mla_il_normal_byte(t, d, D);
}

/* Byte offset in its block of token t's fp32 scale. */
MLA_HD int64_t mla_il_scale_byte(int64_t t, int64_t block_size, int64_t D)
{
    return block_size * D + MLA_IL_SCALE_BYTES * t;
}

/* Bytes of one block: block_size * (D + 4). */
MLA_HD int64_t mla_il_block_bytes(int64_t block_size, int64_t D)
{
    return block_size * (D + MLA_IL_SCALE_BYTES);
}

/* The fp32 scale at p, little-endian, byte by byte (p need not be aligned:
 * block_size * D is a multiple of 4 only when D or block_size is). */
MLA_HD void mla_il_put_scale(uint8_t *p, float s)
{
    const uint32_t u = mla_fb_bits(s);
    for (int i = 0; i < MLA_IL_SCALE_BYTES; ++i)
        p[i] = (uint8_t)(u >> (8 * i));
}

MLA_HD float mla_il_get_scale(const uint8_t *p)
{
    uint32_t u = 0;
    for (int i = 0; i < MLA_IL_SCALE_BYTES; ++i)
        u |= (uint32_t)p[i] << (8 * i);
    return mla_fb_float(u);
}

#endif
