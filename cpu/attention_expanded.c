/* CPU expanded attention (include/mla/mla_attention.h, mla_attention_expanded;
 * MLA.md section 2, "The expanded form").
 *
 * 1. Decompression: the sequences' latent rows gathered into the workspace
 *    (mla_expanded_gather, the cache_gather slot), then [K_nope | V] =
 *    c @ kv_b_proj^T (fp32 sums, rounded once to the kv dtype = q's dtype),
 *    [Nk, H (nope + v)], on the same tile kernels (cpu/attention_expanded_kv.c).
 * 2. Blocked causal flash attention on the absorbed attention's tile kernels
 *    (cpu/attention_internal.h: attn_kernels, attn_dp), a task per (sequence,
 *    head, block of BQ query rows), handed out dynamically over the OpenMP
 *    threads, a head's blocks in a row (its keys and values stay in L2),
 *    each head's last block (the most keys) first. The block's rows lie on
 *    the vector lanes (nv groups of VL, mp = VL nv): per task
 *    Qt [DQ][mp] = [q_nope | q_pe] transposed (DQ = nope + R) is packed
 *    once; per tile of NKT keys (0 .. the block's last position p_max)
 *    Kt [NKT][DS] = [K_nope[t, h] | k_pe_t] and Vt [NKT][VS] (DS, VS: DQ, v
 *    rounded up to 16, zeros past them) are decoded, then, in fp32 (online
 *    softmax, the absorbed kernels' steps):
 *      St[k][i] = scale * Qt[:, i] . Kt[k]   (-inf where t > p_i)
 *      mx' = max(mx, max_k St[k]);  alpha = e^(mx - mx');  P = e^(St - mx')
 *      l = l alpha + sum_k P[k];  O[i] = alpha O[i] + sum_k P[k][i] Vt[k]
 *    and at the end o = O / l, lse = mx + ln l. Every row of a sequence with
 *    keys sees key 0, so mx is finite after the first tile.
 *    bf16 q and cache on CPUs with AVX512-BF16 (mla_cpu_has_bf16): the
 *    scores by vdpbf16ps on bf16 pairs of q and of the key rows (exact
 *    products, fp32 sums) where mla_cpu_dp_safe rules out its subnormal
 *    flush, and with a bf16 o P @ V by vdpbf16ps, P rounded to bf16 (RNE;
 *    the conformance bound's kappa allows it) where the values are >= 2^-60;
 *    a tile that fails a test takes the fp32 rows and FMA tiles, as the
 *    absorbed attention does (cpu/attention.c).
 *    Each sum runs in the kernels' fixed order over a tile of NKT keys and
 *    the BQ-row block, never depending on the thread count.
 * Padding sequences (c_s = 0): o = 0, lse = -inf. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "core/attention_expanded.h"
#include "core/checked.h"
#include "cpu/attention_expanded_internal.h"
#include "cpu/cpu_rows.h"
#include "cpu/linear_kernel.h" /* mla_cpu_dp_safe */

#define BQ 64 /* query rows per task: 4 groups of VL lanes */

MLA_CPU_INLINE int64_t round16(int64_t n) { return (n + VL - 1) / VL * VL; }

/* One thread's tiles, in floats (each a multiple of 16: 64-byte aligned
 * from an aligned start), in the order exp_carve hands them out. */
static int64_t tile_floats(int64_t DS, int64_t VS)
{
    return DS * BQ                 /* qt [DS][BQ] */
           + DS / 2 * BQ           /* qp [DS / 2][BQ] bf16 pairs */
           + NKT * DS + NKT * VS   /* kt, vt */
           + NKT * DS / 2          /* kb [NKT][DS] bf16 */
           + NKT * VS / 2          /* vb [NKT][VS] bf16 */
           + NKT * BQ + BQ + BQ * VS /* st (and the lanes a group's P packing reads past it), ot */
           + 4 * BQ + NKT          /* mx, l, alpha, plim; kpos */
           + NKT / 2 * BQ          /* pp [NKT / 2][BQ] */
           + NKT / 2 * VS          /* vp [NKT / 2][VS] */
           + DS;                   /* row */
}

/* The larger of the attention's and the decompression's tiles. */
int64_t mla_cpu_expanded_tile_bytes(int64_t nope, int64_t R, int64_t v, int64_t L)
{
    const int64_t f = tile_floats(round16(nope + R), round16(v));
    const int64_t att = mla_sz_mul((f + 63) / 64, 256), kv = mla_cpu_expanded_kv_tile_bytes(L);
    return mla_sz_round_up(att > kv ? att : kv, 256);
}

