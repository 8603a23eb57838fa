/* CPU expanded attention (include/mla/mla_attention.h, mla_attention_expanded;
 * MLA.md section 2, "The expanded form").
 *
 * 1. Decompression (core/attention_expanded.c through this backend's slots):
 *    the sequences' latent rows gathered into the workspace, then
 *    [K_nope | V] = c @ kv_b_proj^T by mla_cpu_linear (fp32 accumulation,
 *    rounded once to the kv dtype = q's dtype), [Nk, H (nope + v)].
 * 2. Blocked causal flash attention, a task per (sequence, block of BQ query
 *    rows, head), handed out dynamically over the OpenMP threads. Per task
 *    the rows' q ([BQ][DQ], DQ = nope + R) is loaded once; per tile of BK
 *    keys (0 .. the block's last position p_max) the tile's keys
 *    Kt [BK][DQ] = [K_nope[t, h] | k_pe_t] and values Vt [BK][v] are decoded
 *    to fp32 rows, then, in fp32 (online softmax):
 *      S[i][k] = scale * Q[i] . Kt[k]   (-inf where t > p_i)
 *      mx' = max(mx, max_k S[i]);  alpha = e^(mx - mx');  P = e^(S - mx')
 *      l = l alpha + sum_k P[i][k];  O[i] = alpha O[i] + sum_k P[i][k] Vt[k]
 *    and at the end o = O / l, lse = mx + ln l. Every row of a sequence with
 *    keys sees key 0, so mx is finite after the first tile. The order of
 *    every sum is fixed by BQ and BK, never by the thread count.
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
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"

#if defined(MLA_HAVE_OPENMP) || defined(MLA_HAVE_OPENMP_SIMD)
#define SIMD_SUM(var) MLA_PRAGMA(omp simd reduction(+ : var))
#else
#define SIMD_SUM(var)
#endif

#define BQ 16 /* query rows per task */
#define BK 64 /* keys per tile */

/* Per-thread tiles, in floats: Q [BQ][DQ], Kt [BK][DQ], Vt [BK][v],
 * S [BQ][BK], O [BQ][v], mx, l [BQ]. */
int64_t mla_cpu_expanded_tile_bytes(int64_t nope, int64_t R, int64_t v)
{
    const int64_t DQ = nope + R;
    return mla_sz_mul(BQ * DQ + BK * DQ + BK * v + BQ * BK + BQ * v + 2 * BQ, 4);
}

typedef struct exp_job {
    const mla_attention_expanded_op_args *a;
    const void *rows, *kv;       /* the decompression's outputs (workspace) */
    mla_dtype rows_dt, kv_dt;
    int64_t nope, v, R, L, H, N; /* N = H (nope + v) */
    const int64_t *task0;        /* [S + 1]: first task of each sequence */
    uint8_t *tiles;
    int64_t tile_bytes;
} exp_job;

