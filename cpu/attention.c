/* CPU attention core (include/mla/mla_attention.h; MLA.md section 2, step 7):
 * absorbed MQA of q_cat [T, H, L + R] over the latent cache, dense or sparse,
 * split-KV with a combine.
 *
 * Work: a task is one work item of the plan ({seq, split, kv_begin, kv_end})
 * times one chunk of at most MTASK (row, head) pairs of that sequence (dense:
 * consecutive pairs in row-major order, so rows of several heads share every
 * key; sparse: heads of one row, whose keys are that row's top-k list). Tasks
 * are handed out dynamically over the threads; a second pass (after the
 * barrier) combines the split rows and writes the padding rows.
 *
 * Layout inside a task: (row, head) pairs lie on the vector lanes (VL = 16 per
 * vector), so the softmax of every pair is lane-wise:
 *   Qt [D][mp]   the chunk's q, transposed (fp8 q: fl(code * q_scale));
 *   Kt [NKT][KS] a tile of keys dequantized to fp32 rows (bf16 as is, fp8
 *                NORMAL / SHUFFLED fl(code * k_scale), FP8_SCALED fl(code * s)
 *                and its bf16 rope dims: the reference's values, through the
 *                offsets of core/ref/cache_layout.h);
 *   St [NKT][mp] scores, then probabilities;
 *   Ot [L][mp]   the unnormalized output.
 * Per tile of NKT keys (online softmax, fp32):
 *   St[a][m] = scale * sum_d Qt[d][m] * Kt[a][d]   (-inf where masked)
 *   mx' = max(mx, max_a St[a]);  alpha = e^(mx - mx');  P = e^(St - mx')
 *   l = l * alpha + sum_a P[a];  Ot[v][m] = alpha * Ot[v][m] + sum_a P[a][m] Kt[a][v]
 * (mx' is replaced by 0 while it is -inf, so that nothing is inf - inf.) A key
 * is masked when its position exceeds the row's causal limit p = c - n + j;
 * sparse: a -1 index (or one above p) gets position INT32_MAX, whose key row
 * is zeros. Both products are FMA register tiles: a block of MV vectors x NA
 * keys (or NA value dims) of accumulators, one vector load per MV and one
 * broadcast per NA per step (AVX-512 intrinsics; tiles at most 2 vectors wide,
 * so that q, which lives in L2 at 128 heads, is not streamed per FMA); the
 * AVX2 and portable copies compile plain C loops over the lanes. exp: SLEEF's
 * Sleef_expf16_u10 (1 ulp) when the build has SLEEF, else the polynomial of
 * exp_avx512 below; the portable copies call the C library's expf.
 *
 * Scores from bf16 q on CPUs with AVX512-BF16 (and no AMX,
 * mla_cpu_linear_has_bf16): vdpbf16ps on q's bf16 pairs and the keys as bf16
 * (a bf16 cache's bytes as stored; fp8 NORMAL / SHUFFLED: the codes' exact
 * bf16 values, k_scale applied to the score; FP8_SCALED: code * s, exact for
 * the writer's power-of-two scales, else the tile takes the fp32 path), two
 * exact products per lane and step, fp32 adds: twice the FMA rate, used for a
 * tile when the exponents of its keys and of q rule out the instruction's
 * subnormal flush (mla_cpu_dp_safe), else the FMA tile. With a bf16 o, P @ V
 * runs on vdpbf16ps as well: P rounded to bf16 (RNE), paired over keys,
 * against the values paired over the same keys (fp8 NORMAL / SHUFFLED:
 * P k_scale against the codes), as FlashMLA does (the conformance bound allows
 * bf16 P); a tile whose values are below 2^-60 in magnitude falls back to fp32
 * P and FMA. An F32 o keeps fp32 P. No fp32 key rows are decoded then, unless
 * a tile falls back. One core of the Zen 4 build host, batch 4, context 4096,
 * bf16 cache and o: 16 heads 86 GFLOP/s (FMA only) -> 96 (bf16 scores) -> 122
 * (both products); 128 heads 102 -> 128 -> 180.
 *
 * OpenBLAS is not used: cblas_sgemm on this kernel's tile shapes (M = 16..512
 * pairs, 64 keys, K = 576; and 512 x 64) ran at 63-105 GFLOP/s on one core of
 * the build host, below the FMA tiles with their decode and softmax included.
 *
 * End of a task: with one split (and no sinks in play for the partials) the
 * row is final:
 *   M = max(mx, sink) (mx without sinks); Z = l e^(mx - M) (+ e^(sink - M))
 *   o = Ot * (e^(mx - M) / Z);  lse = M + ln Z;  no visible key: o = 0, lse = -inf
 * With several splits it writes the normalized partial o_i = Ot / l and
 * lse_i = mx + ln l (-inf, o_i = 0 when empty) to slot `split`; the combine:
 *   M = max(max_i lse_i, sink); w_i = e^(lse_i - M); Z = sum_i w_i (+ e^(sink - M))
 *   o = sum_i w_i o_i / Z; lse = M + ln Z; every lse_i = -inf: o = 0, lse = -inf.
 * The order of every sum is fixed by the plan and the tile sizes, never by the
 * thread count.
 *
 * Scratch: each thread's buffers come from the run's workspace
 * (mla_cpu_attention_scratch_bytes per thread); the run allocates nothing. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "core/attention_plan.h"
#include "core/ref/cache_layout.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"
#include "cpu/linear_kernel.h" /* mla_cpu_dp_safe, mla_cpu_linear_has_bf16 / _min_exp */

#if MLA_CPU_X86
#include <immintrin.h>
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the CPU cache kernels read multi-byte fields in host order: little-endian hosts only"
#endif

#define VL 16     /* (row, head) pairs per vector */
#define MTASK 128 /* (row, head) pairs per task, at most: 8 vectors */
#define NKT 64    /* keys per tile */

#if defined(__GNUC__)
#define ATTN_PREFETCH(p) __builtin_prefetch((p), 0, 1) /* prefetcht2: L2 */
#else
#define ATTN_PREFETCH(p) ((void)(p))
#endif

MLA_CPU_INLINE int64_t round16(int64_t n) { return (n + VL - 1) / VL * VL; }

/* The next tile's key bytes, as line runs, prefetched `per` lines at a time
 * between the register tiles of this tile's products (a burst of prefetches
 * at the decode would stall on the miss queue and come back too early). */
typedef struct attn_pf {
    const uint8_t *p[2 * NKT]; /* 64-byte aligned starts */
    int32_t lines[2 * NKT];
    int n, i;      /* runs; the run being issued */
    int32_t line;  /* next line of run i */
    int32_t per;   /* lines per step */
    int64_t total; /* lines in all runs */
} attn_pf;

MLA_CPU_INLINE void pf_run(attn_pf *pf, const uint8_t *p, int64_t bytes)
{
    const uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    const int32_t lines = (int32_t)(((uintptr_t)p + (uintptr_t)bytes - a + 63) / 64);
    pf->p[pf->n] = (const uint8_t *)a;
    pf->lines[pf->n++] = lines;
    pf->total += lines;
}

MLA_CPU_INLINE void pf_step(attn_pf *pf)
{
    int32_t k = pf->per;
    while (k > 0 && pf->i < pf->n) {
        const int32_t left = pf->lines[pf->i] - pf->line, take = left < k ? left : k;
        for (int32_t j = 0; j < take; ++j)
            ATTN_PREFETCH(pf->p[pf->i] + 64 * (int64_t)(pf->line + j));
        pf->line += take;
        k -= take;
        if (pf->line == pf->lines[pf->i])
            ++pf->i, pf->line = 0;
    }
}

/* fp32 values of one thread's scratch for L + R = D (KS = D rounded up to 16). */
static int64_t scratch_floats(int64_t L, int64_t R)
{
    const int64_t KS = round16(L + R);
    /* qt, ot, kt, st, mx / l / alpha / plim, kpos, row; then the bf16 pairs
     * of q and the bf16 key rows of the vdpbf16ps path (KS / 2 words each) */
    return MTASK * KS + MTASK * round16(L) + NKT * KS + NKT * MTASK + 4 * MTASK + NKT + KS +
           MTASK * KS / 2 + NKT * KS / 2 + NKT / 2 * MTASK + NKT / 2 * round16(L);
}

int64_t mla_cpu_attention_scratch_bytes(int64_t L, int64_t R)
{
    return (scratch_floats(L, R) * (int64_t)sizeof(float) + 255) / 256 * 256;
}

