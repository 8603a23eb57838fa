/* The rotation of MLA.md section 3 on the device, shared by RoPE and the
 * fused RoPE + cache write. For pair i of a row, c = cos[pos, i], s =
 * sin[pos, i] (the host-built fp32 table):
 *
 *     out_a = fl(fl(a * c) - fl(b * s)),   out_b = fl(fl(a * s) + fl(b * c))
 *
 * every product and sum an explicit once-rounded fp32 operation (hip_compat.h),
 * so no FMA can appear whatever the compiler flags say.
 *
 * Work unit: 8 consecutive pairs i0 .. i0+7 of a row, i.e. 16 values in two
 * pieces of 8 consecutive dims: interleaved [2 i0, 2 i0 + 8) and
 * [2 i0 + 8, 2 i0 + 16); NeoX [i0, i0 + 8) and [R/2 + i0, R/2 + i0 + 8).
 * One thread owns both halves of each of its pairs, so it reads every value
 * it writes and nothing another thread writes: in place is safe. */
#ifndef MLA_HIP_ROPE_UTIL_H
#define MLA_HIP_ROPE_UTIL_H

#include "hip/chunk8.h"

constexpr int kPairs = 8; /* pairs per work unit */

/* 32-bit unsigned strides and sizes: kernel arguments live in scalar
 * registers, of which a gfx9 wave has ~100, and 32 x 32 -> 64 multiply-adds
 * take unsigned 32-bit values as they are (make_rope_table checks they fit). */
struct rope_table {
    const float *cos, *sin;
    uint32_t cs0, cs1, ss0, ss1;
    uint32_t half; /* R / 2 */
    int32_t neox;
};

/* The device view of a validated cos/sin pair. */
static inline mla_status make_rope_table(mla_context *ctx, const mla_tensor &cos,
                                         const mla_tensor &sin, mla_rope_style style,
                                         rope_table &tb)
{
    const int64_t v[5] = {cos.stride[0], cos.stride[1], sin.stride[0], sin.stride[1], cos.shape[1]};
    for (int i = 0; i < 5; ++i) {
        const mla_status st = check_dim32(ctx, v[i],
                                          i < 2   ? "cos.stride"
                                          : i < 4 ? "sin.stride"
                                                  : "cos.shape[1]");
        if (st != MLA_OK)
            return st;
    }
    tb = {static_cast<const float *>(cos.data),
          static_cast<const float *>(sin.data),
          (uint32_t)v[0],
          (uint32_t)v[1],
          (uint32_t)v[2],
          (uint32_t)v[3],
          (uint32_t)v[4],
          style == MLA_ROPE_NEOX};
    return MLA_OK;
}

/* The two pieces of the unit at pair i0 with np (<= 8) valid pairs: first
 * dim and value count of each. */
struct rope_pieces {
    int64_t d[2];
    int n[2];
};

MLA_DEV rope_pieces pieces_of(const rope_table &tb, int64_t i0, int np)
{
    rope_pieces p;
    if (tb.neox) {
        p.d[0] = i0;
        p.d[1] = tb.half + i0;
        p.n[0] = p.n[1] = np;
    } else {
        p.d[0] = 2 * i0;
        p.d[1] = 2 * i0 + kChunk;
        p.n[0] = 2 * np < kChunk ? 2 * np : kChunk;
        p.n[1] = 2 * np - p.n[0];
    }
    return p;
}

MLA_DEV int unit_pairs(const rope_table &tb, int64_t i0) { return chunk_len(tb.half - i0); }

/* Pairs of the unit at pair i0 in a MODE launch (chunk8.h: mode_chunk_len). */
template <int MODE> MLA_DEV int mode_pairs(const rope_table &tb, int64_t i0)
{
    return mode_chunk_len<MODE>(tb.half - i0);
}

/* First dim (within the rope part) and value count of piece `piece` of the
 * unit at pair i0: the slice of a row that rope_piece's output covers. */
template <int MODE>
MLA_DEV int piece_dims(const rope_table &tb, int64_t i0, int piece, int64_t &d0)
{
    const rope_pieces p = pieces_of(tb, i0, mode_pairs<MODE>(tb, i0));
    d0 = piece ? p.d[1] : p.d[0];
    return MODE == kWide ? kChunk : (piece ? p.n[1] : p.n[0]);
}

MLA_DEV void rotate(float a, float b, float c, float s, float &out_a, float &out_b)
{
    out_a = mla_fsub_rn(mla_fmul_rn(a, c), mla_fmul_rn(b, s));
    out_b = mla_fadd_rn(mla_fmul_rn(a, s), mla_fmul_rn(b, c));
}

/* cos and sin of the np pairs of the unit at pair i0, position pos (a
 * kernel that rotates the unit in several rows of one token loads them
 * once). */
