/* CPU attention core (include/mla/mla_attention.h; MLA.md section 2, step 7):
 * absorbed MQA of q_cat [T, H, L + R] over the latent cache, dense or sparse,
 * split-KV with a combine. This file is the driver; the tile kernels of each
 * instruction set are behind an attn_kernels table (cpu/attention_internal.h
 * lists the files).
 *
 * Work: a task is one work item of the plan ({seq, split, kv_begin, kv_end})
 * times one chunk of at most MTASK (row, head) pairs of that sequence (dense:
 * consecutive pairs in row-major order, so rows of several heads share every
 * key; sparse: heads of one row, whose keys are that row's top-k list). Tasks
 * are handed out dynamically over the threads; a second pass (after the
 * barrier) combines the split rows and writes the padding rows.
 *
 * Layout inside a task: (row, head) pairs lie on the vector lanes (VL = 16 per
 * group), so the softmax of every pair is lane-wise:
 *   Qt [D][mp]   the chunk's q, transposed (fp8 q: fl(code * q_scale));
 *   Kt [NKT][KS] a tile of keys decoded to fp32 rows (bf16 as is, fp8
 *                NORMAL / SHUFFLED fl(code * k_scale), FP8_SCALED fl(code * s)
 *                and its bf16 rope dims: the reference's values, through the
 *                offsets of core/ref/cache_layout.h);
 *   St [NKT][mp] scores, then probabilities;
 *   O  [mp][LS]  the unnormalized output, a row per pair (LS = L rounded up to 16).
 * Per tile of NKT keys (online softmax, fp32):
 *   St[a][m] = scale * sum_d Qt[d][m] * Kt[a][d]   (-inf where masked)
 *   mx' = max(mx, max_a St[a]);  alpha = e^(mx - mx');  P = e^(St - mx')
 *   l = l * alpha + sum_a P[a];  O[m][v] = alpha * O[m][v] + sum_a P[a][m] Kt[a][v]
 * (mx' is replaced by 0 while it is -inf, so that nothing is inf - inf.) A key
 * is masked when its position exceeds the row's causal limit p = c - n + j;
 * sparse: a -1 index (or one above p) gets position INT32_MAX, whose key row
 * is zeros.
 *
 * Scores from bf16 q on CPUs with AMX-BF16 take an attn_dp part on AMX tiles
 * (cpu/attention_amx.c), on CPUs with AVX512-BF16 and no AMX
 * (mla_cpu_has_bf16) one on vdpbf16ps (cpu/attention_bf16.c;
 * MLA_CPU_ISA=avx512-noamx picks it on AMX CPUs, avx512-nobf16 neither):
 * the keys as bf16 pairs, for a tile when the exponents of its keys and of
 * q rule out the instructions' subnormal flush (mla_cpu_dp_safe), else the
 * FMA tile. With a bf16 o, P @ V runs on the same units (P rounded to
 * bf16); a tile whose values are below 2^-60 in magnitude falls back to
 * fp32 P and FMA. An F32 o keeps fp32 P. No fp32 key rows are
 * decoded then, unless a tile falls back.
 *
 * OpenBLAS is not used: cblas_sgemm on this kernel's tile shapes (M = 16..512
 * pairs, 64 keys, K = 576; and 512 x 64) measured slower than the register
 * tiles with their decode and softmax included.
 *
 * End of a task: with one split (and no sinks in play for the partials) the
 * row is final:
 *   M = max(mx, sink) (mx without sinks); Z = l e^(mx - M) (+ e^(sink - M))
 *   o = O * (e^(mx - M) / Z);  lse = M + ln Z;  no visible key: o = 0, lse = -inf
 * With several splits it writes the normalized partial o_i = O / l and
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
#include <stdlib.h>
#include <string.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "core/attention_plan.h"
#include "core/checked.h"
#include "cpu/attention_internal.h"
#include "cpu/cpu_rows.h"
#include "cpu/linear_kernel.h" /* mla_cpu_dp_safe */

MLA_CPU_INLINE int64_t round16(int64_t n) { return (n + VL - 1) / VL * VL; }

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

int64_t mla_cpu_attention_scratch(const mla_context *ctx, const mla_attention_desc *d)
{
    return mla_sz_mul(ctx->num_threads,
                      mla_cpu_attention_scratch_bytes(d->cache.kv_lora, d->cache.rope));
}