typedef struct exp_job {
    const mla_attention_expanded_op_args *a;
    const void *rows, *kv;       /* the decompression's outputs (workspace) */
    mla_dtype rows_dt, kv_dt;
    int64_t nope, v, R, L, H, N; /* N = H (nope + v) */
    int64_t DQ, DS, VS;
    const int64_t *task0;        /* [S + 1]: first task of each sequence */
    const attn_kernels *k;
    const attn_dp *dk; /* vdpbf16ps scores (bf16 q and rows), or NULL */
    int dpv;           /* and P @ V (bf16 o) */
    uint8_t *tiles;
    int64_t tile_bytes;
} exp_job;

typedef struct exp_tiles {
    float *qt, *kt, *vt, *st, *ot, *mx, *l, *alpha, *row;
    int32_t *plim, *kpos;
    uint32_t *qp, *kb, *pp, *vp;
    uint16_t *vb;
} exp_tiles;

static exp_tiles exp_carve(const exp_job *j, int tid)
{
    float *f = (float *)(j->tiles + tid * j->tile_bytes);
    const int64_t DS = j->DS, VS = j->VS;
    exp_tiles t;
    t.qt = f, f += DS * BQ;
    t.qp = (uint32_t *)f, f += DS / 2 * BQ;
    t.kt = f, f += NKT * DS;
    t.vt = f, f += NKT * VS;
    t.kb = (uint32_t *)f, f += NKT * DS / 2;
    t.vb = (uint16_t *)f, f += NKT * VS / 2;
    t.st = f, f += NKT * BQ + BQ;
    t.ot = f, f += BQ * VS;
    t.mx = f, t.l = f + BQ, t.alpha = f + 2 * BQ, t.plim = (int32_t *)(f + 3 * BQ), f += 4 * BQ;
    t.kpos = (int32_t *)f, f += NKT;
    t.pp = (uint32_t *)f, f += NKT / 2 * BQ;
    t.vp = (uint32_t *)f, f += NKT / 2 * VS;
    t.row = f;
    return t;
}

/* Row r, head h of [q_nope | q_pe] as fp32 into row[0, DQ). */
static void q_row(const exp_job *j, int64_t r, int64_t h, float *row)
{
    const mla_attention_expanded_op_args *a = j->a;
    const size_t qes = mla_dtype_size(a->q_nope.dtype);
    const uint8_t *qn = (const uint8_t *)a->q_nope.data +
                        (size_t)(r * a->q_nope.stride[0] + h * a->q_nope.stride[1]) * qes;
    const uint8_t *qp = (const uint8_t *)a->q_pe.data +
                        (size_t)(r * a->q_pe.stride[0] + h * a->q_pe.stride[1]) * qes;
    mla_cpu_load_float(qn, a->q_nope.dtype, a->q_nope.stride[2], j->nope, row);
    mla_cpu_load_float(qp, a->q_pe.dtype, a->q_pe.stride[2], j->R, row + j->nope);
}

/* Qt [DQ][mp]: rows r0 .. r0 + rows - 1 transposed, lanes past rows zero. */
static void pack_q(const exp_job *j, int64_t r0, int64_t rows, int64_t h, int64_t mp,
                   const exp_tiles *t)
{
    for (int64_t i = 0; i < rows; ++i) {
        q_row(j, r0 + i, h, t->row);
        for (int64_t d = 0; d < j->DQ; ++d)
            t->qt[d * mp + i] = t->row[d];
    }
    for (int64_t d = 0; d < j->DQ; ++d)
        for (int64_t i = rows; i < mp; ++i)
            t->qt[d * mp + i] = 0.0f;
}

/* The bf16 q as pairs, qp [DS / 2][mp], lanes past rows zero; returns the
 * smallest exponent field of a nonzero value. */
static int pack_q_pairs(const exp_job *j, int64_t r0, int64_t rows, int64_t h, int64_t mp,
                        const exp_tiles *t)
{
    int emin = 0xFF;
    const int64_t P = j->DS / 2;
    uint16_t *b = (uint16_t *)t->row; /* in place, ascending: a bf16 is its fp32's top half */
    for (int64_t i = 0; i < rows; ++i) {
        q_row(j, r0 + i, h, t->row);
        for (int64_t d = 0; d < j->DQ; ++d)
            b[d] = (uint16_t)(mla_fb_bits(t->row[d]) >> 16);
        for (int64_t d = j->DQ; d < 2 * P; ++d)
            b[d] = 0;
        const int e = j->dk->min_exp(b, j->DQ);
        emin = e < emin ? e : emin;
        const uint32_t *w = (const uint32_t *)t->row;
        for (int64_t p = 0; p < P; ++p)
            t->qp[p * mp + i] = w[p];
    }
    for (int64_t p = 0; p < P; ++p)
        for (int64_t i = rows; i < mp; ++i)
            t->qp[p * mp + i] = 0u;
    return emin;
}