/* The three hot kernels of one ISA. */
typedef struct attn_kernels {
    /* st[a][m] = sum_{d < D} qt[d][m] * kt[a][d], a < nk, m < 16 nv (row strides mp, ks) */
    void (*qk)(const float *qt, int64_t mp, int nv, const float *kt, int64_t ks, int nk, int64_t D,
               float *st, attn_pf *pf);
    /* The online-softmax step of the header on st (a < nk), updating mx, l, alpha. */
    void (*softmax)(float *st, int64_t mp, int nv, int nk, float scale, const int32_t *kpos,
                    const int32_t *plim, int mask, float *mx, float *l, float *alpha);
    /* ot[v][m] = (alpha ? alpha[m] ot[v][m] : 0) + sum_{a < nk} pt[a][m] kt[a][v], v < L */
    void (*pv)(const float *pt, int64_t mp, int nv, const float *kt, int64_t ks, int nk, int64_t L,
               float *ot, const float *alpha, attn_pf *pf);
    /* register-tile calls of qk + pv for one tile (each may issue one pf
     * step), or NULL: the copy does not prefetch */
    int64_t (*calls)(int nv, int nk, int64_t L);
    /* qk from bf16 pairs by vdpbf16ps: st[a][m] = sum_{p < P} of the two
     * products of qp[p][m] and the pair p of key row kb + a * kbs (exact
     * products, fp32 adds); NULL: no such copy */
    void (*qk_dp)(const uint32_t *qp, int64_t mp, int nv, const uint32_t *kb, int64_t kbs, int nk,
                  int64_t P, float *st, attn_pf *pf);
    /* pv from bf16 pairs of keys by vdpbf16ps: ot[v][m] = (alpha ? alpha[m]
     * ot[v][m] : 0) + sum_{j < np} of the two products of pp[j][m] and vp[j][v] */
    void (*pv_dp)(const uint32_t *pp, int64_t mp, int nv, const uint32_t *vp, int np, int64_t L,
                  float *ot, const float *alpha, attn_pf *pf);
} attn_kernels;

/* Everything a task needs, fixed for the call. */
typedef struct attn_job {
    const mla_attention_op_args *a;
    const mla_attention_plan *p;
    const attn_kernels *k;
    int64_t H, L, R, D, KS, bs;
    int64_t max_chunks, hc; /* chunks per item; sparse: chunks per row */
    int layout, sparse, paged;
    int dp; /* bf16 q, bf16 or fp8 NORMAL / SHUFFLED cache, a vdpbf16ps copy: qk_dp where safe */
    float scale_dp; /* the softmax scale of qk_dp's scores: times k_scale for fp8 codes */
    int dpv;        /* dp with bf16 o: P @ V by pv_dp (P rounded to bf16) */
    float pscale;   /* pv_dp: P's factor, k_scale for fp8 codes (1 for bf16) */
    mla_dtype kdt;
    float k_scale, scale;
    char *scratch;
    int64_t scratch_bytes; /* per thread */
} attn_job;

typedef struct attn_scratch {
    float *qt, *ot, *kt, *st, *mx, *l, *alpha, *row;
    int32_t *plim, *kpos;
    uint32_t *qp; /* vdpbf16ps: q as bf16 pairs [KS / 2][mp] */
    uint32_t *kb; /* vdpbf16ps: the tile's keys as bf16 pairs [NKT][KS / 2] */
    uint32_t *pp; /* vdpbf16ps P @ V: P as bf16 pairs of keys [NKT / 2][mp] */
    uint32_t *vp; /* vdpbf16ps P @ V: values as bf16 pairs of keys [NKT / 2][L] */
} attn_scratch;

static attn_scratch carve(const attn_job *jb, int tid)
{
    float *f = (float *)(jb->scratch + (int64_t)tid * jb->scratch_bytes);
    attn_scratch s;
    s.qt = f;
    f += MTASK * jb->KS;
    s.ot = f;
    f += MTASK * round16(jb->L);
    s.kt = f;
    f += NKT * jb->KS;
    s.st = f;
    f += NKT * MTASK;
    s.mx = f;
    s.l = f + MTASK;
    s.alpha = f + 2 * MTASK;
    s.plim = (int32_t *)(f + 3 * MTASK);
    f += 4 * MTASK;
    s.kpos = (int32_t *)f;
    f += NKT;
    s.row = f;
    f += jb->KS;
    s.qp = (uint32_t *)f;
    f += MTASK * jb->KS / 2;
    s.kb = (uint32_t *)f;
    f += NKT * jb->KS / 2;
    s.pp = (uint32_t *)f;
    f += NKT / 2 * MTASK;
    s.vp = (uint32_t *)f;
    return s;
}

MLA_CPU_INLINE int32_t i32_at(const mla_tensor *t, int64_t i)
{
    return ((const int32_t *)t->data)[i * t->stride[0]];
}

/* ------------------------------------------------------------ key decode */

/* fp8 code -> fp32, the value of mla_fb_e4m3fn(uz)_to_f32 in a form that
 * vectorizes to a few integer ops: a normal code (exponent field e > 0)
 * is its magnitude bits moved to the fp32 fields, (c & 0x7F) << 20, with
 * the exponent rebiased by 127 - bias; a subnormal one is m * 2^(-bias-2)
 * (an exact int-to-float conversion and power-of-two product); then the
 * sign. NaN codes (e4m3fn: magnitude 0x7F; e4m3fnuz: 0x80) give the
 * reference's quiet NaN 0x7FC00000. */
MLA_CPU_INLINE float fp8_value(uint32_t c, int fnuz)
{
    const uint32_t mag = c & 0x7Fu;
    const uint32_t nrm = (mag << 20) + ((fnuz ? 119u : 120u) << 23);
    const uint32_t sub = mla_fb_bits((float)(int32_t)(mag & 7u) * (fnuz ? 0x1p-10f : 0x1p-9f));
    const uint32_t is_sub = 0u - (uint32_t)(mag < 8u); /* all ones for e == 0 */
    const uint32_t v = (sub & is_sub) | (nrm & ~is_sub) | ((c & 0x80u) << 24);
    const uint32_t is_nan = 0u - (uint32_t)(fnuz ? c == 0x80u : mag == 0x7Fu);
    return mla_fb_float((MLA_FB_F32_QNAN & is_nan) | (v & ~is_nan));
}

/* n contiguous cache elements at p as fp32: bf16 as is; fp8 fl(code * s),
 * one fp32 product as the reference's mla_fb_mul (its NaN rule agrees: s is
 * finite and not NaN, so a NaN code's quiet NaN passes unchanged). */
MLA_CPU_INLINE void decode_run(const uint8_t *restrict p, int64_t n, mla_dtype dt, float s,
                               float *restrict out)
{
    if (dt == MLA_DTYPE_BF16) {
        MLA_SIMD for (int64_t i = 0; i < n; ++i)
        {
            uint16_t h;
            memcpy(&h, p + 2 * i, sizeof h); /* the cache need not be 2-byte aligned */
            out[i] = mla_fb_bf16_to_f32(h);
        }
    } else if (dt == MLA_DTYPE_FP8_E4M3FN) {
        MLA_SIMD for (int64_t i = 0; i < n; ++i) out[i] = fp8_value(p[i], 0) * s;
    } else {
        MLA_SIMD for (int64_t i = 0; i < n; ++i) out[i] = fp8_value(p[i], 1) * s;
    }
}

/* Token t of block blk as the fp32 row [k_nope | k_pe], zeros to KS. */
MLA_CPU_INLINE void decode_key(const attn_job *jb, const uint8_t *blk, int64_t t,
                               float *restrict out)
{
    const int64_t L = jb->L, R = jb->R, D = jb->D;
    if (jb->layout == MLA_CL_FP8_SCALED) {
        for (int64_t g = 0; g < L / MLA_CL_SCALE_GROUP; ++g) {
            float s;
            memcpy(&s, blk + mla_cl_fp8s_scale_byte(t, g, L, R), sizeof s);
            decode_run(blk + mla_cl_fp8s_value_byte(t, g * MLA_CL_SCALE_GROUP, L, R),
                       MLA_CL_SCALE_GROUP, jb->kdt, s, out + g * MLA_CL_SCALE_GROUP);
        }
        decode_run(blk + mla_cl_fp8s_rope_byte(t, 0, L, R), R, MLA_DTYPE_BF16, 1.0f, out + L);
    } else {
        const int64_t eb = jb->kdt == MLA_DTYPE_BF16 ? 2 : 1;
        if (jb->layout == MLA_CL_NORMAL) {
            decode_run(blk + mla_cl_elem_byte(MLA_CL_NORMAL, t, 0, L, R, jb->bs, eb), D, jb->kdt,
                       jb->k_scale, out);
        } else { /* L and R are multiples of K (validated): whole 16-byte tile rows */
            const int64_t K = mla_cl_shuffle_k(eb);
            for (int64_t i = 0; i < D; i += K)
                decode_run(blk + mla_cl_elem_byte(MLA_CL_SHUFFLED, t, i, L, R, jb->bs, eb), K,
                           jb->kdt, jb->k_scale, out + i);
        }
    }
    for (int64_t d = D; d < jb->KS; ++d)
        out[d] = 0.0f;
}

