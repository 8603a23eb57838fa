/* MLA attention over the paged latent cache (include/mla/mla_attention.h):
 * dense or sparse, decode and prefill, split-KV partial passes and their
 * combine, following the plan of core/attention_plan.h.
 *
 * One block record (256 threads) per (work item, row tile, column chunk).
 * The launch is graph-capturable across plan updates: its grid comes from
 * what the plan fixed at create (the items create planned, at least two per
 * compute unit, at most work_capacity; row tiles from create's largest
 * n_s), and each block walks virtual blocks with a grid stride, stopping at
 * the first unused item (seq MLA_ATTN_WORK_UNUSED, core/attention_plan.h)
 * and skipping row tiles past its sequence's rows. A row
 * tile is TM (query row, head) pairs of one sequence: HT = min(H, TM)
 * consecutive heads of JT = TM / HT consecutive query rows (dense; sparse
 * rows list their own keys, so JT = 1). Every block streams the work
 * item's keys in tiles of NK through shared memory once for all its rows:
 *
 *   1. key positions of the tile (dense: consecutive, cut at the tile's last
 *      causal limit; sparse: the listed top-k positions), then the keys
 *      themselves, dequantized exactly to bf16 (bf16 values as they are; fp8
 *      codes, which e4m3 bf16 holds exactly, with the per-tensor k_scale left
 *      out and folded into the score scale and the output; FP8_SCALED codes
 *      times their power-of-two group scale, exact too), rows Ks[NK][DP];
 *   2. scores S = Q K^T over all L + R dims: partial sums per wave (each wave
 *      owns a share of the dims, its q fragments in registers), in shared
 *      memory;
 *   3. online softmax in fp32 (log2 domain, score scale softmax_scale *
 *      q_scale * k_scale * log2 e), masked keys (-1, beyond the row's causal
 *      limit) excluded; P rounded to bf16 for the matrix units (FlashMLA's
 *      rounding), the row sums of unrounded P;
 *   4. O = alpha O + P V with V = the first L dims of the same key rows.
 *
 * Matrix units through hip/mfma.h:
 *   NVIDIA mma m16n8k16: the body of hip/attention_nv.h (TM = 16, 32 or
 *     64 rows, 64-key tiles, q and keys staged in shared memory, the next
 *     tile in flight by cp.async; steps 2-4 as there);
 *   gfx9 MFMA 32x32x8: TM = 32 rows, NK = 32 keys, 4 waves; wave w holds
 *     q's 8-dim k-steps w, w + 4, .. and O's 32-column tiles w, w + 4, ...
 * f32 q is split into bf16 hi + lo (two products per step: 16 significant
 * bits of q), bf16 and fp8 q are exact. The plain-FMA body (any target, the
 * host pass, MLA_HIP_ATTENTION=fma, and L + R above the matrix bodies' 640)
 * reads q from memory in fp32, multiplies in fp32 and keeps P in fp32.
 * L above 512 takes several column chunks (blocks that repeat the scores).
 *
 * Output: with one split of the sequence the block writes o (F32 or BF16,
 * any strides) and lse directly, sinks applied there; with several it writes
 * normalized partials (part_o F32 [T, H, max_splits, L], part_lse [T, H,
 * max_splits]) and finish_kernel merges them with weights e^(lse_i - max)
 * (empty splits weigh 0), sinks applied once: a 64-lane team per (row,
 * head, 256 columns), 16-byte loads, 8 splits' loads in flight per lane
 * (the old 32-lane team per row walked 16 columns x all splits one load at
 * a time: with 64 splits and few rows that serial chain was most of a
 * small-batch decode). A row without a visible key
 * gets o = 0 and lse = -inf. Cache addresses are 64-bit throughout. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hip/indexer_util.h" /* first: the runtime headers select MLA_HD's device form */

#include "core/attention_plan.h"
#include "hip/cache_chunk.h"
#include "hip/mfma.h"