/* Everything a task needs, fixed for the call. */
typedef struct attn_job {
    const mla_attention_op_args *a;
    const mla_attention_plan *p;
    const attn_kernels *k;
    const attn_dp *dk; /* the vdpbf16ps part, or NULL */
    attn_keyfmt f;
    int64_t H;
    int64_t max_chunks, hc; /* chunks per item; sparse: chunks per row */
    int sparse, paged;
    int dp; /* bf16 q, bf16 or fp8 NORMAL / SHUFFLED cache, a vdpbf16ps part: dk->qk where safe */
    float scale_dp; /* the softmax scale of dk->qk's scores: times k_scale for fp8 codes */
    int dpv;        /* dp with bf16 o: P @ V by dk->pv (P rounded to bf16) */
    float pscale;   /* dk->pv: P's factor, k_scale for fp8 codes (1 for bf16) */
    float scale;
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
    f += MTASK * jb->f.KS;
    s.ot = f;
    f += MTASK * round16(jb->f.L);
    s.kt = f;
    f += NKT * jb->f.KS;
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
    f += jb->f.KS;
    s.qp = (uint32_t *)f;
    f += MTASK * jb->f.KS / 2;
    s.kb = (uint32_t *)f;
    f += NKT * jb->f.KS / 2;
    s.pp = (uint32_t *)f;
    f += NKT / 2 * MTASK;
    s.vp = (uint32_t *)f;
    return s;
}

static inline int32_t i32_at(const mla_tensor *t, int64_t i)
{
    return ((const int32_t *)t->data)[i * t->stride[0]];
}

static inline const uint8_t *block_of(const attn_job *jb, int64_t s, int64_t t)
{
    const mla_tensor *bt = &jb->a->block_table;
    int64_t blk = s;
    if (jb->paged)
        blk = ((const int32_t *)bt->data)[s * bt->stride[0] + (t / jb->f.bs) * bt->stride[1]];
    return (const uint8_t *)jb->a->cache.data + blk * jb->a->cache.stride[0];
}

/* Key j of the task's range (dense: position j; sparse: column j of the
 * row's top-k list) onto the prefetch list: its NORMAL / FP8_SCALED row, or
 * for SHUFFLED the two tile regions of its group of 16 tokens (at the
 * group's first token). The decode consumes a tile's keys in a burst, which
 * the hardware prefetcher does not run far enough ahead of. */
static void prefetch_key(const attn_job *jb, attn_pf *pf, int64_t seq, int64_t row, int64_t r0,
                         int64_t pmax, int64_t j)
{
    int64_t t = j;
    if (jb->sparse) {
        const mla_tensor *ti = &jb->a->topk_indices;
        t = ((const int32_t *)ti->data)[(r0 + row) * ti->stride[0] + j * ti->stride[1]];
        if (t < 0 || t > pmax)
            return;
    }
    const uint8_t *blk = block_of(jb, seq, t);
    const int64_t tb = t % jb->f.bs, L = jb->f.L, R = jb->f.R;
    const uint8_t *p0 = NULL, *p1 = NULL;
    int64_t n0 = 0, n1 = 0;
    if (jb->f.layout == MLA_CL_FP8_SCALED) {
        p0 = blk + tb * mla_cl_fp8s_token_bytes(L, R);
        n0 = mla_cl_fp8s_token_bytes(L, R);
    } else {
        const int64_t eb = jb->f.kdt == MLA_DTYPE_BF16 ? 2 : 1;
        if (jb->f.layout == MLA_CL_NORMAL) {
            p0 = blk + mla_cl_elem_byte(MLA_CL_NORMAL, tb, 0, L, R, jb->f.bs, eb);
            n0 = (L + R) * eb;
        } else if (tb % MLA_CL_TILE_TOKENS == 0) {
            p0 = blk + mla_cl_elem_byte(MLA_CL_SHUFFLED, tb, 0, L, R, jb->f.bs, eb);
            n0 = MLA_CL_TILE_TOKENS * L * eb;
            p1 = blk + mla_cl_elem_byte(MLA_CL_SHUFFLED, tb, L, L, R, jb->f.bs, eb);
            n1 = MLA_CL_TILE_TOKENS * R * eb;
        }
    }
    if (n0 > 0)
        attn_pf_run(pf, p0, n0);
    if (n1 > 0)
        attn_pf_run(pf, p1, n1);
}

/* ------------------------------------------------------------------ task */