MLA_CPU_INLINE const uint8_t *block_of(const attn_job *jb, int64_t s, int64_t t)
{
    const mla_tensor *bt = &jb->a->block_table;
    int64_t blk = s;
    if (jb->paged)
        blk = ((const int32_t *)bt->data)[s * bt->stride[0] + (t / jb->bs) * bt->stride[1]];
    return (const uint8_t *)jb->a->cache.data + blk * jb->a->cache.stride[0];
}

/* Key j of the task's range (dense: position j; sparse: column j of the
 * row's top-k list) onto the prefetch list: its NORMAL / FP8_SCALED row, or
 * for SHUFFLED the two tile regions of its group of 16 tokens (at the
 * group's first token). The decode consumes a tile's keys in a burst, which
 * the hardware prefetcher does not run far enough ahead of (measured: 7-9%
 * of the time of a bf16 decode with 16 heads, one core). */
MLA_CPU_INLINE void prefetch_key(const attn_job *jb, attn_pf *pf, int64_t seq, int64_t row,
                                 int64_t r0, int64_t pmax, int64_t j)
{
    int64_t t = j;
    if (jb->sparse) {
        const mla_tensor *ti = &jb->a->topk_indices;
        t = ((const int32_t *)ti->data)[(r0 + row) * ti->stride[0] + j * ti->stride[1]];
        if (t < 0 || t > pmax)
            return;
    }
    const uint8_t *blk = block_of(jb, seq, t);
    const int64_t tb = t % jb->bs, L = jb->L, R = jb->R;
    const uint8_t *p0 = NULL, *p1 = NULL;
    int64_t n0 = 0, n1 = 0;
    if (jb->layout == MLA_CL_FP8_SCALED) {
        p0 = blk + tb * mla_cl_fp8s_token_bytes(L, R);
        n0 = mla_cl_fp8s_token_bytes(L, R);
    } else {
        const int64_t eb = jb->kdt == MLA_DTYPE_BF16 ? 2 : 1;
        if (jb->layout == MLA_CL_NORMAL) {
            p0 = blk + mla_cl_elem_byte(MLA_CL_NORMAL, tb, 0, L, R, jb->bs, eb);
            n0 = (L + R) * eb;
        } else if (tb % MLA_CL_TILE_TOKENS == 0) {
            p0 = blk + mla_cl_elem_byte(MLA_CL_SHUFFLED, tb, 0, L, R, jb->bs, eb);
            n0 = MLA_CL_TILE_TOKENS * L * eb;
            p1 = blk + mla_cl_elem_byte(MLA_CL_SHUFFLED, tb, L, L, R, jb->bs, eb);
            n1 = MLA_CL_TILE_TOKENS * R * eb;
        }
    }
    if (n0 > 0)
        pf_run(pf, p0, n0);
    if (n1 > 0)
        pf_run(pf, p1, n1);
}

/* ------------------------------------------------------------------ task */

/* The chunk's q: pair m < mc is (row r0 + (m0 + m) / H, head (m0 + m) % H);
 * lanes past mc are zero. */
MLA_CPU_INLINE int pack_q(const attn_job *jb, int64_t r0, int64_t m0, int64_t mc, int64_t mp,
                          int dp, const attn_scratch *s)
{
    unsigned emin = 0xFF; /* dp: the smallest exponent field of a nonzero q value */
    const mla_tensor *q = &jb->a->q;
    const int64_t D = jb->D, es = (int64_t)mla_dtype_size(q->dtype);
    const int fp8 = q->dtype == MLA_DTYPE_FP8_E4M3FN || q->dtype == MLA_DTYPE_FP8_E4M3FNUZ;
    const float qs = jb->p->desc.q_scale;
    for (int64_t m = 0; m < mc; ++m) {
        const int64_t r = r0 + (m0 + m) / jb->H, h = (m0 + m) % jb->H;
        const char *src = (const char *)q->data + (r * q->stride[0] + h * q->stride[1]) * es;
        mla_cpu_load(src, q->dtype, q->stride[2], D, s->row);
        if (fp8)
            for (int64_t d = 0; d < D; ++d)
                s->row[d] = mla_fb_mul(s->row[d], qs);
        for (int64_t d = 0; d < D; ++d)
            s->qt[d * mp + m] = s->row[d];
        if (dp) /* bf16 q: each value's bits are the top half of its fp32 */
            for (int64_t p = 0; p < jb->KS / 2; ++p) {
                const uint32_t lo = 2 * p < D ? mla_fb_bits(s->row[2 * p]) >> 16 : 0u;
                const uint32_t hi = 2 * p + 1 < D ? mla_fb_bits(s->row[2 * p + 1]) >> 16 : 0u;
                s->qp[p * mp + m] = lo | hi << 16;
                const unsigned el = (lo >> 7) & 0xFFu, eh = (hi >> 7) & 0xFFu;
                emin = (lo & 0x7FFFu) && el < emin ? el : emin;
                emin = (hi & 0x7FFFu) && eh < emin ? eh : emin;
            }
    }
    for (int64_t d = 0; d < D; ++d)
        for (int64_t m = mc; m < mp; ++m)
            s->qt[d * mp + m] = 0.0f;
    if (dp)
        for (int64_t p = 0; p < jb->KS / 2; ++p)
            for (int64_t m = mc; m < mp; ++m)
                s->qp[p * mp + m] = 0u;
    return (int)emin;
}

/* Token t of block blk as bf16 pairs in NORMAL order, zeros to KS values:
 * a bf16 cache's bytes as stored; an fp8 NORMAL / SHUFFLED cache's codes as
 * the bf16 of their value (exact: 3 mantissa bits, and the subnormal codes
 * are normal bf16), so that the dot product is code-valued and k_scale
 * multiplies the score; FP8_SCALED: code * s (exact for a power-of-two s)
 * and the bf16 rope dims. Returns 0 when a value is not exact. */
MLA_CPU_INLINE int copy_key_bf16(const attn_job *jb, const uint8_t *blk, int64_t t,
                                 uint32_t *restrict out)
{
    const int64_t L = jb->L, R = jb->R, D = jb->D;
    uint8_t *o = (uint8_t *)out;
    uint16_t *o16 = (uint16_t *)out;
    const int fnuz = jb->kdt == MLA_DTYPE_FP8_E4M3FNUZ;
    int exact = 1;
    if (jb->layout == MLA_CL_FP8_SCALED) {
        /* code * s is exact in bf16 when s is a power of two (the writer's
         * scales; MLA.md section 4): else the tile takes the fp32 path */
        for (int64_t g = 0; g < L / MLA_CL_SCALE_GROUP; ++g) {
            float sc;
            memcpy(&sc, blk + mla_cl_fp8s_scale_byte(t, g, L, R), sizeof sc);
            const uint32_t sb = mla_fb_bits(sc), se = (sb >> 23) & 0xFFu;
            exact &= (sb & 0x807FFFFFu) == 0 && se >= 1 && se <= 254;
            const uint8_t *c = blk + mla_cl_fp8s_value_byte(t, g * MLA_CL_SCALE_GROUP, L, R);
            uint16_t *og = o16 + g * MLA_CL_SCALE_GROUP;
            MLA_SIMD for (int64_t j = 0; j < MLA_CL_SCALE_GROUP; ++j) og[j] =
                (uint16_t)(mla_fb_bits(fp8_value(c[j], fnuz) * sc) >> 16);
        }
        memcpy(o + 2 * L, blk + mla_cl_fp8s_rope_byte(t, 0, L, R), (size_t)(2 * R));
    } else if (jb->kdt != MLA_DTYPE_BF16) {
        const int64_t K = jb->layout == MLA_CL_NORMAL ? D : 16; /* contiguous codes */
        for (int64_t i = 0; i < D; i += K) {
            const uint8_t *c = blk + mla_cl_elem_byte(jb->layout, t, i, L, R, jb->bs, 1);
            MLA_SIMD for (int64_t j = 0; j < K; ++j) o16[i + j] =
                (uint16_t)(mla_fb_bits(fp8_value(c[j], fnuz)) >> 16);
        }
    } else if (jb->layout == MLA_CL_NORMAL) {
        memcpy(o, blk + mla_cl_elem_byte(MLA_CL_NORMAL, t, 0, L, R, jb->bs, 2), (size_t)(2 * D));
    } else { /* SHUFFLED: whole 16-byte tile rows of 8 values */
        for (int64_t i = 0; i < D; i += 8)
            memcpy(o + 2 * i, blk + mla_cl_elem_byte(MLA_CL_SHUFFLED, t, i, L, R, jb->bs, 2),
                   MLA_CL_TILE_BYTES);
    }
    memset(o + 2 * D, 0, (size_t)(2 * (jb->KS - D)));
    return exact;
}