/* Key `key` of the gathered rows, head h: [K_nope | k_pe] and V as fp32
 * rows of DS and VS values, zeros past DQ and v. */
static void decode_kv(const exp_job *j, int64_t key, int64_t h, float *kr, float *vr)
{
    const size_t kves = mla_dtype_size(j->kv_dt), res = mla_dtype_size(j->rows_dt);
    const uint8_t *kvr = (const uint8_t *)j->kv + (size_t)(key * j->N + h * (j->nope + j->v)) * kves;
    mla_cpu_load_float(kvr, j->kv_dt, 1, j->nope, kr);
    mla_cpu_load_float((const uint8_t *)j->rows + (size_t)(key * (j->L + j->R) + j->L) * res,
                       j->rows_dt, 1, j->R, kr + j->nope);
    for (int64_t d = j->DQ; d < j->DS; ++d)
        kr[d] = 0.0f;
    mla_cpu_load_float(kvr + (size_t)j->nope * kves, j->kv_dt, 1, j->v, vr);
    for (int64_t d = j->v; d < j->VS; ++d)
        vr[d] = 0.0f;
}

/* The same key as bf16 rows (bf16 kv and rows: copies), zeros past DQ and
 * v; loops rather than memcpy calls of a few hundred bytes. */
static void copy_kv_bf16(const exp_job *j, int64_t key, int64_t h, uint16_t *restrict kr,
                         uint16_t *restrict vr)
{
    const uint16_t *kvr = (const uint16_t *)j->kv + key * j->N + h * (j->nope + j->v);
    const uint16_t *pe = (const uint16_t *)j->rows + key * (j->L + j->R) + j->L;
    const int64_t nope = j->nope, R = j->R, v = j->v;
    MLA_SIMD for (int64_t d = 0; d < nope; ++d) kr[d] = kvr[d];
    MLA_SIMD for (int64_t d = 0; d < R; ++d) kr[nope + d] = pe[d];
    for (int64_t d = j->DQ; d < j->DS; ++d)
        kr[d] = 0;
    MLA_SIMD for (int64_t d = 0; d < v; ++d) vr[d] = kvr[nope + d];
    for (int64_t d = v; d < j->VS; ++d)
        vr[d] = 0;
}

/* The step of one tile of nk keys from key t0 for ng groups of rows from
 * group g0 (their lanes VL g0 .. of every tile). */
static void tile_step(const exp_job *j, const exp_tiles *t, int64_t mp, int g0, int ng, int nk,
                      int64_t t0, int64_t p0, int qk_ok, int pv_ok)
{
    const int64_t DS = j->DS, VS = j->VS, m0 = (int64_t)VL * g0;
    attn_pf pf; /* no prefetch lists: a head's keys are read in address order */
    memset(&pf, 0, sizeof pf);
    float *st = t->st + m0;
    if (qk_ok)
        j->dk->qk(t->qp + m0, mp, ng, t->kb, DS / 2, nk, DS / 2, st, &pf);
    else
        j->k->qk(t->qt + m0, mp, ng, t->kt, DS, nk, j->DQ, st, &pf);
    (j->k->softmax_poly ? j->k->softmax_poly : j->k->softmax)(
        st, mp, ng, nk, j->a->desc.softmax_scale, t->kpos, t->plim + m0, t0 + nk - 1 > p0 + m0,
        t->mx + m0, t->l + m0, t->alpha + m0);
    /* the first step's alpha is e^(-inf - mx') = 0: start from zero */
    const float *alpha = t0 == 0 ? NULL : t->alpha + m0;
    if (pv_ok)
        j->dk->pv(st, mp, ng, nk, 1.0f, t->vb, VS, t->pp, t->vp, VS, t->ot + m0 * VS, alpha, &pf);
    else
        j->k->pv(st, mp, ng, t->vt, VS, nk, VS, t->ot + m0 * VS, alpha, &pf);
}

