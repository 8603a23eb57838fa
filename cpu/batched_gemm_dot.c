/* CPU batched GEMM over a W contiguous along k (w.stride[1] == 1: W_vc as a
 * view of kv_b_proj, whose rows are the output features) with few rows (M
 * <= DOT_MAX_M: decode and MTP): y[b][m][n] = fl(fl32(sum_k x[b][m][k]
 * W[b][k][n]) * w_scale), where column n of W[b] is a row of K values in
 * memory. The tiled path (cpu/batched_gemm.c) would gather W[b] into fp32
 * along a stride of K values for every call, which costs more than the
 * product itself at decode; here each column is read once, as a row,
 * converted to fp32 NR at a time, and dotted with every x row by the
 * projection's micro-kernel (cpu/linear_kernel.h: 16 lanes per output in k
 * order, then a fixed tree), so no bit depends on the threads or the
 * column blocks either. */
#include "core/checked.h"
#include "cpu/batched_gemm_kernel.h"
#include "cpu/cpu_rows.h"
#include "cpu/linear_kernel.h"

#define DOT_MAX_M 16
#define DOT_NC 48 /* columns per task (a multiple of NR) */

int mla_cpu_bgemm_dot_takes(const mla_batched_gemm_args *a)
{
    return a->w.stride[1] == 1 && a->w.stride[2] != 1 && a->x.shape[1] <= DOT_MAX_M;
}

/* Per-thread scratch, in floats: x[b] (M K), NR columns (NR K), the lanes
 * (MT NR LANES). */
typedef struct dot_plan {
    const mla_batched_gemm_args *a;
    const bg_fns *f;
    const lin_fns *lf;
    mla_tensor wt; /* W as [B, N, K]: its columns as rows */
    int64_t M, K, N, per;
} dot_plan;

/* Batch b, columns [n0, n1). */
static void dot_task(const dot_plan *pl, int64_t b, int64_t n0, int64_t n1, float *buf)
{
    const mla_batched_gemm_args *a = pl->a;
    const int64_t M = pl->M, K = pl->K;
    float *xr = buf, *wr = xr + M * K, *lanes = wr + NR * K;
    pl->f->rows(&a->x, b, 0, M, 0, K, xr, K);
    const mla_tensor *y = &a->y;
    const int64_t ysz = (int64_t)mla_dtype_size(y->dtype);
    for (int64_t nb = n0; nb < n1; nb += NR) {
        const int64_t nr = n1 - nb < NR ? n1 - nb : NR;
        pl->f->rows(&pl->wt, b, nb, nr, 0, K, wr, K);
        lin_wtile t = {{0}, {0}, 0, 0, MLA_V16_F32};
        for (int j = 0; j < NR; ++j) /* the rows past nr repeat the last one (not stored) */
            t.row[j] = wr + (j < nr ? j : nr - 1) * K;
        for (int64_t m0 = 0; m0 < M; m0 += MT) {
            const int mt = (int)(M - m0 < MT ? M - m0 : MT);
            float sums[MT * NR];
            pl->lf->ukr(xr + m0 * K, K, mt, &t, K, lanes, 1, sums);
            for (int r = 0; r < mt; ++r) {
                float v[NR];
                for (int64_t j = 0; j < nr; ++j)
                    v[j] = sums[r * NR + j] * a->w_scale;
                const int64_t off = b * y->stride[0] + (m0 + r) * y->stride[1] + nb * y->stride[2];
                mla_cpu_store_float(v, (char *)y->data + off * ysz, y->dtype, y->stride[2], nr);
            }
        }
    }
}

/* Task k: batch k / chunks, its (k % chunks)-th DOT_NC columns. */
static void dot_task_k(const void *arg, int64_t k, float *buf)
{
    const dot_plan *pl = arg;
    const int64_t chunks = (pl->N + DOT_NC - 1) / DOT_NC, b = k / chunks,
                  n0 = (k % chunks) * DOT_NC;
    dot_task(pl, b, n0, pl->N - n0 < DOT_NC ? pl->N : n0 + DOT_NC, buf);
}

mla_status mla_cpu_bgemm_dot(mla_context *ctx, const mla_batched_gemm_args *a)
{
    const mla_cpu_isa isa = mla_cpu_isa_of(ctx);
    const int bf16 = mla_cpu_has_bf16(ctx);
    dot_plan pl = {a, mla_cpu_bgemm_fns(isa, bf16), mla_cpu_linear_fns(isa, bf16), a->w,
                   a->x.shape[1], a->x.shape[2], a->w.shape[2], 0};
    pl.wt.shape[1] = pl.N, pl.wt.shape[2] = pl.K;
    pl.wt.stride[1] = a->w.stride[2], pl.wt.stride[2] = 1;
    /* M <= DOT_MAX_M: M K + NR K + the lanes fit whenever x's elements do */
    pl.per = mla_sz_add(mla_sz_mul(pl.M + NR, pl.K), MT * NR * LANES);
    const int64_t B = a->x.shape[0], tasks = B * ((pl.N + DOT_NC - 1) / DOT_NC);
    const int nt = mla_cpu_threads(ctx, tasks, mla_sz_sat(mla_sz_mul4(B, pl.M, pl.N, pl.K)) / 64);
    return mla_cpu_run_tasks(ctx, nt, tasks, pl.per, "x", dot_task_k, &pl);
}