/* The end of a task for pair m (row r, head h): the final o and lse, or the
 * partial of slot `split`. */
MLA_CPU_INLINE void finish_pair(const attn_job *jb, int64_t r, int64_t h, int64_t m, int64_t mp,
                                int split, int nsplit, const attn_scratch *s)
{
    const mla_attention_op_args *a = jb->a;
    const int64_t L = jb->L;
    const float mx = s->mx[m], l = s->l[m];
    float *row = s->row;
    if (nsplit > 1) {
        const int64_t i = (r * jb->H + h) * jb->p->max_splits + split;
        float *po = (float *)((char *)a->workspace + jb->p->part_o_offset) + i * L;
        float *pl = (float *)((char *)a->workspace + jb->p->part_lse_offset) + i;
        if (!(l > 0.0f)) {
            for (int64_t v = 0; v < L; ++v)
                po[v] = 0.0f;
            *pl = -INFINITY;
            return;
        }
        const float inv = 1.0f / l;
        for (int64_t v = 0; v < L; ++v)
            po[v] = s->ot[v * mp + m] * inv;
        *pl = mx + logf(l);
        return;
    }
    float lse = -INFINITY, f = 0.0f;
    if (l > 0.0f) {
        float M = mx, z = l, e = 1.0f;
        if (a->sinks.data) {
            const float sk = ((const float *)a->sinks.data)[h * a->sinks.stride[0]];
            M = sk > mx ? sk : mx;
            e = expf(mx - M);
            z = l * e + expf(sk - M);
        }
        f = e / z;
        lse = M + logf(z);
    }
    for (int64_t v = 0; v < L; ++v)
        row[v] = l > 0.0f ? s->ot[v * mp + m] * f : 0.0f;
    const mla_tensor *o = &a->o;
    const int64_t es = (int64_t)mla_dtype_size(o->dtype);
    mla_cpu_store_float(row, (char *)o->data + (r * o->stride[0] + h * o->stride[1]) * es, o->dtype,
                        o->stride[2], L);
    if (a->lse.data)
        ((float *)a->lse.data)[r * a->lse.stride[0] + h * a->lse.stride[1]] = lse;
}

/* Task (item w, chunk c). */
MLA_CPU_INLINE void task_body(const attn_job *jb, int64_t w, int64_t c, const attn_scratch *s)
{
    const mla_attention_op_args *a = jb->a;
    const mla_attention_work it = jb->p->work_host[w];
    const int64_t seq = it.seq, H = jb->H;
    const int64_t r0 = i32_at(&a->cu_q_lens, seq), n = i32_at(&a->cu_q_lens, seq + 1) - r0;
    const int64_t ctx = i32_at(&a->context_lens, seq);
    const int nsplit = jb->p->splits_host[seq];
    int64_t m0, mc, row_sparse = 0;
    if (!jb->sparse) {
        m0 = c * MTASK;
        if (m0 >= n * H)
            return;
        mc = n * H - m0 < MTASK ? n * H - m0 : MTASK;
    } else {
        row_sparse = c / jb->hc;
        if (row_sparse >= n)
            return;
        m0 = row_sparse * H + (c % jb->hc) * MTASK;
        mc = H - (c % jb->hc) * MTASK < MTASK ? H - (c % jb->hc) * MTASK : MTASK;
    }
    const int nv = (int)((mc + VL - 1) / VL);
    const int64_t mp = (int64_t)nv * VL;
    int32_t pmin = INT32_MAX, pmax = -1;
    for (int64_t m = 0; m < mp; ++m) {
        /* padding lanes take the last pair's limit (their q is zero) */
        const int64_t j = (m0 + (m < mc ? m : mc - 1)) / H;
        const int32_t p = (int32_t)(ctx - n + j);
        s->plim[m] = p;
        pmin = p < pmin ? p : pmin;
        pmax = p > pmax ? p : pmax;
    }
    int64_t kb = it.kv_begin, ke = it.kv_end;
    if (!jb->sparse && ke > (int64_t)pmax + 1)
        ke = (int64_t)pmax + 1; /* keys no row of the chunk sees */
    for (int64_t m = 0; m < mp; ++m)
        s->mx[m] = -INFINITY, s->l[m] = 0.0f;
    int first = 1;
    if (kb < ke) {
        /* fp8 codes for the scores alone cost a second conversion pass: worth
         * it from 2 vectors of pairs on (one core, 16 heads: 74 -> 62 GFLOP/s;
         * 128 heads: 96 -> 121); with P @ V on the codes too it is the only pass */
        const int dp = jb->dp && (jb->kdt == MLA_DTYPE_BF16 || nv >= 2 || jb->dpv);
        /* P @ V from bf16 pairs too (bf16 o): no fp32 key rows unless a tile
         * falls back */
        const int dpv = dp && jb->dpv;
        const int eq = pack_q(jb, r0, m0, mc, mp, dp, s);
        const mla_tensor *ti = &a->topk_indices;
        for (int64_t k0 = kb; k0 < ke; k0 += NKT) {
            const int nk = (int)(ke - k0 < NKT ? ke - k0 : NKT);
            int32_t kmax = -1;
            int exact = 1;            /* every bf16 key value of the tile exact */
            const uint8_t *kblk[NKT]; /* each key's block (NULL: a masked sparse slot), token */
            int64_t ktok[NKT];
            attn_pf pf;
            pf.n = pf.i = 0;
            pf.line = 0;
            pf.total = 0;
            for (int i = 0; i < nk; ++i) {
                float *kr = s->kt + i * jb->KS;
                int64_t t = k0 + i;
                if (jb->k->calls && k0 + NKT + i < ke) /* the same key of the next tile */
                    prefetch_key(jb, &pf, seq, row_sparse, r0, pmax, k0 + NKT + i);
                if (jb->sparse) {
                    t = ((const int32_t *)ti
                             ->data)[(r0 + row_sparse) * ti->stride[0] + (k0 + i) * ti->stride[1]];
                    if (t < 0 || t > pmax) {
                        s->kpos[i] = INT32_MAX;
                        kmax = INT32_MAX;
                        kblk[i] = NULL;
                        for (int64_t d = 0; !dpv && d < jb->KS; ++d)
                            kr[d] = 0.0f;
                        if (dp)
                            memset(s->kb + i * (jb->KS / 2), 0, (size_t)(2 * jb->KS));
                        continue;
                    }
                }
                s->kpos[i] = (int32_t)t;
                kmax = (int32_t)t > kmax ? (int32_t)t : kmax;
                kblk[i] = block_of(jb, seq, t);
                ktok[i] = t % jb->bs;
                if (!dpv)
                    decode_key(jb, kblk[i], ktok[i], kr);
                if (dp)
                    exact &= copy_key_bf16(jb, kblk[i], ktok[i], s->kb + i * (jb->KS / 2));
            }
            /* vdpbf16ps where its subnormal flush cannot trigger (cpu/linear_kernel.h),
             * for P @ V where the values are >= 2^-60 in magnitude (field >= 67):
             * a product it flushes then has P < 2^-66, a weight far below the bound
             * (DAZ/FTZ of P and of partial sums: absolute errors below 2^-126) */
            const int ek = dp ? mla_cpu_linear_min_exp((const uint16_t *)s->kb, nk * jb->KS) : 0;
            const int qk_ok = dp && exact && mla_cpu_dp_safe(eq, ek);
            const int pv_ok = dpv && exact && ek >= 67;
            if (dpv && (!qk_ok || !pv_ok)) /* a fallback tile: the fp32 rows after all */
                for (int i = 0; i < nk; ++i) {
                    float *kr = s->kt + i * jb->KS;
                    if (kblk[i])
                        decode_key(jb, kblk[i], ktok[i], kr);
                    else
                        for (int64_t d = 0; d < jb->KS; ++d)
                            kr[d] = 0.0f;
                }
            if (jb->k->calls) {
                const int64_t calls = jb->k->calls(nv, nk, jb->L);
                pf.per = (int32_t)((pf.total + calls - 1) / calls);
            }
            float scale = jb->scale;
            if (qk_ok) {
                jb->k->qk_dp(s->qp, mp, nv, s->kb, jb->KS / 2, nk, jb->KS / 2, s->st, &pf);
                scale = jb->scale_dp;
            } else {
                jb->k->qk(s->qt, mp, nv, s->kt, jb->KS, nk, jb->D, s->st, &pf);
            }
            jb->k->softmax(s->st, mp, nv, nk, scale, s->kpos, s->plim, kmax > pmin, s->mx, s->l,
                           s->alpha);
            /* the first step's alpha is e^(-inf - mx') = 0: start from zero */
            const float *alpha = first ? NULL : s->alpha;
            if (pv_ok) {
                const int np = (nk + 1) / 2;
                const uint16_t *k16 = (const uint16_t *)s->kb;
                /* P (fp8 codes: P k_scale) rounded to bf16 (RNE), pairs of keys */
                const float ps = jb->pscale;
                for (int j = 0; j < np; ++j) {
                    const float *p0 = s->st + 2 * j * mp, *p1 = p0 + mp;
                    const int odd = 2 * j + 1 < nk;
                    uint32_t *o = s->pp + j * mp;
                    MLA_SIMD for (int64_t m = 0; m < mp; ++m) o[m] =
                        (uint32_t)mla_fb_f32_to_bf16(p0[m] * ps) |
                        (odd ? (uint32_t)mla_fb_f32_to_bf16(p1[m] * ps) << 16 : 0u);
                }
                for (int j = 0; j < np; ++j) { /* values: the same pairs of keys */
                    const uint16_t *v0 = k16 + 2 * j * jb->KS, *v1 = v0 + jb->KS;
                    const int odd = 2 * j + 1 < nk;
                    uint32_t *o = s->vp + j * jb->L;
                    MLA_SIMD for (int64_t d = 0; d < jb->L; ++d) o[d] =
                        (uint32_t)v0[d] | (odd ? (uint32_t)v1[d] << 16 : 0u);
                }
                jb->k->pv_dp(s->pp, mp, nv, s->vp, np, jb->L, s->ot, alpha, &pf);
            } else {
                jb->k->pv(s->st, mp, nv, s->kt, jb->KS, nk, jb->L, s->ot, alpha, &pf);
            }
            first = 0;
        }
    }
    for (int64_t m = 0; m < mc; ++m) {
        const int64_t pair = m0 + m;
        finish_pair(jb, r0 + pair / H, pair % H, m, mp, it.split, nsplit, s);
    }
}