namespace
{

constexpr int kThreads = 256;
constexpr int kColChunk = 512;    /* O columns per block (matrix bodies) */
constexpr int kColChunkFma = 128; /* O columns per block (plain launches) */
constexpr int kNKFma = 16;        /* keys per tile of the plain body */
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

/* The geometry of the host's vendor (the device pass of that vendor uses the
 * same constants; a device without the matrix unit runs the plain body on
 * the same tiles). NVIDIA's matrix body (hip/attention_nv.h) has its own
 * tiles; kTM there is the plain body's. */
#if defined(__CUDACC__)
constexpr int kTM = 16, kNW = 8; /* the plain body's rows; the matrix body's warps */
constexpr int64_t kSmemMax = 227 * 1024;
/* L + R the matrix body takes: its key rows, two tiles, in shared memory */
constexpr int kMaxDimsMatrix = 640;
#else
constexpr int kTM = 32, kNKMat = 32, kNW = 4, kTK = 8, kKSW = 18;
[[maybe_unused]] constexpr int kCTW = 4; /* O column tiles per wave */
constexpr int64_t kSmemMax = 64 * 1024;  /* gfx942's LDS */
/* L + R the matrix body takes: every wave runs all kKSW of its k-steps
 * (no per-step test: loop-invariant conditions become scalar registers that
 * gfx9 would spill), over q fragments and key rows zero beyond L + R */
constexpr int kMaxDimsMatrix = kNW * kTK * kKSW; /* 576 */
#endif

/* member functions of the per-path structs (MLA_DEV is static) */
#define MLA_ATT_MEMBER __device__ __forceinline__

enum { KIND_FMA = 0, KIND_NV = 1, KIND_AMD = 2 };
enum { PATH_FMA = 0, PATH_MATRIX = 1 };

/* numbers, not the enum: the preprocessor compares them */
#if defined(MLA_HAVE_MMA_BF16) || defined(MLA_EMU_MATRIX_NV)
#define MLA_ATT_MATRIX_KIND 1 /* KIND_NV */
#elif defined(MLA_HAVE_MFMA_BF16) || defined(MLA_EMU_MATRIX_AMD)
#define MLA_ATT_MATRIX_KIND 2 /* KIND_AMD */
#else
#define MLA_ATT_MATRIX_KIND 0 /* KIND_FMA */
#endif

struct att_desc {
    cache_dev c;
    const uint8_t *q;
    const int32_t *table, *ctx_lens, *cu_q, *topk, *splits;
    const float *sinks;
    void *o;
    float *lse;
    float *part_o, *part_lse;
    const mla_attention_work *work;
    /* element strides, 32-bit (the host refuses larger ones): fewer scalar
     * registers for the kernel's uniform values */
    int32_t qs0, qs1, qs2, bts0, bts1, cls, cus, tks0, tks1, sks, os0, os1, os2, lse0, lse1;
    int32_t q_dtype, paged, sparse, o_bf16;
    int32_t max_splits, S, H, HT, JT, NHT, NJT, NCC, num_items;
    int32_t D, DP, KS, nope_chunks, cpk;
    /* chunk c of a key part (nope / rope) starts (c >> sh) * ts + (c & (2^sh
     * - 1)) * cb bytes after the part's first byte (key_ref); rope_bf16: the
     * rope part holds bf16 (bf16 caches, FP8_SCALED) */
    int32_t n_ts, n_sh, n_cb, r_ts, r_sh, r_cb, rope_bf16, tok_bytes;
    /* NVIDIA body (hip/attention_nv.h): raw key row bytes (fp8 caches) and
     * where FP8_SCALED's scales sit in it; cp.async usable; f32 q (hi + lo) */
    int32_t rb, raw_so, async, qsplit;
    int32_t bulk;  /* > 0: bytes of a token, copied by one bulk copy (sm_90+) */
    int32_t bs_sh; /* log2 of the block size when a power of two, else -1 */
    float ss2;     /* score scale, log2 units */
    float kso;     /* output factor: k_scale of fp8 NORMAL / SHUFFLED, else 1 */
};

/* What a block works on. Rows r < TM of the tile: query row j0 + r / HT,
 * head h0 + r % HT. */
struct att_blk {
    int32_t s, n_s, c_s, j0, h0, c0, split, direct;
    int32_t kv_lo, kv_hi;
    int32_t v, jt, live; /* the kernel's cursor (attention_kernel); live: a block to run */
    int64_t row0;        /* first global row of the sequence */
    const int32_t *trow; /* the sequence's block-table row (paged) */
    const int32_t *krow; /* the tile's top-k row (sparse) */
};

/* Shared memory of a block, in bytes from the start. */
struct att_smem {
    int32_t desc, blk, orow, sp, ps, as, fs, kp, kb, ks, ks_bytes, total;
};

static __host__ __device__ inline int32_t align16(int32_t v) { return (v + 15) / 16 * 16; }

/* The plain and gfx9 bodies: one key tile with its positions KP and cache
 * blocks KB. */
static __host__ __device__ inline att_smem smem_layout(int TM, int NK, int NPART, int DP)
{
    att_smem s;
    /* the kernel's descriptor and block record, read from shared memory
     * (vector registers) instead of being held in scalar registers, which
     * gfx9 runs out of; per-row output addresses */
    s.desc = 0;
    s.blk = align16((int)sizeof(att_desc));
    s.orow = s.blk + align16((int)sizeof(att_blk));
    s.sp = s.orow + align16(TM * 8);
    s.ps = s.sp + align16(NPART * TM * NK * 4);
    const int ps_bytes = TM * NK * 4 > TM * (NK + 8) * 2 ? TM * NK * 4 : TM * (NK + 8) * 2;
    s.as = s.ps + align16(ps_bytes);
    s.fs = s.as + align16(TM * 4);
    s.kp = s.fs + align16(TM * 4);
    s.kb = s.kp + align16(NK * 4);
    s.ks = s.kb + align16(NK * 16);
    s.ks_bytes = align16(NK * DP * 2);
    s.total = s.ks + s.ks_bytes;
    return s;
}

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

/* The n values of the chunk at dim d0 of token t of `block`, as exact fp32
 * of what the key tile holds: bf16 values, fp8 codes (NORMAL, SHUFFLED: no
 * k_scale), FP8_SCALED codes times their group scale. */
template <int CT>
MLA_DEV void key_chunk(const cache_dev &c, int64_t block, int64_t t, int64_t d0, int n,
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
        load_bytes(p, w, n);
        if (cache_fp8s(c)) {
            const uint8_t *blk = c.data + block * c.block_stride;
            uint32_t sw[4];
            load_bytes(blk + mla_cl_fp8s_scale_byte(t, d0 / MLA_CL_SCALE_GROUP, c.L, c.R), sw, 4);
            const float s = mla_fb_float(sw[0]);
#pragma unroll
            for (int j = 0; j < kChunk; ++j)
                v[j] = mla_fb_mul(unpack_value<CT>(w, j), s);
        } else {
#pragma unroll
            for (int j = 0; j < kChunk; ++j)
                v[j] = unpack_value<CT>(w, j);
        }
    }
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

/* Keys of the tile into Ks (bf16 rows of DP values), synchronously: each
 * thread issues the loads of G chunks before converting any. */
template <int CT, int NK, int G>
MLA_DEV void load_tile(const att_desc &d, const int32_t *KP, const key_ref *KR, uint16_t *Ks)
{
    const int items = NK * d.cpk;
    for (int base = (int)threadIdx.x; base < items; base += G * kThreads) {
        uint32_t raw[G][4];
        float sc[G];
        int32_t dst[G];
        int cnt[G];
        bool bf[G];
#pragma unroll
        for (int g = 0; g < G; ++g) {
            const int it = base + g * kThreads;
            raw[g][0] = raw[g][1] = raw[g][2] = raw[g][3] = 0;
            sc[g] = 1.0f;
            dst[g] = -1;
            cnt[g] = 0;
            bf[g] = true;
            if (it < items) {
                const int k = it / d.cpk;
                const chunk_at ch = chunk_of(d, it - k * d.cpk);
                cnt[g] = ch.n;
                dst[g] = k * d.DP + ch.d0;
                bf[g] = CT == MLA_DTYPE_BF16 || (!ch.nope && d.rope_bf16);
                if (KP[k] >= 0) {
                    const key_ref kr = KR[k];
                    load_bytes((ch.nope ? kr.nope : kr.rope) + ch.off, raw[g],
                               bf[g] ? 2 * ch.n : ch.n);
                    if (!bf[g] && cache_fp8s(d.c)) { /* the group's scale */
                        uint32_t sw[4];
                        load_bytes(kr.nope + d.c.L + 4 * (ch.d0 / MLA_CL_SCALE_GROUP), sw, 4);
                        sc[g] = mla_fb_float(sw[0]);
                    }
                }
            }
        }
#pragma unroll
        for (int g = 0; g < G; ++g) {
            if (dst[g] < 0)
                continue;
            uint32_t w[4];
            if (bf[g]) {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    w[j] = raw[g][j];
            } else if constexpr (CT != MLA_DTYPE_BF16) {
                /* codes (times an FP8_SCALED group scale: a power of two) are
                 * exact in bf16 */
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    w[j] =
                        mla_fb_f32_to_bf16(mla_fb_mul(unpack_value<CT>(raw[g], 2 * j), sc[g])) |
                        (mla_fb_f32_to_bf16(mla_fb_mul(unpack_value<CT>(raw[g], 2 * j + 1), sc[g]))
                         << 16);
            } else {
                w[0] = w[1] = w[2] = w[3] = 0;
            }
            uint16_t *p = Ks + dst[g];
            if (cnt[g] == kChunk && is_aligned(p, 16)) {
                mla_u32x4 q;
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    q.v[j] = w[j];
                *reinterpret_cast<mla_u32x4 *>(p) = q;
            } else {
#pragma unroll
                for (int j = 0; j < kChunk; ++j)
                    if (j < cnt[g])
                        p[j] = (uint16_t)(w[j / 2] >> (16 * (j % 2)));
            }
        }
    }
}

/* -------------------------------------------------- plain FMA body */

template <int TM, int NK, int W> struct fma_ops {
    static constexpr int TPR = kThreads / TM; /* threads per row */
    static constexpr int OPT = W / TPR;       /* O values per thread */
    float o[OPT];

    MLA_ATT_MEMBER void init(const att_desc &, const att_blk &)
    {
#pragma unroll
        for (int i = 0; i < OPT; ++i)
            o[i] = 0.0f;
    }

    MLA_ATT_MEMBER void scores(const att_desc &d, const att_blk &b, const uint16_t *Ks, float *Sp)
    {
        for (int pidx = (int)threadIdx.x; pidx < TM * NK; pidx += kThreads) {
            const int r = pidx / NK, k = pidx - r * NK;
            /* an invalid row reads the tile's first row (its scores are masked) */
            const bool rv = row_valid(d, b, r);
            const int64_t qoff =
                rv ? (b.row0 + b.j0 + r / d.HT) * d.qs0 + (int64_t)(b.h0 + r % d.HT) * d.qs1
                   : (b.row0 + b.j0) * d.qs0 + (int64_t)b.h0 * d.qs1;
            const uint16_t *kr = Ks + (int64_t)k * d.DP;
            float acc = 0.0f;
            for (int dd = 0; dd < d.D; ++dd)
                acc = fmaf(q_value(d, qoff + (int64_t)dd * d.qs2), mla_fb_bf16_to_f32(kr[dd]), acc);
            Sp[r * NK + k] = acc;
        }
    }

    /* O = alpha O + P V (P in fp32) */
    MLA_ATT_MEMBER void pv(const att_desc &d, const att_blk &b, const float *P, const float *As,
                           const uint16_t *Ks)
    {
        const int r = (int)threadIdx.x / TPR, u = (int)threadIdx.x % TPR;
        const float alpha = As[r];
#pragma unroll
        for (int i = 0; i < OPT; ++i) {
            /* columns past L read column L - 1 (never stored): no test */
            const int col = imin(b.c0 + u + TPR * i, (int)d.c.L - 1);
            float acc = o[i] * alpha;
            for (int k = 0; k < NK; ++k)
                acc = fmaf(P[r * NK + k], mla_fb_bf16_to_f32(Ks[k * d.DP + col]), acc);
            o[i] = acc;
        }
    }

    template <typename E> MLA_ATT_MEMBER void store(const att_desc &d, const att_blk &b, E &&emit)
    {
        const int r = (int)threadIdx.x / TPR, u = (int)threadIdx.x % TPR;
#pragma unroll
        for (int i = 0; i < OPT; ++i) {
            const int col = b.c0 + u + TPR * i;
            if (col < (int)d.c.L)
                emit(r, col, o[i]);
        }
    }
};

/* ---------------------------------------------------- gfx9: MFMA */

#if MLA_ATT_MATRIX_KIND == 2
/* Layouts of hip/mfma.h (i = lane % 32, h = lane / 32). Scores: A = q rows
 * (32) x dims 8 ks + 4h .., B = Ks^T (key i); P V: A = P rows x keys
 * 8 kk + 4h .., B = V (keys 8 kk + 4h .., column i). Rows of D:
 * 8 (r / 4) + 4h + r % 4. */
template <int QT> struct amd_ops {
    static constexpr bool QSPLIT = QT == MLA_DTYPE_F32;
    static constexpr int NK = kNKMat;
    static_assert(NK == 32, "one MFMA column tile of keys");
    uint32_t qh[kKSW][2], ql[QSPLIT ? kKSW : 1][2];
    mla_f32x16 o[kCTW];

    MLA_ATT_MEMBER void init(const att_desc &d, const att_blk &b)
    {
        const int lane = (int)threadIdx.x % 64, w = mla_wave_uniform((int)threadIdx.x / 64);
        const int i = lane % 32, h = lane / 32;
        const bool valid = row_valid(d, b, i);
        const int64_t qrow =
            (b.row0 + b.j0 + i / d.HT) * d.qs0 + (int64_t)(b.h0 + i % d.HT) * d.qs1;
#pragma unroll
        for (int it = 0; it < kKSW; ++it) {
            const int ks = w + 4 * it;
#pragma unroll
            for (int reg = 0; reg < 2; ++reg) {
                const int dim = 8 * ks + 4 * h + 2 * reg;
                uint32_t hi[2] = {0, 0}, lo[2] = {0, 0};
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    if (ks < d.KS && valid && dim + e < d.D)
                        split_bf16(load_value<QT>(d.q, qrow + (int64_t)(dim + e) * d.qs2), hi[e],
                                   lo[e]);
                qh[it][reg] = hi[0] | (hi[1] << 16);
                if constexpr (QSPLIT)
                    ql[it][reg] = lo[0] | (lo[1] << 16);
            }
        }
#pragma unroll
        for (int c = 0; c < kCTW; ++c)
#pragma unroll
            for (int r = 0; r < 16; ++r)
                o[c][r] = 0.0f;
    }

    MLA_ATT_MEMBER void scores(const att_desc &d, const att_blk &, const uint16_t *Ks, float *Sp)
    {
        const int lane = (int)threadIdx.x % 64, w = mla_wave_uniform((int)threadIdx.x / 64);
        const int i = lane % 32, h = lane / 32;
        mla_f32x16 acc;
#pragma unroll
        for (int r = 0; r < 16; ++r)
            acc[r] = 0.0f;
        const uint16_t *kr = Ks + i * d.DP + 4 * h;
#pragma unroll
        for (int it = 0; it < kKSW; ++it) {
            const uint32_t *kp = reinterpret_cast<const uint32_t *>(kr + 8 * (w + 4 * it));
            const uint32_t b0 = kp[0], b1 = kp[1];
            acc = mla_mfma_bf16_32x32x8(qh[it][0], qh[it][1], b0, b1, acc);
            if constexpr (QSPLIT)
                acc = mla_mfma_bf16_32x32x8(ql[it][0], ql[it][1], b0, b1, acc);
        }
        float *sp = Sp + w * 32 * NK;
#pragma unroll
        for (int r = 0; r < 16; ++r)
            sp[(8 * (r / 4) + 4 * h + r % 4) * NK + i] = acc[r];
    }

    MLA_ATT_MEMBER void pv(const att_desc &d, const att_blk &b, const uint16_t *P, const float *As,
                           const uint16_t *Ks)
    {
        const int lane = (int)threadIdx.x % 64, w = mla_wave_uniform((int)threadIdx.x / 64);
        const int i = lane % 32, h = lane / 32;
#pragma unroll
        for (int r = 0; r < 16; ++r) {
            const float a = As[8 * (r / 4) + 4 * h + r % 4];
#pragma unroll
            for (int c = 0; c < kCTW; ++c)
                o[c][r] *= a;
        }
        constexpr int PS = NK + 8;
#pragma unroll
        for (int kk = 0; kk < NK / 8; ++kk) {
            const uint32_t *pp = reinterpret_cast<const uint32_t *>(P + i * PS + 8 * kk + 4 * h);
            const uint32_t a0 = pp[0], a1 = pp[1];
            const uint16_t *v0 = Ks + (8 * kk + 4 * h) * d.DP;
#pragma unroll
            for (int c = 0; c < kCTW; ++c) {
                /* columns past L read column L - 1 (never stored): no test */
                const uint16_t *v = v0 + imin(b.c0 + 32 * (w + 4 * c) + i, (int)d.c.L - 1);
                const uint32_t b0 = (uint32_t)v[0] | ((uint32_t)v[d.DP] << 16);
                const uint32_t b1 = (uint32_t)v[2 * d.DP] | ((uint32_t)v[3 * d.DP] << 16);
                o[c] = mla_mfma_bf16_32x32x8(a0, a1, b0, b1, o[c]);
            }
        }
    }

    template <typename E> MLA_ATT_MEMBER void store(const att_desc &d, const att_blk &b, E &&emit)
    {
        const int lane = (int)threadIdx.x % 64, w = mla_wave_uniform((int)threadIdx.x / 64);
        const int i = lane % 32, h = lane / 32;
#pragma unroll
        for (int c = 0; c < kCTW; ++c) {
            const int col = b.c0 + 32 * (w + 4 * c) + i;
            if (col < (int)d.c.L)
#pragma unroll
                for (int r = 0; r < 16; ++r)
                    emit(8 * (r / 4) + 4 * h + r % 4, col, o[c][r]);
        }
    }
};
#endif

template <int KIND, int QT, int W> struct ops_of {
    using type = fma_ops<kTM, kNKFma, W>;
    static constexpr int NK = kNKFma, NPART = 1;
};
#if MLA_ATT_MATRIX_KIND == 2
template <int QT, int W> struct ops_of<KIND_AMD, QT, W> {
    using type = amd_ops<QT>;
    static constexpr int NK = kNKMat, NPART = kNW;
};
#endif

/* ------------------------------------------------------------ kernel */

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

/* Dims D .. DP of every key row stay 0 (the matrix steps read them; no
 * tile load writes them): once per kernel, before its first record. */
template <int KIND, int QT, int W> MLA_DEV void zero_pads(const att_desc &d, unsigned char *smem)
{
    using OPS = ops_of<KIND, QT, W>;
    const att_smem L = smem_layout(kTM, OPS::NK, OPS::NPART, d.DP);
    const int pad = d.DP - d.D;
    for (int i = (int)threadIdx.x; i < OPS::NK * pad; i += kThreads)
        reinterpret_cast<uint16_t *>(smem + L.ks)[(i / pad) * d.DP + d.D + i % pad] = 0;
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

/* The plain-FMA and gfx9 bodies: one key tile at a time, loaded
 * synchronously. */
template <int KIND, int CT, int QT, int W>
MLA_DEV void attend(const att_desc &d, const att_blk &b, unsigned char *smem)
{
    using OPS = ops_of<KIND, QT, W>;
    constexpr int TM = kTM, NK = OPS::NK, NPART = OPS::NPART;
    constexpr int TPR = kThreads / TM, KPT = NK / TPR;
    static_assert(KPT >= 1 && KPT * TPR == NK, "whole keys per softmax thread");
    /* the launch sized shared memory for the matrix tiles (NPART, NK of the
     * vendor) or the plain ones; the plain body fits in either */
    const att_smem L = smem_layout(TM, NK, NPART, d.DP);
    float *Sp = reinterpret_cast<float *>(smem + L.sp);
    float *As = reinterpret_cast<float *>(smem + L.as);
    float *Fs = reinterpret_cast<float *>(smem + L.fs);
    uint8_t **Or = reinterpret_cast<uint8_t **>(smem + L.orow);
    int32_t *KP = reinterpret_cast<int32_t *>(smem + L.kp);
    key_ref *KBs = reinterpret_cast<key_ref *>(smem + L.kb);
    uint16_t *Pb = reinterpret_cast<uint16_t *>(smem + L.ps);
    float *Pf = reinterpret_cast<float *>(smem + L.ps);
    uint16_t *Ks = reinterpret_cast<uint16_t *>(smem + L.ks);

    const int tid = (int)threadIdx.x;
    typename OPS::type ops;
    ops.init(d, b);

    /* softmax thread: row r, keys u * KPT .. */
    const int r = tid / TPR, u = tid % TPR;
    const bool rv = row_valid(d, b, r);
    /* the row's causal limit, -1 for an invalid row (no key passes) */
    const int32_t lim = !rv ? -1 : d.sparse ? 0x7FFFFFFF : row_limit(d, b, r);
    float m_run = -INFINITY, l_run = 0.0f;

    /* key information of the next tile, held by threads < NK a tile ahead */
    int32_t npos = -1;
    key_ref nblk;
    if (tid < NK)
        key_info<CT>(d, b, b.kv_lo, npos, nblk);

    for (int32_t kb = b.kv_lo; kb < b.kv_hi; kb += NK) {
        if (tid < NK) {
            KP[tid] = npos;
            KBs[tid] = nblk;
            key_info<CT>(d, b, kb + NK, npos, nblk);
        }
        idx_sync();
        /* G chunks a thread loads before it converts them: 2 for f32 q in
         * the matrix body (its hi + lo fragments leave no room for 4 in a
         * loop over records: spills on gfx942) */
        constexpr int G = KIND != KIND_FMA && QT == MLA_DTYPE_F32 ? 2 : 4;
        load_tile<CT, NK, G>(d, KP, KBs, Ks);
        idx_sync();
        ops.scores(d, b, Ks, Sp);
        idx_sync();
        float x[KPT];
        float mx = -INFINITY;
#pragma unroll
        for (int e = 0; e < KPT; ++e) {
            const int k = u * KPT + e;
            float s = 0.0f;
#pragma unroll
            for (int p = 0; p < NPART; ++p)
                s += Sp[(p * TM + r) * NK + k];
            const int32_t pos = KP[k];
            x[e] = (pos >= 0 && pos <= lim) ? s * d.ss2 : -INFINITY;
            mx = fmaxf(mx, x[e]);
        }
        for (int off = 1; off < TPR; off *= 2)
            mx = fmaxf(mx, mla_shfl_xor(mx, off));
        const float m_new = fmaxf(m_run, mx);
        const float alpha = m_new == -INFINITY ? 1.0f : exp2f(m_run - m_new);
        float sum = 0.0f;
#pragma unroll
        for (int e = 0; e < KPT; ++e) {
            const float p = x[e] == -INFINITY ? 0.0f : exp2f(x[e] - m_new);
            sum += p;
            const int k = u * KPT + e;
            if constexpr (KIND == KIND_FMA)
                Pf[r * NK + k] = p;
            else
                Pb[r * (NK + 8) + k] = (uint16_t)mla_fb_f32_to_bf16(p);
        }
        for (int off = 1; off < TPR; off *= 2)
            sum += mla_shfl_xor(sum, off);
        l_run = l_run * alpha + sum;
        m_run = m_new;
        if (u == 0)
            As[r] = alpha;
        idx_sync();
        if constexpr (KIND == KIND_FMA)
            ops.pv(d, b, Pf, As, Ks);
        else
            ops.pv(d, b, Pb, As, Ks);
        idx_sync();
    }

    if (u == 0)
        row_finish(d, b, r, m_run, l_run, Fs, Or);
    idx_sync();
    ops.store(d, b, [&](int rr, int col, float v) { out_store(d, b, Or, Fs, rr, col, v); });
}

#include "hip/attention_nv.h"

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

/* Graph-capturable: the grid is fixed at plan create, the work list is
 * device data; a block runs the records next_block gives it (NJT from the
 * row count at create: an update with more rows loops here). The
 * descriptor, the record and the cursor live in shared memory (see
 * smem_layout): nothing of the loop stays in scalar registers across the
 * attention body. */
template <int PATH, int CT, int QT, int RG>
__global__ __launch_bounds__(kThreads) void attention_kernel(att_desc d)
{
    MLA_IDX_SMEM(unsigned char, smem);
    att_desc &sd = *reinterpret_cast<att_desc *>(smem);
    att_blk &sb = *reinterpret_cast<att_blk *>(smem + align16((int)sizeof(att_desc)));
    if (threadIdx.x == 0) {
        sd = d;
        next_block<PATH>(d, sb, true);
    }
    idx_sync();
#if MLA_ATT_MATRIX_KIND == 1
    constexpr bool nv = PATH == PATH_MATRIX; /* RG: the NVIDIA body's row groups */
#else
    constexpr bool nv = false;
#endif
    /* the NVIDIA body reads the descriptor from the kernel's parameters
     * (constant operands; gfx9 keeps it in shared memory for want of scalar
     * registers) */
    if constexpr (nv)
        nv_zero_pads<CT, RG>(d, smem);
    else if constexpr (PATH == PATH_MATRIX)
        zero_pads<MLA_ATT_MATRIX_KIND, QT, kColChunk>(sd, smem);
    else
        zero_pads<KIND_FMA, MLA_DTYPE_BF16, kColChunkFma>(sd, smem);
    uint32_t nv_ph = 0; /* the NVIDIA body's mbarrier parities */
    while (sb.live) {
        if constexpr (nv)
            attend_nv<CT, RG>(d, sb, smem, nv_ph);
        else if constexpr (PATH == PATH_MATRIX)
            attend<MLA_ATT_MATRIX_KIND, CT, QT, kColChunk>(sd, sb, smem);
        else /* q read through its run-time dtype */
            attend<KIND_FMA, CT, MLA_DTYPE_BF16, kColChunkFma>(sd, sb, smem);
        idx_sync(); /* every thread is done with the record */
        if (threadIdx.x == 0)
            next_block<PATH>(sd, sb, false);
        idx_sync();
    }
}

/* The rows the attention blocks do not finish: a team of kTeam threads per
 * (row, head, column chunk of kTeam * VEC). Rows of a padding sequence (no
 * work item) get o = 0 and lse = -inf; rows of a sequence with several
 * splits the combine of their partials (weights e^(lse_i - max), empty
 * splits 0, sinks once); rows of a one-split sequence were written directly
 * and are left alone. A lane combines VEC consecutive columns (16-byte loads
 * of the partials when L is a multiple of 4), its loads over the splits
 * independent of each other (several in flight). */
constexpr int kTeam = 64;

template <int VEC>
__global__ __launch_bounds__(kThreads) void finish_kernel(att_desc d, int64_t teams)
{
    const int64_t team = (int64_t)blockIdx.x * (kThreads / kTeam) + threadIdx.x / kTeam;
    if (team >= teams)
        return;
    const int lane = (int)threadIdx.x % kTeam;
    const int32_t L = (int32_t)d.c.L, nch = (L + kTeam * VEC - 1) / (kTeam * VEC);
    const int64_t pair = team / nch;
    const int32_t chunk = (int32_t)(team - pair * nch);
    const int64_t row = pair / d.H, h = pair % d.H;
    /* the sequence of row: the last s with cu_q[s] <= row (empty sequences
     * share their cu_q with the next: the last of them owns the row) */
    int32_t lo = 0, hi = d.S; /* cu_q[lo] <= row < cu_q[hi] */
    while (hi - lo > 1) {
        const int32_t mid = (lo + hi) / 2;
        if (d.cu_q[(int64_t)mid * d.cus] <= row)
            lo = mid;
        else
            hi = mid;
    }
    const int32_t ns = d.splits[lo];
    if (ns == 1)
        return;
    float M = -INFINITY;
    const float *pl = nullptr, *po = nullptr;
    if (ns > 1) {
        pl = d.part_lse + (row * d.H + h) * d.max_splits;
        po = d.part_o + (row * d.H + h) * d.max_splits * (int64_t)d.c.L;
        for (int i = 0; i < ns; ++i)
            M = fmaxf(M, pl[i]);
    }
    float f = 0.0f, lse = -INFINITY;
    if (M != -INFINITY) {
        float W = 0.0f;
        for (int i = 0; i < ns; ++i)
            W += pl[i] == -INFINITY ? 0.0f : expf(pl[i] - M);
        float mm = M, scale = 1.0f;
        if (d.sinks) {
            const float sk = d.sinks[h * d.sks];
            mm = fmaxf(M, sk);
            scale = expf(M - mm);
            W = W * scale + expf(sk - mm);
        }
        f = scale / W;
        lse = mm + logf(W);
    }
    const int32_t col0 = (chunk * kTeam + lane) * VEC;
    float acc[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e)
        acc[e] = 0.0f;
    if (M != -INFINITY && col0 < L) {
        constexpr int U = 8; /* splits whose loads are in flight together */
        for (int i0 = 0; i0 < ns; i0 += U) {
            float wt[U], v[U][VEC];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int i = i0 + u < ns ? i0 + u : ns - 1;
                const float l = pl[i];
                wt[u] = (i0 + u >= ns || l == -INFINITY) ? 0.0f : expf(l - M);
                const float *src = po + (int64_t)i * d.c.L + col0;
                if constexpr (VEC == 4) {
                    const mla_u32x4 q = *reinterpret_cast<const mla_u32x4 *>(src);
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        v[u][e] = mla_fb_float(q.v[e]);
                } else {
#pragma unroll
                    for (int e = 0; e < VEC; ++e)
                        v[u][e] = src[e];
                }
            }
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int e = 0; e < VEC; ++e)
                    acc[e] += wt[u] == 0.0f ? 0.0f : wt[u] * v[u][e];
        }
    }
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
        const int32_t col = col0 + e;
        if (col >= L)
            continue;
        const float val = M != -INFINITY ? acc[e] * f : 0.0f;
        const int64_t off = row * d.os0 + h * d.os1 + (int64_t)col * d.os2;
        if (d.o_bf16)
            static_cast<uint16_t *>(d.o)[off] = (uint16_t)mla_fb_f32_to_bf16(val);
        else
            static_cast<float *>(d.o)[off] = val;
    }
    if (lane == 0 && chunk == 0 && d.lse)
        d.lse[row * d.lse0 + h * d.lse1] = lse;
}