template <int MODE = kAuto>
MLA_DEV void rope_table_unit(const rope_table &tb, int64_t pos, int64_t i0, int np, float c[kChunk],
                             float s[kChunk])
{
    load8<MLA_DTYPE_F32, MODE>(tb.cos, pos * tb.cs0 + i0 * tb.cs1, tb.cs1, np, c);
    load8<MLA_DTYPE_F32, MODE>(tb.sin, pos * tb.ss0 + i0 * tb.ss1, tb.ss1, np, s);
}

/* The unit's values v (v[p][k]: value k of piece p, pieces_of) rotated by
 * c, s into out (same layout), in fp32. */
MLA_DEV void rope_rotate_unit(const rope_table &tb, const float v[2][kChunk], const float c[kChunk],
                              const float s[kChunk], float out[2][kChunk])
{
    /* Two loops with constant indices (a run-time index into a register
     * array would put it in scratch memory). */
    if (tb.neox) {
#pragma unroll
        for (int k = 0; k < kPairs; ++k)
            rotate(v[0][k], v[1][k], c[k], s[k], out[0][k], out[1][k]);
    } else {
#pragma unroll
        for (int k = 0; k < kPairs; ++k) {
            const int pc = k / 4, i = (2 * k) % kChunk;
            rotate(v[pc][i], v[pc][i + 1], c[k], s[k], out[pc][i], out[pc][i + 1]);
        }
    }
}

/* Rotates the unit at pair i0 of the row of dtype DT whose dim d is at
 * element base + d * step, by position pos: out[p][k] is value k of piece p
 * (pieces_of), in fp32. */
template <int DT>
MLA_DEV void rope_unit(const void *x, int64_t base, int64_t step, const rope_table &tb, int64_t pos,
                       int64_t i0, float out[2][kChunk])
{
    const int np = unit_pairs(tb, i0);
    const rope_pieces p = pieces_of(tb, i0, np);
    float v[2][kChunk], c[kChunk], s[kChunk];
    load8<DT>(x, base + p.d[0] * step, step, p.n[0], v[0]);
    load8<DT>(x, base + p.d[1] * step, step, p.n[1], v[1]);
    rope_table_unit(tb, pos, i0, np, c, s);
    rope_rotate_unit(tb, v, c, s, out);
}

/* Piece `piece` (0 or 1) of the unit at pair i0 alone, rotated: out[k] is
 * value k of the piece, whose first dim and count pieces_of gives. For
 * kernels that give each piece its own thread (one store site); only where
 * x is not also written (the fused op's q_pe, k_pe): NeoX reads the other
 * piece too. */
template <int DT, int MODE>
MLA_DEV void rope_piece(const void *x, int64_t base, int64_t step, const rope_table &tb,
                        int64_t pos, int64_t i0, int piece, float out[kChunk])
{
    const int np = mode_pairs<MODE>(tb, i0);
    const rope_pieces p = pieces_of(tb, i0, np);
    float c[kChunk], s[kChunk];
    if (tb.neox) { /* pairs i0 + k: a in piece 0, b in piece 1 */
        float a[kChunk], b[kChunk];
        load8<DT, MODE>(x, base + p.d[0] * step, step, np, a);
        load8<DT, MODE>(x, base + p.d[1] * step, step, np, b);
        load8<MLA_DTYPE_F32, MODE>(tb.cos, pos * tb.cs0 + i0 * tb.cs1, tb.cs1, np, c);
        load8<MLA_DTYPE_F32, MODE>(tb.sin, pos * tb.ss0 + i0 * tb.ss1, tb.ss1, np, s);
#pragma unroll
        for (int k = 0; k < kPairs; ++k) {
            float oa, ob;
            rotate(a[k], b[k], c[k], s[k], oa, ob);
            out[k] = piece ? ob : oa;
        }
        return;
    }
    /* interleaved: the piece is pairs i0 + 4 piece + k, k < 4 */
    const int64_t j0 = i0 + (kPairs / 2) * piece;
    const int left = np - (kPairs / 2) * piece;
    const int pairs =
        MODE == kWide ? kPairs / 2 : (left < 0 ? 0 : (left > kPairs / 2 ? kPairs / 2 : left));
    float v[kChunk];
    load8<DT, MODE>(x, base + 2 * j0 * step, step, 2 * pairs, v);
    load8<MLA_DTYPE_F32, MODE>(tb.cos, pos * tb.cs0 + j0 * tb.cs1, tb.cs1, pairs, c);
    load8<MLA_DTYPE_F32, MODE>(tb.sin, pos * tb.ss0 + j0 * tb.ss1, tb.ss1, pairs, s);
#pragma unroll
    for (int k = 0; k < kPairs / 2; ++k)
        rotate(v[2 * k], v[2 * k + 1], c[k], s[k], out[2 * k], out[2 * k + 1]);
}

#endif