/* Row r of the output after every task: the combine of a split sequence's
 * partials, or zeros for a padding sequence. tmp: L floats. */
MLA_CPU_INLINE void finish_row(const attn_job *jb, int64_t r, int64_t seq, float *tmp)
{
    const mla_attention_op_args *a = jb->a;
    const int64_t H = jb->H, L = jb->L, ms = jb->p->max_splits;
    const int64_t ctx = i32_at(&a->context_lens, seq);
    const int nsplit = ctx == 0 ? 0 : jb->p->splits_host[seq];
    if (nsplit == 1)
        return;
    const mla_tensor *o = &a->o;
    const int64_t es = (int64_t)mla_dtype_size(o->dtype);
    const float *po_all = (const float *)((const char *)a->workspace + jb->p->part_o_offset);
    const float *pl_all = (const float *)((const char *)a->workspace + jb->p->part_lse_offset);
    for (int64_t h = 0; h < H; ++h) {
        const float *pl = nsplit > 1 ? pl_all + (r * H + h) * ms : NULL;
        float M = -INFINITY;
        for (int i = 0; i < nsplit; ++i)
            M = pl[i] > M ? pl[i] : M;
        float lse = -INFINITY;
        for (int64_t v = 0; v < L; ++v)
            tmp[v] = 0.0f;
        if (M > -INFINITY) {
            if (a->sinks.data) {
                const float sk = ((const float *)a->sinks.data)[h * a->sinks.stride[0]];
                M = sk > M ? sk : M;
            }
            float z = 0.0f;
            for (int i = 0; i < nsplit; ++i) {
                if (!(pl[i] > -INFINITY))
                    continue; /* weight 0; its partial is zeros */
                const float wi = expf(pl[i] - M);
                const float *po = po_all + ((r * H + h) * ms + i) * L;
                MLA_SIMD for (int64_t v = 0; v < L; ++v) tmp[v] += wi * po[v];
                z += wi;
            }
            if (a->sinks.data)
                z += expf(((const float *)a->sinks.data)[h * a->sinks.stride[0]] - M);
            const float inv = 1.0f / z;
            MLA_SIMD for (int64_t v = 0; v < L; ++v) tmp[v] *= inv;
            lse = M + logf(z);
        }
        mla_cpu_store_float(tmp, (char *)o->data + (r * o->stride[0] + h * o->stride[1]) * es,
                            o->dtype, o->stride[2], L);
        if (a->lse.data)
            ((float *)a->lse.data)[r * a->lse.stride[0] + h * a->lse.stride[1]] = lse;
    }
}

/* ------------------------------------------------- portable kernels (C) */

MLA_CPU_INLINE void qk_c(const float *qt, int64_t mp, int nv, const float *kt, int64_t ks, int nk,
                         int64_t D, float *st)
{
    const int64_t w = (int64_t)nv * VL;
    for (int a = 0; a < nk; ++a) {
        const float *kr = kt + a * ks;
        float *sr = st + a * mp;
        for (int64_t m = 0; m < w; ++m)
            sr[m] = 0.0f;
        for (int64_t d = 0; d < D; ++d) {
            const float kv = kr[d];
            const float *qr = qt + d * mp;
            MLA_SIMD for (int64_t m = 0; m < w; ++m) sr[m] += qr[m] * kv;
        }
    }
}

MLA_CPU_INLINE void softmax_c(float *st, int64_t mp, int nv, int nk, float scale,
                              const int32_t *kpos, const int32_t *plim, int mask, float *mx,
                              float *l, float *alpha)
{
    const int64_t w = (int64_t)nv * VL;
    for (int64_t m = 0; m < w; ++m) {
        const float old = mx[m];
        float t = -INFINITY;
        for (int a = 0; a < nk; ++a) {
            float v = st[a * mp + m] * scale;
            if (mask && kpos[a] > plim[m])
                v = -INFINITY;
            st[a * mp + m] = v;
            t = v > t ? v : t;
        }
        const float nm = t > old ? t : old, safe = nm == -INFINITY ? 0.0f : nm;
        const float al = expf(old - safe);
        float sum = 0.0f;
        for (int a = 0; a < nk; ++a) {
            const float p = expf(st[a * mp + m] - safe);
            st[a * mp + m] = p;
            sum += p;
        }
        l[m] = l[m] * al + sum;
        mx[m] = nm;
        alpha[m] = al;
    }
}

MLA_CPU_INLINE void pv_c(const float *pt, int64_t mp, int nv, const float *kt, int64_t ks, int nk,
                         int64_t L, float *ot, const float *alpha)
{
    const int64_t w = (int64_t)nv * VL;
    for (int64_t v = 0; v < L; ++v) {
        float *orow = ot + v * mp;
        if (alpha) {
            MLA_SIMD for (int64_t m = 0; m < w; ++m) orow[m] *= alpha[m];
        } else {
            for (int64_t m = 0; m < w; ++m)
                orow[m] = 0.0f;
        }
        for (int a = 0; a < nk; ++a) {
            const float kv = kt[a * ks + v];
            const float *pr = pt + a * mp;
            MLA_SIMD for (int64_t m = 0; m < w; ++m) orow[m] += pr[m] * kv;
        }
    }
}

/* The softmax step needs no first-tile flag: the task sets mx = -inf and
 * l = 0 before the first tile. */