/* --------------------------------------------------------------- host */

int path_of(const mla_attention_plan *p)
{
    const char *force = getenv("MLA_HIP_ATTENTION");
    if (force && !strcmp(force, "fma"))
        return PATH_FMA;
    return p->desc.cache.kv_lora + p->desc.cache.rope <= kMaxDimsMatrix ? PATH_MATRIX : PATH_FMA;
}

template <int PATH, int CT, int QT, int RG>
mla_status launch(mla_context *ctx, const att_desc &d, int64_t blocks, int smem)
{
#if defined(__CUDACC__) && !MLA_IDX_EMU
    if (smem > 48 * 1024) {
        const cudaError_t err = cudaFuncSetAttribute(
            attention_kernel<PATH, CT, QT, RG>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (err != cudaSuccess)
            return mla_hip_fail(ctx, err, "cudaFuncSetAttribute (attention shared memory)");
    }
#endif
    attention_kernel<PATH, CT, QT, RG>
        <<<(unsigned)blocks, kThreads, (size_t)smem, mla_hip_state_of(ctx)->stream>>>(d);
    return mla_hip_check_launch(ctx, "attention kernel launch");
}

/* f(tag) for q's dtype (BF16, F32, FP8_E4M3FN, FP8_E4M3FNUZ). */
template <typename F> static inline mla_status with_q_dtype(int dt, F &&f)
{
    if (dt == MLA_DTYPE_BF16)
        return f(dtype_tag<MLA_DTYPE_BF16>{});
    if (dt == MLA_DTYPE_F32)
        return f(dtype_tag<MLA_DTYPE_F32>{});
    if (dt == MLA_DTYPE_FP8_E4M3FN)
        return f(dtype_tag<MLA_DTYPE_FP8_E4M3FN>{});
    return f(dtype_tag<MLA_DTYPE_FP8_E4M3FNUZ>{});
}

/* NVIDIA: the body of hip/attention_nv.h, q's dtype read at run time, RG
 * row groups; gfx9: the MFMA body per q dtype. */
mla_status launch_matrix(mla_context *ctx, const att_desc &d, int64_t blocks, int smem, int ct,
                         int qt, int rg)
{
    return with_cache_dtype(ct, [&](auto ctag) {
        constexpr int CT = decltype(ctag)::value;
#if defined(__CUDACC__)
        (void)qt;
        if (rg == 1)
            return launch<PATH_MATRIX, CT, MLA_DTYPE_BF16, 1>(ctx, d, blocks, smem);
        if (rg == 2)
            return launch<PATH_MATRIX, CT, MLA_DTYPE_BF16, 2>(ctx, d, blocks, smem);
        return launch<PATH_MATRIX, CT, MLA_DTYPE_BF16, 4>(ctx, d, blocks, smem);
#else
        (void)rg;
        return with_q_dtype(qt, [&](auto qtag) {
            constexpr int QT = decltype(qtag)::value;
            return launch<PATH_MATRIX, CT, QT, 0>(ctx, d, blocks, smem);
        });
#endif
    });
}

mla_status launch_fma(mla_context *ctx, const att_desc &d, int64_t blocks, int smem, int ct)
{
    return with_cache_dtype(ct, [&](auto ctag) {
        constexpr int CT = decltype(ctag)::value;
        return launch<PATH_FMA, CT, MLA_DTYPE_BF16, 0>(ctx, d, blocks, smem);
    });
}

} // namespace