/* Row m < mc of the chunk's q as fp32 (fp8 q: fl(code * q_scale)) into row:
 * pair m is (row r0 + (m0 + m) / H, head (m0 + m) % H). */
static void q_row(const attn_job *jb, int64_t r0, int64_t m0, int64_t m, float *row)
{
    const mla_tensor *q = &jb->a->q;
    const int64_t D = jb->f.D, es = (int64_t)mla_dtype_size(q->dtype);
    const int64_t r = r0 + (m0 + m) / jb->H, h = (m0 + m) % jb->H;
    const char *src = (const char *)q->data + (r * q->stride[0] + h * q->stride[1]) * es;
    mla_cpu_load(src, q->dtype, q->stride[2], D, row);
    if (q->dtype == MLA_DTYPE_FP8_E4M3FN || q->dtype == MLA_DTYPE_FP8_E4M3FNUZ) {
        const float qs = jb->p->desc.q_scale;
        for (int64_t d = 0; d < D; ++d)
            row[d] = mla_fb_mul(row[d], qs);
    }
}

/* Qt [D][mp]: the chunk's q transposed, lanes past mc zero. */
static void pack_q(const attn_job *jb, int64_t r0, int64_t m0, int64_t mc, int64_t mp,
                   const attn_scratch *s)
{
    const int64_t D = jb->f.D;
    for (int64_t m = 0; m < mc; ++m) {
        q_row(jb, r0, m0, m, s->row);
        for (int64_t d = 0; d < D; ++d)
            s->qt[d * mp + m] = s->row[d];
    }
    for (int64_t d = 0; d < D; ++d)
        for (int64_t m = mc; m < mp; ++m)
            s->qt[d * mp + m] = 0.0f;
}

/* The dp parts' q (bf16): qp [KS / 2][mp], each word a pair of values, lanes
 * past mc zero. Returns the smallest exponent field of a nonzero value. */
static int pack_q_pairs(const attn_job *jb, int64_t r0, int64_t m0, int64_t mc, int64_t mp,
                        const attn_scratch *s)
{
    int emin = 0xFF;
    const int64_t D = jb->f.D, P = jb->f.KS / 2;
    uint16_t *h = (uint16_t *)s->row; /* the row's bf16 values, zeros to KS */
    for (int64_t m = 0; m < mc; ++m) {
        q_row(jb, r0, m0, m, s->row);
        /* a bf16 value's bits are the top half of its fp32; in place, ascending */
        for (int64_t d = 0; d < D; ++d)
            h[d] = (uint16_t)(mla_fb_bits(s->row[d]) >> 16);
        for (int64_t d = D; d < 2 * P; ++d)
            h[d] = 0;
        const int e = jb->dk->min_exp(h, D);
        emin = e < emin ? e : emin;
        const uint32_t *w = (const uint32_t *)s->row;
        for (int64_t p = 0; p < P; ++p)
            s->qp[p * mp + m] = w[p];
    }
    for (int64_t p = 0; p < P; ++p)
        for (int64_t m = mc; m < mp; ++m)
            s->qp[p * mp + m] = 0u;
    return emin;
}

/* The end of a task for pair m (row r, head h): the final o and lse, or the
 * partial of slot `split`. */
static void finish_pair(const attn_job *jb, int64_t r, int64_t h, int64_t m, int split, int nsplit,
                        const attn_scratch *s)
{
    const mla_attention_op_args *a = jb->a;
    const int64_t L = jb->f.L;
    const float mx = s->mx[m], l = s->l[m];
    const float *o_row = s->ot + m * round16(L);
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
            po[v] = o_row[v] * inv;
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
        row[v] = l > 0.0f ? o_row[v] * f : 0.0f;
    const mla_tensor *o = &a->o;
    const int64_t es = (int64_t)mla_dtype_size(o->dtype);
    mla_cpu_store_float(row, (char *)o->data + (r * o->stride[0] + h * o->stride[1]) * es, o->dtype,
                        o->stride[2], L);
    if (a->lse.data)
        ((float *)a->lse.data)[r * a->lse.stride[0] + h * a->lse.stride[1]] = lse;
}