#define MLA_ATTN_C_KERNELS(SUFFIX, TARGET)                                                         \
    MLA_ATTN_C_DRIVER(SUFFIX, TARGET)                                                              \
    TARGET static void qk_##SUFFIX(const float *qt, int64_t mp, int nv, const float *kt,           \
                                   int64_t ks, int nk, int64_t D, float *st, attn_pf *pf)          \
    {                                                                                              \
        (void)pf;                                                                                  \
        qk_c(qt, mp, nv, kt, ks, nk, D, st);                                                       \
    }                                                                                              \
    TARGET static void softmax_##SUFFIX(float *st, int64_t mp, int nv, int nk, float scale,        \
                                        const int32_t *kpos, const int32_t *plim, int mask,        \
                                        float *mx, float *l, float *alpha)                         \
    {                                                                                              \
        softmax_c(st, mp, nv, nk, scale, kpos, plim, mask, mx, l, alpha);                          \
    }                                                                                              \
    TARGET static void pv_##SUFFIX(const float *pt, int64_t mp, int nv, const float *kt,           \
                                   int64_t ks, int nk, int64_t L, float *ot, const float *alpha,   \
                                   attn_pf *pf)                                                    \
    {                                                                                              \
        (void)pf;                                                                                  \
        pv_c(pt, mp, nv, kt, ks, nk, L, ot, alpha);                                                \
    }

/* The task and the row pass, one copy per ISA (the decode loops vectorize). */
#define MLA_ATTN_C_DRIVER(SUFFIX, TARGET)                                                          \
    TARGET static void task_##SUFFIX(const attn_job *jb, int64_t w, int64_t c,                     \
                                     const attn_scratch *s)                                        \
    {                                                                                              \
        task_body(jb, w, c, s);                                                                    \
    }                                                                                              \
    TARGET static void row_##SUFFIX(const attn_job *jb, int64_t r, int64_t seq, float *tmp)        \
    {                                                                                              \
        finish_row(jb, r, seq, tmp);                                                               \
    }

#define MLA_TARGET_NONE
MLA_ATTN_C_KERNELS(generic, MLA_TARGET_NONE)
#if MLA_CPU_X86
MLA_ATTN_C_KERNELS(avx2, MLA_TARGET_AVX2)
MLA_ATTN_C_DRIVER(avx512c, MLA_TARGET_AVX512)
#endif

static const attn_kernels kernels_generic = {qk_generic, softmax_generic, pv_generic, NULL, NULL,
                                             NULL};
#if MLA_CPU_X86
static const attn_kernels kernels_avx2 = {qk_avx2, softmax_avx2, pv_avx2, NULL, NULL, NULL};
#endif

/* -------------------------------------------------- AVX-512 kernels */

#if MLA_CPU_X86
#define MLA_UNROLL _Pragma("GCC unroll 32")

#if defined(MLA_HAVE_SLEEF)
/* sleef.h declares its __m512 functions only under __AVX512F__; the library
 * is built without it (run-time dispatch), so the one used is declared here. */
#if defined(__clang__) /* clang takes the target on the declaration */
__attribute__((target("avx512f"))) __m512 Sleef_expf16_u10avx512f(__m512 x);
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512cd")
__m512 Sleef_expf16_u10avx512f(__m512 x);
#pragma GCC pop_options
#endif
#endif

/* e^x, 16 lanes. SLEEF (1-ulp) when built with it; else: n = round(x log2 e),
 * r = x - n ln2 (Cody-Waite, ln2 = C1 + C2), e^r by cephes expf's polynomial
 * on |r| <= ln2 / 2 (about 2 ulp), times 2^n by vscalefps; results below
 * 2^-150 (x < -104, -inf included) are +0. */
MLA_TARGET_AVX512 static inline __m512 exp_avx512(__m512 x)
{
#if defined(MLA_HAVE_SLEEF)
    return Sleef_expf16_u10avx512f(x);
#else
    const __m512 xc =
        _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(88.72f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512 y = _mm512_scalef_ps(p, n);
    const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-104.0f), _CMP_LE_OQ);
    return _mm512_mask_mov_ps(y, tiny, _mm512_setzero_ps());
#endif
}

MLA_TARGET_AVX512 static void softmax_avx512(float *st, int64_t mp, int nv, int nk, float scale,
                                             const int32_t *kpos, const int32_t *plim, int mask,
                                             float *mx, float *l, float *alpha)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY), sc = _mm512_set1_ps(scale);
    for (int v = 0; v < nv; ++v) {
        const __m512 old = _mm512_loadu_ps(mx + VL * v);
        const __m512i pl = _mm512_loadu_si512(plim + VL * v);
        __m512 t = ninf;
        for (int a = 0; a < nk; ++a) {
            float *p = st + a * mp + VL * v;
            __m512 x = _mm512_mul_ps(_mm512_loadu_ps(p), sc);
            if (mask)
                x = _mm512_mask_mov_ps(x, _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(kpos[a]), pl),
                                       ninf);
            _mm512_storeu_ps(p, x);
            t = _mm512_max_ps(t, x);
        }
        const __m512 nm = _mm512_max_ps(t, old);
        const __m512 safe =
            _mm512_mask_mov_ps(nm, _mm512_cmp_ps_mask(nm, ninf, _CMP_EQ_OQ), _mm512_setzero_ps());
        const __m512 al = exp_avx512(_mm512_sub_ps(old, safe));
        __m512 sum = _mm512_setzero_ps();
        for (int a = 0; a < nk; ++a) {
            float *p = st + a * mp + VL * v;
            const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_loadu_ps(p), safe));
            _mm512_storeu_ps(p, e);
            sum = _mm512_add_ps(sum, e);
        }
        _mm512_storeu_ps(l + VL * v, _mm512_fmadd_ps(_mm512_loadu_ps(l + VL * v), al, sum));
        _mm512_storeu_ps(mx + VL * v, nm);
        _mm512_storeu_ps(alpha + VL * v, al);
    }
}

/* Scores: MV vectors of pairs x NA keys of accumulators, over all D dims:
 * per dim MV loads of q and NA broadcasts of key values. */
#define MLA_ATTN_QK_TILE(MV, NA)                                                                   \
    MLA_TARGET_AVX512 static void qk_tile_##MV##_##NA(                                             \
        const float *qt, int64_t mp, const float *kt, int64_t ks, int64_t D, float *st)            \
    {                                                                                              \
        __m512 acc[NA][MV];                                                                        \
        const float *kr[NA];                                                                       \
        MLA_UNROLL for (int i = 0; i < NA; ++i)                                                    \
        {                                                                                          \
            kr[i] = kt + i * ks;                                                                   \
            MLA_UNROLL for (int v = 0; v < MV; ++v) acc[i][v] = _mm512_setzero_ps();               \
        }                                                                                          \
        for (int64_t d = 0; d < D; ++d) {                                                          \
            __m512 q[MV];                                                                          \
            MLA_UNROLL for (int v = 0; v < MV; ++v) q[v] = _mm512_loadu_ps(qt + d * mp + VL * v);  \
            MLA_UNROLL for (int i = 0; i < NA; ++i)                                                \
            {                                                                                      \
                const __m512 b = _mm512_set1_ps(kr[i][d]);                                         \
                MLA_UNROLL for (int v = 0; v < MV; ++v) acc[i][v] =                                \
                    _mm512_fmadd_ps(q[v], b, acc[i][v]);                                           \
            }                                                                                      \
        }                                                                                          \
        MLA_UNROLL for (int i = 0; i < NA; ++i) MLA_UNROLL for (int v = 0; v < MV; ++v)            \
            _mm512_storeu_ps(st + i * mp + VL * v, acc[i][v]);                                     \
    }

/* The P V accumulators of a value tile (acc[NA][MV], NA rows of ot, stride
 * mp): the running output times alpha, or zeros for the first tile. */
#define MLA_ATTN_PV_START(MV, NA)                                                                  \
    do {                                                                                           \
        if (alpha) {                                                                               \
            MLA_UNROLL for (int v = 0; v < MV; ++v)                                                \
            {                                                                                      \
                const __m512 al = _mm512_loadu_ps(alpha + VL * v);                                 \
                MLA_UNROLL for (int i = 0; i < NA; ++i) acc[i][v] =                                \
                    _mm512_mul_ps(_mm512_loadu_ps(ot + i * mp + VL * v), al);                      \
            }                                                                                      \
        } else {                                                                                   \
            MLA_UNROLL for (int i = 0; i < NA; ++i) MLA_UNROLL for (int v = 0; v < MV; ++v)        \
                acc[i][v] = _mm512_setzero_ps();                                                   \
        }                                                                                          \
    } while (0)