/* Key rows in shared memory, values: D rounded up to the body's k-steps
 * (NVIDIA: pairs of 16; gfx9: all of its 576), plus 8 against bank
 * conflicts. */
static int64_t key_row_values(int64_t D, int path)
{
    if (path != PATH_MATRIX)
        return (D + 15) / 16 * 16 + 8;
#if defined(__CUDACC__)
    return (D + 31) / 32 * 32 + 8;
#else
    return (D < kMaxDimsMatrix ? kMaxDimsMatrix : D + 15) / 16 * 16 + 8;
#endif
}

/* Row groups of 16 of the NVIDIA body: as many as a record's rows fill
 * (the heads of one query row, or of several in dense prefill and MTP
 * decode, from the largest query length create planned), one for f32 q
 * (its hi + lo rows would not fit beside 64 keys); at most two over bf16
 * caches, whose keys cost nothing to stage twice as often, while 64 rows'
 * scores read q and keys from shared memory at one load per mma and leave
 * no registers for q (H200, 128 heads: 2 groups 1255 us, 4 groups 1335;
 * fp8 caches the other way round, 2221 / 1825: their conversion is per
 * staging). MLA_HIP_ATT_RG=1|2|4 forces a count (bf16 / fp8 q only). */
static int nv_row_groups(int64_t H, int64_t qcap, bool sparse, bool qsplit, bool bf16_cache)
{
    const int64_t rows = sparse ? H : H * qcap;
    const char *force = getenv("MLA_HIP_ATT_RG");
    if (force && !qsplit && (!strcmp(force, "1") || !strcmp(force, "2") || !strcmp(force, "4")))
        return atoi(force);
    return qsplit || rows <= 16 ? 1 : rows <= 32 || bf16_cache ? 2 : 4;
}