/* Task (item w, chunk c). */
static void task(const attn_job *jb, int64_t w, int64_t c, const attn_scratch *s)
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
        /* fp8 codes for the scores alone cost a second conversion pass, which
         * measured a loss for one group of pairs and a gain from two groups
         * on; with P @ V on the codes too it is the only pass */
        const int dp = jb->dp && (jb->f.kdt == MLA_DTYPE_BF16 || nv >= 2 || jb->dpv);
        /* P @ V from bf16 pairs too (bf16 o): no fp32 key rows unless a tile
         * falls back */
        const int dpv = dp && jb->dpv;
        /* q transposed for the FMA tiles: with dp only once a tile falls back */
        int have_qt = !dp;
        if (!dp)
            pack_q(jb, r0, m0, mc, mp, s);
        const int eq = dp ? pack_q_pairs(jb, r0, m0, mc, mp, s) : 0;
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
                float *kr = s->kt + i * jb->f.KS;
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
                        for (int64_t d = 0; !dpv && d < jb->f.KS; ++d)
                            kr[d] = 0.0f;
                        if (dp)
                            memset(s->kb + i * (jb->f.KS / 2), 0, (size_t)(2 * jb->f.KS));
                        continue;
                    }
                }
                s->kpos[i] = (int32_t)t;
                kmax = (int32_t)t > kmax ? (int32_t)t : kmax;
                kblk[i] = block_of(jb, seq, t);
                ktok[i] = t % jb->f.bs;
                if (!dpv)
                    jb->k->decode(&jb->f, kblk[i], ktok[i], kr);
                if (dp)
                    exact &= jb->dk->copy_key(&jb->f, kblk[i], ktok[i], s->kb + i * (jb->f.KS / 2));
            }
            if (dp && nk % 16) /* whole blocks of 16 keys for the AMX tiles */
                memset(s->kb + nk * (jb->f.KS / 2), 0, (size_t)((16 - nk % 16) * jb->f.KS * 2));
            /* vdpbf16ps where its subnormal flush cannot trigger (cpu/linear_kernel.h),
             * for P @ V where the values are >= 2^-60 in magnitude (field >= 67):
             * a product it flushes then has P < 2^-66, a weight far below the bound
             * (DAZ/FTZ of P and of partial sums: absolute errors below 2^-126) */
            const int ek = dp ? jb->dk->min_exp((const uint16_t *)s->kb, nk * jb->f.KS) : 0;
            const int qk_ok = dp && exact && mla_cpu_dp_safe(eq, ek);
            const int pv_ok = dpv && exact && ek >= 67;
            if (dpv && (!qk_ok || !pv_ok)) /* a fallback tile: the fp32 rows after all */
                for (int i = 0; i < nk; ++i) {
                    float *kr = s->kt + i * jb->f.KS;
                    if (kblk[i])
                        jb->k->decode(&jb->f, kblk[i], ktok[i], kr);
                    else
                        for (int64_t d = 0; d < jb->f.KS; ++d)
                            kr[d] = 0.0f;
                }
            if (jb->k->calls) {
                const int64_t ls = round16(jb->f.L),
                              calls = qk_ok && pv_ok && jb->dk->calls
                                          ? jb->dk->calls(nv, nk, jb->f.KS / 2, ls)
                                          : jb->k->calls(nv, nk, ls);
                pf.per = (int32_t)((pf.total + calls - 1) / calls);
            }
            float scale = jb->scale;
            if (qk_ok) {
                jb->dk->qk(s->qp, mp, nv, s->kb, jb->f.KS / 2, nk, jb->f.KS / 2, s->st, &pf);
                scale = jb->scale_dp;
            } else {
                if (!have_qt)
                    pack_q(jb, r0, m0, mc, mp, s);
                have_qt = 1;
                jb->k->qk(s->qt, mp, nv, s->kt, jb->f.KS, nk, jb->f.D, s->st, &pf);
            }
            jb->k->softmax(s->st, mp, nv, nk, scale, s->kpos, s->plim, kmax > pmin, s->mx, s->l,
                           s->alpha);
            /* the first step's alpha is e^(-inf - mx') = 0: start from zero */
            const float *alpha = first ? NULL : s->alpha;
            if (pv_ok)
                jb->dk->pv(s->st, mp, nv, nk, jb->pscale, (const uint16_t *)s->kb, jb->f.KS, s->pp,
                           s->vp, round16(jb->f.L), s->ot, alpha, &pf);
            else
                jb->k->pv(s->st, mp, nv, s->kt, jb->f.KS, nk, round16(jb->f.L), s->ot, alpha, &pf);
            first = 0;
        }
    }
    for (int64_t m = 0; m < mc; ++m) {
        const int64_t pair = m0 + m;
        finish_pair(jb, r0 + pair / H, pair % H, m, it.split, nsplit, s);
    }
}