/* Values: MV vectors of pairs x NA value dims, over the tile's keys: per key
 * MV loads of P and NA broadcasts of the key's values; alpha rescales the
 * running output as it is loaded. */
#define MLA_ATTN_PV_TILE(MV, NA)                                                                   \
    MLA_TARGET_AVX512 static void pv_tile_##MV##_##NA(const float *pt, int64_t mp,                 \
                                                      const float *kt, int64_t ks, int nk,         \
                                                      float *ot, const float *alpha)               \
    {                                                                                              \
        __m512 acc[NA][MV];                                                                        \
        MLA_ATTN_PV_START(MV, NA);                                                                 \
        for (int a = 0; a < nk; ++a) {                                                             \
            __m512 p[MV];                                                                          \
            const float *kr = kt + a * ks;                                                         \
            MLA_UNROLL for (int v = 0; v < MV; ++v) p[v] = _mm512_loadu_ps(pt + a * mp + VL * v);  \
            MLA_UNROLL for (int i = 0; i < NA; ++i)                                                \
            {                                                                                      \
                const __m512 b = _mm512_set1_ps(kr[i]);                                            \
                MLA_UNROLL for (int v = 0; v < MV; ++v) acc[i][v] =                                \
                    _mm512_fmadd_ps(p[v], b, acc[i][v]);                                           \
            }                                                                                      \
        }                                                                                          \
        MLA_UNROLL for (int i = 0; i < NA; ++i) MLA_UNROLL for (int v = 0; v < MV; ++v)            \
            _mm512_storeu_ps(ot + i * mp + VL * v, acc[i][v]);                                     \
    }

MLA_ATTN_QK_TILE(1, 8)
MLA_ATTN_QK_TILE(2, 8)
MLA_ATTN_QK_TILE(1, 1)
MLA_ATTN_QK_TILE(2, 1)
MLA_ATTN_PV_TILE(1, 16)
MLA_ATTN_PV_TILE(2, 8)
MLA_ATTN_PV_TILE(1, 1)
MLA_ATTN_PV_TILE(2, 1)

typedef void (*qk_tile_fn)(const float *, int64_t, const float *, int64_t, int64_t, float *);
typedef void (*pv_tile_fn)(const float *, int64_t, const float *, int64_t, int, float *,
                           const float *);

/* Tiles by width: [0] 1 vector, [1] 2 vectors; NA and the one-row tail tile
 * of each. Wider tiles (4 x 4, 8 x 2) stream more of the operand that lives
 * in L2 per FMA (q of 128 heads is 295 KB): measured one core, 128 heads,
 * 8 x 2 tiles 86 GFLOP/s, 4 x 4 101, 2 x 8 103 (16 heads: 1 x 8 / 1 x 16). */
static const qk_tile_fn qk_full[2] = {qk_tile_1_8, qk_tile_2_8};
static const qk_tile_fn qk_tail[2] = {qk_tile_1_1, qk_tile_2_1};
static const int qk_na[2] = {8, 8};
static const pv_tile_fn pv_full[2] = {pv_tile_1_16, pv_tile_2_8};
static const pv_tile_fn pv_tail[2] = {pv_tile_1_1, pv_tile_2_1};
static const int pv_na[2] = {16, 8};

/* The widest tile (index into the tables) that fits `left` vectors. */
static int width_index(int left) { return left >= 2 ? 1 : 0; }

static void qk_avx512(const float *qt, int64_t mp, int nv, const float *kt, int64_t ks, int nk,
                      int64_t D, float *st, attn_pf *pf)
{
    for (int v = 0; v < nv;) {
        const int wi = width_index(nv - v), na = qk_na[wi];
        int a = 0;
        for (; a + na <= nk; a += na) {
            qk_full[wi](qt + VL * v, mp, kt + a * ks, ks, D, st + a * mp + VL * v);
            pf_step(pf);
        }
        for (; a < nk; ++a) {
            qk_tail[wi](qt + VL * v, mp, kt + a * ks, ks, D, st + a * mp + VL * v);
            pf_step(pf);
        }
        v += 1 << wi;
    }
}

static void pv_avx512(const float *pt, int64_t mp, int nv, const float *kt, int64_t ks, int nk,
                      int64_t L, float *ot, const float *alpha, attn_pf *pf)
{
    for (int v = 0; v < nv;) {
        const int wi = width_index(nv - v), na = pv_na[wi];
        const float *al = alpha ? alpha + VL * v : NULL;
        int64_t d = 0;
        for (; d + na <= L; d += na) {
            pv_full[wi](pt + VL * v, mp, kt + d, ks, nk, ot + d * mp + VL * v, al);
            pf_step(pf);
        }
        for (; d < L; ++d) {
            pv_tail[wi](pt + VL * v, mp, kt + d, ks, nk, ot + d * mp + VL * v, al);
            pf_step(pf);
        }
        v += 1 << wi;
    }
}

/* The register-tile calls of qk_avx512 + pv_avx512 for one tile. */
static int64_t calls_avx512(int nv, int nk, int64_t L)
{
    int64_t n = 0;
    for (int v = 0; v < nv;) {
        const int wi = width_index(nv - v);
        n += nk / qk_na[wi] + nk % qk_na[wi] + L / pv_na[wi] + L % pv_na[wi];
        v += 1 << wi;
    }
    return n > 0 ? n : 1;
}

static const attn_kernels kernels_avx512 = {qk_avx512,    softmax_avx512, pv_avx512,
                                            calls_avx512, NULL,           NULL};

/* ------------------------------------------- AVX-512 BF16 scores (vdpbf16ps) */

#define MLA_TARGET_AVX512_BF16 __attribute__((target(MLA_AVX512_ISAS ",avx512bf16")))

/* Scores of MV vectors of pairs x NA keys from bf16 pairs: per pair one
 * vdpbf16ps per accumulator (q's pairs loaded, the key's pair broadcast):
 * acc + odd product, rounded, + even product, rounded; the products of two
 * bf16 values are exact in fp32. */
#define MLA_ATTN_QKDP_TILE(MV, NA)                                                                 \
    MLA_TARGET_AVX512_BF16 static void qkdp_tile_##MV##_##NA(                                      \
        const uint32_t *qp, int64_t mp, const uint32_t *kb, int64_t kbs, int64_t P, float *st)     \
    {                                                                                              \
        __m512 acc[NA][MV];                                                                        \
        const uint32_t *kr[NA];                                                                    \
        MLA_UNROLL for (int i = 0; i < NA; ++i)                                                    \
        {                                                                                          \
            kr[i] = kb + i * kbs;                                                                  \
            MLA_UNROLL for (int v = 0; v < MV; ++v) acc[i][v] = _mm512_setzero_ps();               \
        }                                                                                          \
        for (int64_t p = 0; p < P; ++p) {                                                          \
            __m512bh q[MV];                                                                        \
            MLA_UNROLL for (int v = 0; v < MV; ++v) q[v] =                                         \
                (__m512bh)_mm512_loadu_si512(qp + p * mp + VL * v);                                \
            MLA_UNROLL for (int i = 0; i < NA; ++i)                                                \
            {                                                                                      \
                const __m512bh b = (__m512bh)_mm512_set1_epi32((int)kr[i][p]);                     \
                MLA_UNROLL for (int v = 0; v < MV; ++v) acc[i][v] =                                \
                    _mm512_dpbf16_ps(acc[i][v], q[v], b);                                          \
            }                                                                                      \
        }                                                                                          \
        MLA_UNROLL for (int i = 0; i < NA; ++i) MLA_UNROLL for (int v = 0; v < MV; ++v)            \
            _mm512_storeu_ps(st + i * mp + VL * v, acc[i][v]);                                     \
    }

MLA_ATTN_QKDP_TILE(1, 8)
MLA_ATTN_QKDP_TILE(2, 8)
MLA_ATTN_QKDP_TILE(1, 1)
MLA_ATTN_QKDP_TILE(2, 1)

typedef void (*qkdp_tile_fn)(const uint32_t *, int64_t, const uint32_t *, int64_t, int64_t,
                             float *);
static const qkdp_tile_fn qkdp_full[2] = {qkdp_tile_1_8, qkdp_tile_2_8};
static const qkdp_tile_fn qkdp_tail[2] = {qkdp_tile_1_1, qkdp_tile_2_1};