/* Task `task` of sequence s: head task / nb, block nb - 1 - task % nb. */
static void task_run(const exp_job *j, int64_t s, int64_t task, const exp_tiles *t)
{
    const mla_attention_expanded_op_args *a = j->a;
    const int64_t DS = j->DS, VS = j->VS;
    const int64_t c = a->ctx_host[s], r0 = a->cu_host[s], n = a->cu_host[s + 1] - r0;
    const int64_t nb = (n + BQ - 1) / BQ, h = task / nb, q0 = (nb - 1 - task % nb) * BQ;
    const int64_t rows = n - q0 < BQ ? n - q0 : BQ, key0 = a->key0_host[s];
    const int64_t p0 = c - n + q0, pmax = p0 + rows - 1; /* positions of the first, last row */
    const int nv = (int)((rows + VL - 1) / VL);
    const int64_t mp = (int64_t)nv * VL;
    for (int64_t i = 0; i < mp; ++i) { /* padding lanes: the last row's limit (their q is zero) */
        t->plim[i] = (int32_t)(p0 + (i < rows ? i : rows - 1));
        t->mx[i] = -INFINITY;
        t->l[i] = 0.0f;
    }
    const int dp = j->dk != NULL, dpv = dp && j->dpv;
    int have_qt = !dp;
    if (!dp)
        pack_q(j, r0 + q0, rows, h, mp, t);
    const int eq = dp ? pack_q_pairs(j, r0 + q0, rows, h, mp, t) : 0;
    for (int64_t t0 = 0; t0 <= pmax; t0 += NKT) {
        const int nk = (int)(pmax + 1 - t0 < NKT ? pmax + 1 - t0 : NKT);
        for (int k = 0; k < nk; ++k)
            t->kpos[k] = (int32_t)(t0 + k);
        int qk_ok = 0, pv_ok = 0;
        if (dp) {
            for (int k = 0; k < nk; ++k)
                copy_kv_bf16(j, key0 + t0 + k, h, (uint16_t *)(t->kb + k * (DS / 2)),
                             t->vb + k * VS);
            /* vdpbf16ps where its subnormal flush cannot trigger; P @ V on
             * values >= 2^-60 in magnitude (field >= 67), as cpu/attention.c */
            qk_ok = mla_cpu_dp_safe(eq, j->dk->min_exp((const uint16_t *)t->kb, nk * DS));
            pv_ok = dpv && j->dk->min_exp(t->vb, nk * VS) >= 67;
        }
        if (!qk_ok || !pv_ok)
            for (int k = 0; k < nk; ++k)
                decode_kv(j, key0 + t0 + k, h, t->kt + k * DS, t->vt + k * VS);
        if (!qk_ok && !have_qt)
            pack_q(j, r0 + q0, rows, h, mp, t);
        have_qt |= !qk_ok;
        if (t0 + NKT <= pmax || nv == 1) {
            tile_step(j, t, mp, 0, nv, nk, t0, p0, qk_ok, pv_ok);
            continue;
        }
        /* the last tile per group of VL rows, each up to its last row's key:
         * the keys past it are masked (exact zeros in every sum) */
        for (int g = 0; g < nv; ++g) {
            const int64_t pg = p0 + (VL * g + VL - 1 < rows ? VL * g + VL - 1 : rows - 1);
            if (pg >= t0)
                tile_step(j, t, mp, g, 1, (int)(pg + 1 - t0), t0, p0, qk_ok, pv_ok);
        }
    }
    const size_t oes = mla_dtype_size(a->o.dtype);
    for (int64_t i = 0; i < rows; ++i) {
        const int64_t r = r0 + q0 + i;
        const float inv = 1.0f / t->l[i];
        float *Oi = t->ot + i * VS;
        MLA_SIMD for (int64_t e = 0; e < j->v; ++e) Oi[e] *= inv;
        mla_cpu_store_float(Oi,
                            (uint8_t *)a->o.data +
                                (size_t)(r * a->o.stride[0] + h * a->o.stride[1]) * oes,
                            a->o.dtype, a->o.stride[2], j->v);
        if (a->lse.data)
            ((float *)a->lse.data)[r * a->lse.stride[0] + h * a->lse.stride[1]] =
                t->mx[i] + logf(t->l[i]);
    }
}