/* Row r of the output after every task: the combine of a split sequence's
 * partials, or zeros for a padding sequence. tmp: L floats. */
static void finish_row(const attn_job *jb, int64_t r, int64_t seq, float *tmp)
{
    const mla_attention_op_args *a = jb->a;
    const int64_t H = jb->H, L = jb->f.L, ms = jb->p->max_splits;
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

/* ------------------------------------------------------------------ run */

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
    memset(&jb, 0, sizeof jb);
    jb.a = a;
    jb.p = p;
    jb.H = d->heads;
    jb.f.layout = (int)d->cache.layout;
    jb.f.kdt = d->cache.dtype;
    jb.f.L = d->cache.kv_lora;
    jb.f.R = d->cache.rope;
    jb.f.D = jb.f.L + jb.f.R;
    jb.f.KS = round16(jb.f.D);
    jb.f.bs = d->cache.block_size;
    jb.f.k_scale = d->cache.k_scale;
    jb.sparse = d->topk > 0;
    jb.paged = d->paged != 0;
    jb.scale = d->softmax_scale;
    jb.hc = (jb.H + MTASK - 1) / MTASK;
    jb.max_chunks = jb.sparse ? p->max_q_len * jb.hc : (p->max_q_len * jb.H + MTASK - 1) / MTASK;
    if (jb.max_chunks < 1)
        jb.max_chunks = 1;
    jb.scratch = (char *)scratch;
    jb.scratch_bytes = mla_cpu_attention_scratch_bytes(jb.f.L, jb.f.R);

    jb.k = &mla_cpu_attn_generic;
#if MLA_CPU_X86
    const mla_cpu_isa isa = mla_cpu_isa_of(ctx);
    if (isa == MLA_CPU_ISA_AVX512) {
        /* tuning avx512-noamx: vdpbf16ps where AMX would be taken (tests);
         * avx512-nobf16: neither */
        const int32_t tune = ctx->tuning.cpu_isa;
        const int noamx = tune == MLA_TUNE_CPU_ISA_AVX512_NOAMX;
        jb.k = &mla_cpu_attn_avx512;
        if (d->q_dtype == MLA_DTYPE_BF16 && !noamx && tune != MLA_TUNE_CPU_ISA_AVX512_NOBF16 &&
            mla_cpu_attn_dp_amx_usable(jb.f.KS, round16(jb.f.L)))
            jb.dk = &mla_cpu_attn_dp_amx;
        else if (mla_cpu_has_bf16(ctx) ||
                 (noamx && (mla_cpu_features() & MLA_CPU_HAS_AVX512_BF16)))
            jb.dk = &mla_cpu_attn_dp_avx512;
    } else if (isa == MLA_CPU_ISA_AVX2 && (mla_cpu_features() & MLA_CPU_HAS_FMA)) {
        jb.k = &mla_cpu_attn_avx2;
    }
#endif
    jb.dp = jb.dk && d->q_dtype == MLA_DTYPE_BF16;
    /* fp8 NORMAL / SHUFFLED codes: k_scale on the score, and P k_scale against
     * the codes (>= 2^-9; with k_scale >= 2^-40 a product the instruction
     * flushes has P < 2^-77); bf16 and FP8_SCALED rows hold the values */
    const int codes = jb.f.kdt != MLA_DTYPE_BF16 && jb.f.layout != MLA_CL_FP8_SCALED;
    jb.scale_dp = codes ? jb.scale * jb.f.k_scale : jb.scale;
    jb.pscale = codes ? jb.f.k_scale : 1.0f;
    jb.dpv = jb.dp && d->out_dtype == MLA_DTYPE_BF16 &&
             (!codes || (jb.f.k_scale >= 0x1p-40f && jb.f.k_scale <= 0x1p40f));
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
            finish_row(&jb, r, seq_of_row(&a->cu_q_lens, p->S, r), s.ot);
    }
    return MLA_OK;
}

mla_status mla_cpu_attention(mla_context *ctx, const mla_attention_op_args *a)
{
    return mla_cpu_attention_with_scratch(ctx, a,
                                          (char *)a->workspace + a->plan->kernel_scratch_offset);
}