static void qkdp_avx512(const uint32_t *qp, int64_t mp, int nv, const uint32_t *kb, int64_t kbs,
                        int nk, int64_t P, float *st, attn_pf *pf)
{
    for (int v = 0; v < nv;) {
        const int wi = width_index(nv - v), na = qk_na[wi];
        int a = 0;
        for (; a + na <= nk; a += na) {
            qkdp_full[wi](qp + VL * v, mp, kb + a * kbs, kbs, P, st + a * mp + VL * v);
            pf_step(pf);
        }
        for (; a < nk; ++a) {
            qkdp_tail[wi](qp + VL * v, mp, kb + a * kbs, kbs, P, st + a * mp + VL * v);
            pf_step(pf);
        }
        v += 1 << wi;
    }
}

/* P @ V of MV vectors of pairs x NA value dims from bf16 pairs of keys: per
 * pair one vdpbf16ps per accumulator (P's pairs loaded, the values' pair
 * broadcast); alpha rescales the running output as it is loaded. */
#define MLA_ATTN_PVDP_TILE(MV, NA)                                                                 \
    MLA_TARGET_AVX512_BF16 static void pvdp_tile_##MV##_##NA(                                      \
        const uint32_t *pp, int64_t mp, const uint32_t *vp, int64_t L, int np, float *ot,          \
        const float *alpha)                                                                        \
    {                                                                                              \
        __m512 acc[NA][MV];                                                                        \
        MLA_ATTN_PV_START(MV, NA);                                                                 \
        for (int j = 0; j < np; ++j) {                                                             \
            __m512bh p[MV];                                                                        \
            const uint32_t *vr = vp + j * L;                                                       \
            MLA_UNROLL for (int v = 0; v < MV; ++v) p[v] =                                         \
                (__m512bh)_mm512_loadu_si512(pp + j * mp + VL * v);                                \
            MLA_UNROLL for (int i = 0; i < NA; ++i)                                                \
            {                                                                                      \
                const __m512bh b = (__m512bh)_mm512_set1_epi32((int)vr[i]);                        \
                MLA_UNROLL for (int v = 0; v < MV; ++v) acc[i][v] =                                \
                    _mm512_dpbf16_ps(acc[i][v], p[v], b);                                          \
            }                                                                                      \
        }                                                                                          \
        MLA_UNROLL for (int i = 0; i < NA; ++i) MLA_UNROLL for (int v = 0; v < MV; ++v)            \
            _mm512_storeu_ps(ot + i * mp + VL * v, acc[i][v]);                                     \
    }

MLA_ATTN_PVDP_TILE(1, 16)
MLA_ATTN_PVDP_TILE(2, 8)
MLA_ATTN_PVDP_TILE(1, 1)
MLA_ATTN_PVDP_TILE(2, 1)

typedef void (*pvdp_tile_fn)(const uint32_t *, int64_t, const uint32_t *, int64_t, int, float *,
                             const float *);
static const pvdp_tile_fn pvdp_full[2] = {pvdp_tile_1_16, pvdp_tile_2_8};
static const pvdp_tile_fn pvdp_tail[2] = {pvdp_tile_1_1, pvdp_tile_2_1};

static void pvdp_avx512(const uint32_t *pp, int64_t mp, int nv, const uint32_t *vp, int np,
                        int64_t L, float *ot, const float *alpha, attn_pf *pf)
{
    for (int v = 0; v < nv;) {
        const int wi = width_index(nv - v), na = pv_na[wi];
        const float *al = alpha ? alpha + VL * v : NULL;
        int64_t d = 0;
        for (; d + na <= L; d += na) {
            pvdp_full[wi](pp + VL * v, mp, vp + d, L, np, ot + d * mp + VL * v, al);
            pf_step(pf);
        }
        for (; d < L; ++d) {
            pvdp_tail[wi](pp + VL * v, mp, vp + d, L, np, ot + d * mp + VL * v, al);
            pf_step(pf);
        }
        v += 1 << wi;
    }
}

static const attn_kernels kernels_avx512_bf16 = {qk_avx512,    softmax_avx512, pv_avx512,
                                                 calls_avx512, qkdp_avx512,    pvdp_avx512};
#endif /* MLA_CPU_X86 */

/* ------------------------------------------------------------------ run */

typedef void (*task_fn)(const attn_job *, int64_t, int64_t, const attn_scratch *);
typedef void (*row_fn)(const attn_job *, int64_t, int64_t, float *);

/* The sequence owning row r: the last s with cu_q[s] <= r (rows of empty
 * sequences share their start with the next one). */
static int64_t seq_of_row(const mla_tensor *cu, int64_t S, int64_t r)
{
    int64_t lo = 0, hi = S - 1;
    while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        if (i32_at(cu, mid) <= r)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

mla_status mla_cpu_attention_with_scratch(mla_context *ctx, const mla_attention_op_args *a,
                                          void *scratch)
{
    const mla_attention_plan *p = a->plan;
    const mla_attention_desc *d = &p->desc;
    attn_job jb;
    jb.a = a;
    jb.p = p;
    jb.H = d->heads;
    jb.L = d->cache.kv_lora;
    jb.R = d->cache.rope;
    jb.D = jb.L + jb.R;
    jb.KS = round16(jb.D);
    jb.bs = d->cache.block_size;
    jb.layout = (int)d->cache.layout;
    jb.sparse = d->topk > 0;
    jb.paged = d->paged != 0;
    jb.kdt = d->cache.dtype;
    jb.k_scale = d->cache.k_scale;
    jb.scale = d->softmax_scale;
    jb.hc = (jb.H + MTASK - 1) / MTASK;
    jb.max_chunks = jb.sparse ? p->max_q_len * jb.hc : (p->max_q_len * jb.H + MTASK - 1) / MTASK;
    if (jb.max_chunks < 1)
        jb.max_chunks = 1;
    jb.scratch = (char *)scratch;
    jb.scratch_bytes = mla_cpu_attention_scratch_bytes(jb.L, jb.R);

    task_fn task = task_generic;
    row_fn row = row_generic;
    jb.k = &kernels_generic;
    jb.dp = jb.dpv = 0;
#if MLA_CPU_X86
    switch (mla_cpu_isa_of(ctx)) {
    case MLA_CPU_ISA_AVX512:
        task = task_avx512c, row = row_avx512c, jb.k = &kernels_avx512;
        if (mla_cpu_linear_has_bf16())
            jb.k = &kernels_avx512_bf16;
        break;
    case MLA_CPU_ISA_AVX2:
        task = task_avx2, row = row_avx2, jb.k = &kernels_avx2;
        break;
    default:
        break;
    }
#endif
    jb.dp = jb.k->qk_dp && d->q_dtype == MLA_DTYPE_BF16;
    /* fp8 NORMAL / SHUFFLED codes: k_scale on the score, and P k_scale against
     * the codes (>= 2^-9; with k_scale >= 2^-40 a product the instruction
     * flushes has P < 2^-77); bf16 and FP8_SCALED rows hold the values */
    const int codes = jb.kdt != MLA_DTYPE_BF16 && jb.layout != MLA_CL_FP8_SCALED;
    jb.scale_dp = codes ? jb.scale * jb.k_scale : jb.scale;
    jb.pscale = codes ? jb.k_scale : 1.0f;
    jb.dpv = jb.dp && jb.k->pv_dp && d->out_dtype == MLA_DTYPE_BF16 &&
             (!codes || (jb.k_scale >= 0x1p-40f && jb.k_scale <= 0x1p40f));
    const int64_t tasks = p->num_work * jb.max_chunks, T = p->T;
    /* every task is at least one tile of MTASK pairs x NKT keys x D dims: heavy */
    const int nt = mla_cpu_threads(ctx, tasks > T ? tasks : T, (tasks > T ? tasks : T) * 32768);
    (void)nt; /* without OpenMP */
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int tid = 0;
#if defined(MLA_HAVE_OPENMP)
        tid = omp_get_thread_num();
#endif
        const attn_scratch s = carve(&jb, tid);
#if defined(MLA_HAVE_OPENMP)
#pragma omp for schedule(dynamic, 1)
#endif
        for (int64_t t = 0; t < tasks; ++t)
            task(&jb, t / jb.max_chunks, t % jb.max_chunks, &s);
#if defined(MLA_HAVE_OPENMP)
#pragma omp for schedule(static)
#endif
        for (int64_t r = 0; r < T; ++r)
            row(&jb, r, seq_of_row(&a->cu_q_lens, p->S, r), s.ot);
    }
    return MLA_OK;
}

mla_status mla_cpu_attention(mla_context *ctx, const mla_attention_op_args *a)
{
    return mla_cpu_attention_with_scratch(ctx, a,
                                          (char *)a->workspace + a->plan->host_scratch_offset);
}