/* Rows of padding sequences: o = 0, lse = -inf. */
static void padding_rows(const mla_attention_expanded_op_args *a)
{
    const int64_t H = a->desc.heads, V = a->desc.v;
    float zero[64] = {0};
    const size_t oes = mla_dtype_size(a->o.dtype);
    for (int64_t s = 0; s < a->S; ++s)
        for (int64_t r = a->cu_host[s]; a->ctx_host[s] == 0 && r < a->cu_host[s + 1]; ++r)
            for (int64_t h = 0; h < H; ++h) {
                for (int64_t e = 0; e < V; e += 64)
                    mla_cpu_store_float(zero,
                                        (uint8_t *)a->o.data +
                                            (size_t)(r * a->o.stride[0] + h * a->o.stride[1] +
                                                     e * a->o.stride[2]) *
                                                oes,
                                        a->o.dtype, a->o.stride[2], V - e < 64 ? V - e : 64);
                if (a->lse.data)
                    ((float *)a->lse.data)[r * a->lse.stride[0] + h * a->lse.stride[1]] =
                        -INFINITY;
            }
}

mla_status mla_cpu_attention_expanded(mla_context *ctx, const mla_attention_expanded_op_args *a)
{
    const mla_attention_expanded_desc *d = &a->desc;
    mla_expanded_kv kv;
    MLA_TRY(mla_expanded_gather(ctx, a, &kv));
    exp_job j;
    memset(&j, 0, sizeof j);
    j.a = a;
    j.rows = kv.rows.data, j.kv = kv.kv.data;
    j.rows_dt = kv.rows.dtype, j.kv_dt = kv.kv.dtype;
    j.nope = d->nope, j.v = d->v, j.R = d->cache.rope, j.L = d->cache.kv_lora, j.H = d->heads;
    j.N = d->heads * (d->nope + d->v);
    j.DQ = d->nope + d->cache.rope, j.DS = round16(j.DQ), j.VS = round16(d->v);
    j.tiles = a->workspace + a->ws.tiles;
    j.tile_bytes = mla_cpu_expanded_tile_bytes(d->nope, d->cache.rope, d->v, d->cache.kv_lora);
    j.k = &mla_cpu_attn_generic;
    const attn_dp *dk = NULL; /* vdpbf16ps */
#if MLA_CPU_X86
    const mla_cpu_isa isa = mla_cpu_isa_of(ctx);
    if (isa == MLA_CPU_ISA_AVX512) {
        /* the absorbed attention's choice without AMX: vdpbf16ps where
         * mla_cpu_has_bf16 (or tuning avx512-noamx asks for it) */
        const int noamx = ctx->tuning.cpu_isa == MLA_TUNE_CPU_ISA_AVX512_NOAMX;
        j.k = &mla_cpu_attn_avx512;
        if (mla_cpu_has_bf16(ctx) || (noamx && (mla_cpu_features() & MLA_CPU_HAS_AVX512_BF16)))
            dk = &mla_cpu_attn_dp_avx512;
    } else if (isa == MLA_CPU_ISA_AVX2 && (mla_cpu_features() & MLA_CPU_HAS_FMA)) {
        j.k = &mla_cpu_attn_avx2;
    }
#endif
    MLA_TRY(mla_cpu_expanded_decompress(ctx, a, &kv, j.k, dk, j.tiles, j.tile_bytes));
    j.dk = d->q_dtype == MLA_DTYPE_BF16 && kv.rows.dtype == MLA_DTYPE_BF16 ? dk : NULL;
    j.dpv = j.dk && d->out_dtype == MLA_DTYPE_BF16;
    int64_t *task0;
    MLA_TRY(mla_alloc_array(ctx, (void **)&task0, a->S + 1, 1, sizeof *task0, "context_lens"));
    task0[0] = 0;
    for (int64_t s = 0; s < a->S; ++s) {
        const int64_t n = a->cu_host[s + 1] - a->cu_host[s];
        task0[s + 1] = task0[s] + (a->ctx_host[s] ? (n + BQ - 1) / BQ * d->heads : 0);
    }
    j.task0 = task0;
    const int64_t tasks = task0[a->S];
    const int nt = mla_cpu_threads(ctx, tasks, tasks * 32768);
    (void)nt;
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int tid = 0;
#if defined(MLA_HAVE_OPENMP)
        tid = omp_get_thread_num();
#endif
        const exp_tiles tl = exp_carve(&j, tid);
        int64_t s = 0;
#if defined(MLA_HAVE_OPENMP)
#pragma omp for schedule(dynamic, 1)
#endif
        for (int64_t t = 0; t < tasks; ++t) {
            while (t >= task0[s + 1] || t < task0[s]) /* the sequence of task t */
                s = t >= task0[s + 1] ? s + 1 : 0;
            task_run(&j, s, t - task0[s], &tl);
        }
    }
    free(task0);
    padding_rows(a);
    return MLA_OK;
}