/* Task `task` of sequence s: BQ rows from row q0 of the sequence, head h. */
MLA_CPU_INLINE void task_body(const exp_job *j, int64_t s, int64_t task, float *tile)
{
    const mla_attention_expanded_op_args *a = j->a;
    const int64_t DQ = j->nope + j->R, V = j->v, H = j->H;
    const int64_t h = task % H, q0 = (task / H) * BQ;
    const int64_t c = a->ctx_host[s], r0 = a->cu_host[s], n = a->cu_host[s + 1] - r0;
    const int64_t rows = n - q0 < BQ ? n - q0 : BQ, key0 = a->key0_host[s];
    const int64_t p0 = c - n + q0, pmax = p0 + rows - 1; /* positions of the first, last row */
    float *Q = tile, *Kt = Q + BQ * DQ, *Vt = Kt + BK * DQ, *S = Vt + BK * V, *O = S + BQ * BK;
    float *mx = O + BQ * V, *l = mx + BQ;
    const float scale = a->desc.softmax_scale;
    const size_t qes = mla_dtype_size(a->q_nope.dtype);
    for (int64_t i = 0; i < rows; ++i) {
        const int64_t r = r0 + q0 + i;
        const uint8_t *qn = (const uint8_t *)a->q_nope.data +
                            (size_t)(r * a->q_nope.stride[0] + h * a->q_nope.stride[1]) * qes;
        const uint8_t *qp = (const uint8_t *)a->q_pe.data +
                            (size_t)(r * a->q_pe.stride[0] + h * a->q_pe.stride[1]) * qes;
        mla_cpu_load_float(qn, a->q_nope.dtype, a->q_nope.stride[2], j->nope, Q + i * DQ);
        mla_cpu_load_float(qp, a->q_pe.dtype, a->q_pe.stride[2], j->R, Q + i * DQ + j->nope);
        mx[i] = -INFINITY;
        l[i] = 0.0f;
        MLA_SIMD for (int64_t e = 0; e < V; ++e) O[i * V + e] = 0.0f;
    }
    const size_t kves = mla_dtype_size(j->kv_dt), res = mla_dtype_size(j->rows_dt);
    for (int64_t t0 = 0; t0 <= pmax; t0 += BK) {
        const int64_t nk = pmax + 1 - t0 < BK ? pmax + 1 - t0 : BK;
        for (int64_t k = 0; k < nk; ++k) {
            const int64_t key = key0 + t0 + k;
            const uint8_t *kvr = (const uint8_t *)j->kv + (size_t)(key * j->N) * kves;
            mla_cpu_load_float(kvr + (size_t)(h * (j->nope + V)) * kves, j->kv_dt, 1, j->nope,
                               Kt + k * DQ);
            mla_cpu_load_float((const uint8_t *)j->rows + (size_t)(key * (j->L + j->R) + j->L) * res,
                               j->rows_dt, 1, j->R, Kt + k * DQ + j->nope);
            mla_cpu_load_float(kvr + (size_t)(h * (j->nope + V) + j->nope) * kves, j->kv_dt, 1, V,
                               Vt + k * V);
        }
        for (int64_t i = 0; i < rows; ++i) {
            const float *q = Q + i * DQ;
            const int64_t p = p0 + i;
            float *Si = S + i * BK, m = mx[i];
            for (int64_t k = 0; k < nk; ++k) {
                const float *kk = Kt + k * DQ;
                float dot = 0.0f;
                SIMD_SUM(dot)
                for (int64_t e = 0; e < DQ; ++e)
                    dot += q[e] * kk[e];
                Si[k] = t0 + k <= p ? scale * dot : -INFINITY;
                m = Si[k] > m ? Si[k] : m;
            }
            if (m == -INFINITY) /* this tile is past the row's position: nothing to add */
                continue;
            const float alpha = expf(mx[i] - m);
            float sum = 0.0f;
            for (int64_t k = 0; k < nk; ++k) {
                Si[k] = expf(Si[k] - m);
                sum += Si[k];
            }
            l[i] = l[i] * alpha + sum;
            mx[i] = m;
            float *Oi = O + i * V;
            MLA_SIMD for (int64_t e = 0; e < V; ++e) Oi[e] *= alpha;
            for (int64_t k = 0; k < nk; ++k) {
                const float pk = Si[k], *vk = Vt + k * V;
                MLA_SIMD for (int64_t e = 0; e < V; ++e) Oi[e] += pk * vk[e];
            }
        }
    }
    const size_t oes = mla_dtype_size(a->o.dtype);
    for (int64_t i = 0; i < rows; ++i) {
        const int64_t r = r0 + q0 + i;
        const float inv = 1.0f / l[i];
        float *Oi = O + i * V;
        MLA_SIMD for (int64_t e = 0; e < V; ++e) Oi[e] *= inv;
        mla_cpu_store_float(Oi,
                            (uint8_t *)a->o.data +
                                (size_t)(r * a->o.stride[0] + h * a->o.stride[1]) * oes,
                            a->o.dtype, a->o.stride[2], V);
        if (a->lse.data)
            ((float *)a->lse.data)[r * a->lse.stride[0] + h * a->lse.stride[1]] =
                mx[i] + logf(l[i]);
    }
}

typedef void (*task_fn)(const exp_job *j, int64_t s, int64_t task, float *tile);

static void task_generic(const exp_job *j, int64_t s, int64_t task, float *tile)
{
    task_body(j, s, task, tile);
}
#if MLA_CPU_X86
MLA_TARGET_AVX2 static void task_avx2(const exp_job *j, int64_t s, int64_t task, float *tile)
{
    task_body(j, s, task, tile);
}
MLA_TARGET_AVX512 static void task_avx512(const exp_job *j, int64_t s, int64_t task, float *tile)
{
    task_body(j, s, task, tile);
}
#endif

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
    mla_expanded_kv kv;
    MLA_TRY(mla_expanded_decompress(ctx, a, &kv));
    const mla_attention_expanded_desc *d = &a->desc;
    int64_t *task0;
    MLA_TRY(mla_alloc_array(ctx, (void **)&task0, a->S + 1, 1, sizeof *task0, "context_lens"));
    task0[0] = 0;
    for (int64_t s = 0; s < a->S; ++s) {
        const int64_t n = a->cu_host[s + 1] - a->cu_host[s];
        task0[s + 1] = task0[s] + (a->ctx_host[s] ? (n + BQ - 1) / BQ * d->heads : 0);
    }
    const exp_job j = {a,
                       kv.rows.data,
                       kv.kv.data,
                       kv.rows.dtype,
                       kv.kv.dtype,
                       d->nope,
                       d->v,
                       d->cache.rope,
                       d->cache.kv_lora,
                       d->heads,
                       d->heads * (d->nope + d->v),
                       task0,
                       a->workspace + a->ws.tiles,
                       mla_cpu_expanded_tile_bytes(d->nope, d->cache.rope, d->v)};
    const task_fn run = MLA_CPU_PICK(mla_cpu_isa_of(ctx), task);
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
        float *tile = (float *)(j.tiles + tid * j.tile_bytes);
        int64_t s = 0;
#if defined(MLA_HAVE_OPENMP)
#pragma omp for schedule(dynamic, 1)
#endif
        for (int64_t t = 0; t < tasks; ++t) {
            while (t >= task0[s + 1] || t < task0[s]) /* the sequence of task t */
                s = t >= task0[s + 1] ? s + 1 : 0;
            run(&j, s, t - task0[s], tile);
        }
    }
    free(task0);
    padding_rows(a);
    return MLA_OK;
}
