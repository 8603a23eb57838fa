/* Device pieces every attention body shares (hip/attention.hip): q values,
 * the rows of a block record (validity, causal limits, the output factor
 * and address after the last key tile, the stores), and the keys of a tile
 * (positions, cache blocks, where a key's chunks sit in each cache
 * layout). */
#ifndef MLA_HIP_ATTENTION_COMMON_H
#define MLA_HIP_ATTENTION_COMMON_H

#include "hip/attention_traits.h"

namespace
{

/* ------------------------------------------------------------ values */

MLA_DEV float q_value(const att_desc &d, int64_t off)
{
    switch (d.q_dtype) {
    case MLA_DTYPE_F32:
        return load_value<MLA_DTYPE_F32>(d.q, off);
    case MLA_DTYPE_BF16:
        return load_value<MLA_DTYPE_BF16>(d.q, off);
    case MLA_DTYPE_FP8_E4M3FN:
        return load_value<MLA_DTYPE_FP8_E4M3FN>(d.q, off);
    default:
        return load_value<MLA_DTYPE_FP8_E4M3FNUZ>(d.q, off);
    }
}

MLA_DEV int imin(int a, int b) { return a < b ? a : b; }

/* bf16 hi + lo of x (lo = x - hi rounded: 16 significant bits in all). */
[[maybe_unused]] MLA_DEV void split_bf16(float x, uint32_t &hi, uint32_t &lo)
{
    hi = mla_fb_f32_to_bf16(x);
    const float h = mla_fb_bf16_to_f32((uint16_t)hi);
    lo = (h - h == 0.0f) ? mla_fb_f32_to_bf16(x - h) : 0u; /* finite hi: x - hi is exact */
}

/* ------------------------------------------------------------ the block */

MLA_DEV bool row_valid(const att_desc &d, const att_blk &b, int r)
{
    const int jj = r / d.HT, hh = r % d.HT;
    return jj < d.JT && b.j0 + jj < b.n_s && b.h0 + hh < d.H;
}

/* Largest key position row r sees (its causal limit). */
MLA_DEV int32_t row_limit(const att_desc &d, const att_blk &b, int r)
{
    return b.c_s - b.n_s + b.j0 + r / d.HT;
}

/* Key position of tile slot k (tile starting at kb), -1 when none. */
MLA_DEV int32_t key_position(const att_desc &d, const att_blk &b, int32_t kb, int k)
{
    const int32_t i = kb + k;
    if (i >= b.kv_hi)
        return -1;
    if (!d.sparse)
        return i;
    const int32_t pos = b.krow[(int64_t)i * d.tks1];
    return pos <= row_limit(d, b, 0) ? pos : -1;
}

/* Cache block of key position pos >= 0 of the block's sequence. */
MLA_DEV int64_t key_block(const att_desc &d, const att_blk &b, int32_t pos)
{
    const uint32_t i = d.bs_sh >= 0 ? (uint32_t)pos >> d.bs_sh : (uint32_t)pos / d.c.bs;
    return d.paged ? (int64_t)b.trow[(int64_t)i * d.bts1] : (int64_t)b.s;
}

/* Token of key position pos >= 0 in its cache block. */
MLA_DEV uint32_t key_token(const att_desc &d, int32_t pos)
{
    return d.bs_sh >= 0 ? (uint32_t)pos & (d.c.bs - 1) : (uint32_t)pos % d.c.bs;
}

/* Where a key's nope and rope data start in the cache (its layout's
 * addressing, done once per key by key_info; the chunks follow from the
 * desc's n_* / r_* steps). */
struct key_ref {
    const uint8_t *nope, *rope;
};

template <int CT> MLA_DEV key_ref key_bases(const att_desc &d, int64_t block, uint32_t t)
{
    constexpr int64_t eb = dtype_bytes<CT>, K = MLA_CL_TILE_BYTES / eb;
    const uint8_t *blk = d.c.data + block * d.c.block_stride;
    key_ref k;
    if (d.c.layout == MLA_CL_FP8_SCALED) {
        k.nope = blk + (int64_t)t * d.tok_bytes;
        k.rope = k.nope + d.c.L + 4 * (d.c.L / MLA_CL_SCALE_GROUP);
    } else if (d.c.layout == MLA_CL_SHUFFLED) {
        const int64_t tile = t / MLA_CL_TILE_TOKENS, row = t % MLA_CL_TILE_TOKENS;
        k.nope = blk + (tile * MLA_CL_TILE_TOKENS * d.c.L + row * K) * eb;
        k.rope = blk + ((int64_t)d.c.bs * d.c.L + tile * MLA_CL_TILE_TOKENS * d.c.R + row * K) * eb;
    } else {
        k.nope = blk + (int64_t)t * (d.c.L + d.c.R) * eb;
        k.rope = k.nope + (int64_t)d.c.L * eb;
    }
    return k;
}

/* Chunk c (of cpk) of a key: its part, first dim, value count and byte
 * offset from the part's start. */
struct chunk_at {
    bool nope;
    int32_t d0, off;
    int n;
};

MLA_DEV chunk_at chunk_of(const att_desc &d, int c)
{
    chunk_at r;
    r.nope = c < d.nope_chunks;
    const int cc = r.nope ? c : c - d.nope_chunks;
    const int sh = r.nope ? d.n_sh : d.r_sh;
    r.d0 = r.nope ? cc * kChunk : (int32_t)d.c.L + cc * kChunk;
    r.n = chunk_len((int64_t)(r.nope ? d.c.L : d.c.L + d.c.R) - r.d0);
    r.off = (cc >> sh) * (r.nope ? d.n_ts : d.r_ts) +
            (cc & ((1 << sh) - 1)) * (r.nope ? d.n_cb : d.r_cb);
    return r;
}

/* The position and cache data of key threadIdx.x of the tile at kb (threads
 * < NK). */
template <int CT>
MLA_DEV void key_info(const att_desc &d, const att_blk &b, int32_t kb, int32_t &pos, key_ref &ref)
{
    pos = key_position(d, b, kb, (int)threadIdx.x);
    ref.nope = ref.rope = d.c.data;
    if (pos >= 0)
        ref = key_bases<CT>(d, key_block(d, b, pos), key_token(d, pos));
}

/* Row r of the record after its last key tile (m_run, l_run: its running
 * max, log2 units, and sum): the output factor Fs[r] (sinks when the block
 * writes o directly, k_scale), lse, and the row's output address Or[r]
 * (o[row, h, :] or its partial slot; null for an invalid row). */
MLA_DEV void row_finish(const att_desc &d, const att_blk &b, int r, float m_run, float l_run,
                        float *Fs, uint8_t **Or)
{
    const bool rv = row_valid(d, b, r);
    float f = 0.0f, lse = -INFINITY;
    if (rv && l_run > 0.0f) {
        if (b.direct && d.sinks) {
            const float s2 = d.sinks[(int64_t)(b.h0 + r % d.HT) * d.sks] * kLog2e;
            const float mm = fmaxf(m_run, s2);
            const float z = l_run * exp2f(m_run - mm) + exp2f(s2 - mm);
            f = exp2f(m_run - mm) / z;
            lse = (mm + log2f(z)) * kLn2;
        } else {
            f = 1.0f / l_run;
            lse = (m_run + log2f(l_run)) * kLn2;
        }
        f *= d.kso;
    }
    Fs[r] = f;
    uint8_t *orow = nullptr;
    const int64_t row = b.row0 + b.j0 + r / d.HT, h = b.h0 + r % d.HT;
    if (rv && b.direct)
        orow = static_cast<uint8_t *>(d.o) + (row * d.os0 + h * d.os1) * (d.o_bf16 ? 2 : 4);
    else if (rv)
        orow = reinterpret_cast<uint8_t *>(d.part_o + ((row * d.H + h) * d.max_splits + b.split) *
                                                          (int64_t)d.c.L);
    Or[r] = orow;
    if (rv && b.c0 == 0) {
        if (b.direct) {
            if (d.lse)
                d.lse[row * d.lse0 + h * d.lse1] = lse;
        } else {
            d.part_lse[(row * d.H + h) * d.max_splits + b.split] = lse;
        }
    }
}

/* O value v of row rr, column col, times the row's factor, to o (F32 or
 * BF16, its strides) or the f32 partial row. */
MLA_DEV void out_store(const att_desc &d, const att_blk &b, uint8_t *const *Or, const float *Fs,
                       int rr, int col, float v)
{
    uint8_t *orow = Or[rr];
    if (!orow)
        return;
    const float f = Fs[rr];
    const float val = f == 0.0f ? 0.0f : v * f;
    if (b.direct && d.o_bf16)
        *reinterpret_cast<uint16_t *>(orow + (int64_t)col * d.os2 * 2) =
            (uint16_t)mla_fb_f32_to_bf16(val);
    else
        *reinterpret_cast<float *>(orow + (int64_t)col * (b.direct ? d.os2 : 1) * 4) = val;
}

/* Row rr's output as the column-pair stores take it: its address (null: an
 * invalid row), factor, column stride (elements) and whether two columns
 * go in one store (a contiguous row at an aligned address). Read once per
 * row: the compiler cannot keep Or and Fs across the global stores. */
struct out_row {
    uint8_t *p;
    float f;
    int64_t cs;
    bool pairs;
};

MLA_DEV out_row out_row_of(const att_desc &d, const att_blk &b, uint8_t *const *Or,
                           const float *Fs, int rr)
{
    out_row r;
    r.p = Or[rr];
    r.f = Fs[rr];
    r.cs = b.direct ? d.os2 : 1;
    r.pairs = r.cs == 1 && ((uintptr_t)r.p & (b.direct && d.o_bf16 ? 3u : 7u)) == 0;
    return r;
}

/* out_store of columns col (even) and col + 1 of a valid row. */
MLA_DEV void out_store2(const att_desc &d, const att_blk &b, const out_row &r, int col, float v0,
                        float v1)
{
    v0 = r.f == 0.0f ? 0.0f : v0 * r.f;
    v1 = r.f == 0.0f ? 0.0f : v1 * r.f;
    if (b.direct && d.o_bf16) {
        const uint16_t b0 = (uint16_t)mla_fb_f32_to_bf16(v0);
        const uint16_t b1 = (uint16_t)mla_fb_f32_to_bf16(v1);
        uint16_t *q = reinterpret_cast<uint16_t *>(r.p) + (int64_t)col * r.cs;
        if (r.pairs) {
            *reinterpret_cast<uint32_t *>(q) = (uint32_t)b0 | (uint32_t)b1 << 16;
        } else {
            q[0] = b0;
            q[r.cs] = b1;
        }
    } else {
        float *q = reinterpret_cast<float *>(r.p) + (int64_t)col * r.cs;
        if (r.pairs) {
            *reinterpret_cast<mla_f32x2 *>(q) = mla_f32x2{{v0, v1}};
        } else {
            q[0] = v0;
            q[r.cs] = v1;
        }
    }
}

/* ------------------------------------------------------- the records */

/* The block record of virtual block v (item, row-tile slot, head tile,
 * column chunk), row tile jt of that slot; false when the item is unused or
 * the row tile lies past the sequence's rows. */
template <int PATH>
MLA_DEV bool block_of(const att_desc &d, const mla_attention_work &w, int32_t v, int32_t jt,
                      att_blk &b)
{
    const int32_t cc = v % d.NCC, ht = (v / d.NCC) % d.NHT;
    b.s = w.seq;
    b.row0 = d.cu_q[(int64_t)w.seq * d.cus];
    b.n_s = (int32_t)(d.cu_q[(int64_t)(w.seq + 1) * d.cus] - b.row0);
    b.j0 = jt * d.JT;
    if (b.j0 >= b.n_s)
        return false;
    b.c_s = d.ctx_lens[(int64_t)w.seq * d.cls];
    b.trow = d.paged ? d.table + (int64_t)w.seq * d.bts0 : d.table;
    b.krow = d.sparse ? d.topk + (b.row0 + b.j0) * d.tks0 : d.topk;
    b.h0 = ht * d.HT;
    b.c0 = cc * (PATH == PATH_MATRIX ? kColChunk : kColChunkFma);
    b.split = w.split;
    b.direct = d.splits[w.seq] <= 1;
    b.kv_lo = w.kv_begin;
    if (d.sparse) {
        b.kv_hi = w.kv_end;
    } else { /* keys past the tile's last causal limit are nobody's */
        const int32_t last = (b.j0 + d.JT < b.n_s ? b.j0 + d.JT : b.n_s) - 1;
        const int32_t lim = b.c_s - b.n_s + last + 1;
        b.kv_hi = w.kv_end < lim ? w.kv_end : lim;
    }
    return true;
}

/* Thread 0's step to the block's next record: virtual block v (v = ((item *
 * NJT + slot) * NHT + head tile) * NCC + chunk), row tile jt of the slot's
 * row tiles j, j + NJT, ..; the next v is v + gridDim.x. b.live = 0 once v
 * passes the list or meets an unused item (every later one is unused too). */
template <int PATH> MLA_DEV void next_block(const att_desc &d, att_blk &b, bool first)
{
    const int32_t per_work = d.NJT * d.NHT * d.NCC, per_slot = d.NHT * d.NCC;
    int64_t v = first ? (int64_t)blockIdx.x : b.v;
    int32_t jt = first ? -1 : b.jt + d.NJT; /* -1: the slot's first row tile */
    b.live = 0;
    for (; v < (int64_t)d.num_items * per_work; v += gridDim.x, jt = -1) {
        const int32_t wi = (int32_t)v / per_work; /* v < 2^31 (the host checks) */
        const int32_t rem = (int32_t)v - wi * per_work;
        const mla_attention_work w = d.work[wi];
        if (w.seq < 0)
            return;
        if (jt < 0)
            jt = rem / per_slot;
        if (block_of<PATH>(d, w, rem, jt, b)) {
            b.v = (int32_t)v;
            b.jt = jt;
            b.live = 1;
            return;
        }
    }
}

} // namespace

#endif