mla_status mla_hip_attention(mla_context *ctx, const mla_attention_op_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const mla_tensor *ts[] = {&a->q, &a->cache, &a->context_lens, &a->cu_q_lens, &a->o};
    const char *names[] = {"q", "cache", "context_lens", "cu_q_lens", "o"};
    for (int i = 0; i < 5; ++i) {
        const mla_status st = mla_hip_check_tensor_memory(ctx, ts[i], names[i]);
        if (st != MLA_OK)
            return st;
    }
    const mla_tensor *opt[] = {&a->block_table, &a->topk_indices, &a->sinks, &a->lse};
    const char *opt_names[] = {"block_table", "topk_indices", "sinks", "lse"};
    for (int i = 0; i < 4; ++i) {
        if (!opt[i]->data)
            continue;
        const mla_status st = mla_hip_check_tensor_memory(ctx, opt[i], opt_names[i]);
        if (st != MLA_OK)
            return st;
    }
    const mla_attention_plan *p = a->plan;
    const mla_attention_desc &ds = p->desc;
    att_desc d = {};
    mla_status st = make_cache_dev(ctx, ds.cache, a->cache, d.c);
    if (st != MLA_OK)
        return st;
    const int64_t H = ds.heads, L = ds.cache.kv_lora, R = ds.cache.rope, D = L + R;
    const bool fp8_scaled = ds.cache.layout == MLA_CACHE_FP8_SCALED;
    const bool cache_fp8 = ds.cache.dtype != MLA_DTYPE_BF16 && !fp8_scaled;
    const bool q_fp8 = ds.q_dtype == MLA_DTYPE_FP8_E4M3FN || ds.q_dtype == MLA_DTYPE_FP8_E4M3FNUZ;
    d.q = static_cast<const uint8_t *>(a->q.data);
    d.q_dtype = (int32_t)a->q.dtype;
    d.paged = ds.paged;
    d.sparse = ds.topk > 0;
    d.o_bf16 = a->o.dtype == MLA_DTYPE_BF16;
    d.table = static_cast<const int32_t *>(a->block_table.data);
    d.ctx_lens = static_cast<const int32_t *>(a->context_lens.data);
    d.cu_q = static_cast<const int32_t *>(a->cu_q_lens.data);
    d.topk = static_cast<const int32_t *>(a->topk_indices.data);
    d.sinks = static_cast<const float *>(a->sinks.data);
    d.o = a->o.data;
    d.lse = static_cast<float *>(a->lse.data);
    struct {
        const mla_tensor *t;
        int dim;
        int32_t *out;
        const char *name;
    } strides[] = {{&a->q, 0, &d.qs0, "q.stride"},
                   {&a->q, 1, &d.qs1, "q.stride"},
                   {&a->q, 2, &d.qs2, "q.stride"},
                   {&a->block_table, 0, &d.bts0, "block_table.stride"},
                   {&a->block_table, 1, &d.bts1, "block_table.stride"},
                   {&a->context_lens, 0, &d.cls, "context_lens.stride"},
                   {&a->cu_q_lens, 0, &d.cus, "cu_q_lens.stride"},
                   {&a->topk_indices, 0, &d.tks0, "topk_indices.stride"},
                   {&a->topk_indices, 1, &d.tks1, "topk_indices.stride"},
                   {&a->sinks, 0, &d.sks, "sinks.stride"},
                   {&a->o, 0, &d.os0, "o.stride"},
                   {&a->o, 1, &d.os1, "o.stride"},
                   {&a->o, 2, &d.os2, "o.stride"},
                   {&a->lse, 0, &d.lse0, "lse.stride"},
                   {&a->lse, 1, &d.lse1, "lse.stride"}};
    for (const auto &e : strides) {
        if (!e.t->data || e.dim >= e.t->ndim)
            continue;
        if (e.t->stride[e.dim] > INT32_MAX)
            return mla_fail(ctx, MLA_ERR_UNSUPPORTED, e.name,
                            "%s[%d] = %lld: the attention kernels take strides below 2^31", e.name,
                            e.dim, (long long)e.t->stride[e.dim]);
        *e.out = (int32_t)e.t->stride[e.dim];
    }
    unsigned char *ws = static_cast<unsigned char *>(a->workspace);
    d.max_splits = p->max_splits;
    d.part_o = p->max_splits > 1 ? reinterpret_cast<float *>(ws + p->part_o_offset) : nullptr;
    d.part_lse = p->max_splits > 1 ? reinterpret_cast<float *>(ws + p->part_lse_offset) : nullptr;
    d.work = p->work_dev;
    d.splits = p->splits_dev;
    d.S = (int32_t)p->S;
    d.H = (int32_t)H;
    d.D = (int32_t)D;
    d.nope_chunks = (int32_t)((L + kChunk - 1) / kChunk);
    d.cpk = d.nope_chunks + (int32_t)((R + kChunk - 1) / kChunk);
    { /* chunk steps of the layout (key_bases, chunk_of) */
        const int32_t eb = (int32_t)mla_dtype_size(ds.cache.dtype);
        d.n_sh = d.r_sh = 0;
        d.n_cb = d.r_cb = 0;
        d.rope_bf16 = ds.cache.dtype == MLA_DTYPE_BF16 || fp8_scaled;
        d.tok_bytes = fp8_scaled ? (int32_t)(L + 4 * (L / MLA_CL_SCALE_GROUP) + 2 * R) : 0;
        if (ds.cache.layout == MLA_CACHE_SHUFFLED) { /* 16-token x 16-byte tiles */
            d.n_ts = d.r_ts = MLA_CL_TILE_TOKENS * MLA_CL_TILE_BYTES;
            if (eb == 1) { /* two 8-value chunks per tile row */
                d.n_sh = d.r_sh = 1;
                d.n_cb = d.r_cb = kChunk;
            }
        } else {
            d.n_ts = kChunk * eb;
            d.r_ts = kChunk * (d.rope_bf16 ? 2 : eb);
        }
    }
    double ss = (double)ds.softmax_scale * (double)kLog2e;
    if (q_fp8)
        ss *= (double)ds.q_scale;
    if (cache_fp8)
        ss *= (double)ds.cache.k_scale;
    d.ss2 = (float)ss;
    d.kso = cache_fp8 ? ds.cache.k_scale : 1.0f;

    const int path = path_of(p);
    /* launch sizes from what the plan fixed at create (an update under a
     * captured graph changes num_work and max_q_len, not these) */
    const int64_t qcap = p->q_len_at_create > 0 ? p->q_len_at_create : 1;
#if defined(__CUDACC__)
    const bool nv = path == PATH_MATRIX;
#else
    const bool nv = false;
#endif
    d.qsplit = a->q.dtype == MLA_DTYPE_F32;
    d.bs_sh = -1;
    for (int sh = 0; sh < 31; ++sh)
        if ((int64_t)1 << sh == ds.cache.block_size)
            d.bs_sh = sh;
    const int rg =
        nv ? nv_row_groups(H, qcap, d.sparse, d.qsplit, ds.cache.dtype == MLA_DTYPE_BF16) : 0;
    d.DP = (int32_t)key_row_values(D, path);
    const int TM = nv ? 16 * rg : kTM;
#if !defined(__CUDACC__)
    d.KS = (int32_t)((D + kTK - 1) / kTK); /* gfx9's k-steps */
#endif
    d.HT = (int32_t)(H < TM ? H : TM);
    d.NHT = (int32_t)((H + d.HT - 1) / d.HT);
    d.JT = d.sparse ? 1 : TM / d.HT;
    d.NJT = (int32_t)((qcap + d.JT - 1) / d.JT);
    d.num_items = (int32_t)p->work_capacity;
    const int32_t col_chunk = path == PATH_MATRIX ? kColChunk : kColChunkFma;
    d.NCC = (int32_t)((L + col_chunk - 1) / col_chunk);
    if (p->T == 0)
        return MLA_OK;
    int64_t smem = 0;
    if (nv) {
        /* cp.async where every chunk is aligned; fp8 caches as raw rows:
         * 8-byte code chunks, the scales, 16-byte bf16 rope chunks */
        d.async = cache_wide_ok(ds.cache, a->cache);
        if (ds.cache.dtype != MLA_DTYPE_BF16) {
            d.raw_so = 8 * d.nope_chunks;
            d.rb = (int32_t)((d.raw_so + (fp8_scaled ? 4 * (L / MLA_CL_SCALE_GROUP) : 0) +
                              (d.cpk - d.nope_chunks) * (d.rope_bf16 ? 16 : 8) + 15) /
                             16 * 16);
        }
        /* a whole token by one bulk copy where its bytes are contiguous and
         * 16-byte multiples: NORMAL and FP8_SCALED (MLA_HIP_ATTENTION=cpasync:
         * the per-chunk copies, for tests of that path) */
        const char *force = getenv("MLA_HIP_ATTENTION");
        const int64_t tok = fp8_scaled ? d.tok_bytes : D * (int64_t)mla_dtype_size(ds.cache.dtype);
        d.bulk = d.async && ds.cache.layout != MLA_CACHE_SHUFFLED && tok % 16 == 0 &&
                         !(force && !strcmp(force, "cpasync"))
                     ? (int32_t)tok
                     : 0;
        smem = nv_layout(rg, d.DP, d.rb, d.qsplit).total;
    } else {
#if defined(__CUDACC__)
        smem = smem_layout(kTM, kNKFma, 1, d.DP).total;
#else
        smem = smem_layout(kTM, path == PATH_MATRIX ? kNKMat : kNKFma,
                           path == PATH_MATRIX ? kNW : 1, d.DP)
                   .total;
#endif
    }
    if (smem > kSmemMax)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "cache_desc.kv_lora",
                        "L + R = %lld: the key tile needs %lld bytes of shared memory",
                        (long long)D, (long long)smem);
    /* the items create planned, at least two per compute unit (an update
     * may plan more: blocks then take several), at most the capacity */
    const int64_t units = 2 * (int64_t)(ctx->compute_units > 0 ? ctx->compute_units : 1);
    int64_t grid_items = p->work_at_create > units ? p->work_at_create : units;
    grid_items = grid_items < p->work_capacity ? grid_items : p->work_capacity;
    const int64_t blocks = grid_items * (int64_t)d.NJT * d.NHT * d.NCC;
    if (blocks > 0x7FFFFFFF || p->work_capacity * (int64_t)d.NJT * d.NHT * d.NCC > 0x7FFFFFFF)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "q.shape",
                        "%lld attention blocks: beyond one launch", (long long)blocks);
    if (blocks > 0) {
        st = path == PATH_MATRIX
                 ? launch_matrix(ctx, d, blocks, (int)smem, ds.cache.dtype, a->q.dtype, rg)
                 : launch_fma(ctx, d, blocks, (int)smem, ds.cache.dtype);
        if (st != MLA_OK)
            return st;
    }
    /* padding rows and the combine: every run (the split counts are device
     * data that a plan update may change under a captured graph) */
    const bool vec4 = L % 4 == 0;
    const int64_t per_pair = (L + kTeam * (vec4 ? 4 : 1) - 1) / (kTeam * (vec4 ? 4 : 1));
    const int64_t teams = p->T * H * per_pair, per = kThreads / kTeam;
    const int64_t fblocks = (teams + per - 1) / per;
    if (fblocks > 0x7FFFFFFF)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "q.shape", "%lld rows x heads: beyond one launch",
                        (long long)(p->T * H));
    hipStream_t stream = mla_hip_state_of(ctx)->stream;
    if (vec4)
        finish_kernel<4><<<(unsigned)fblocks, kThreads, 0, stream>>>(d, teams);
    else
        finish_kernel<1><<<(unsigned)fblocks, kThreads, 0, stream>>>(d, teams);
    return mla_hip_check_launch(ctx, "attention finish kernel launch");
}
