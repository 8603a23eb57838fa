/* CPU batched GEMM (mla_batched_gemm): y[b] = fl(fl32(x[b] @ W[b]) * w_scale),
 * x [B, M, K], W [B, K, N] (bf16, or fp8 codes under one per-tensor scale),
 * y [B, M, N], every operand through its strides (the absorb passes q_nope
 * as a [H, T, nope] view, W_kc / W_vc as views of kv_b_proj, and y as a
 * [H, T, L] view of a [T, H, L] buffer). fp32 accumulation.
 *
 * A task is one batch b and up to NC columns: x[b] is copied to fp32 rows,
 * then a broadcast micro-kernel (cpu/batched_gemm_kernel.h) computes MR rows
 * x NV vectors of 16 columns, each output summed over k in one fixed order,
 * so neither the thread count nor the tiling changes a bit. The AVX-512
 * kernel reads W[b] where it lies (bf16 by a shift, fp8 codes through
 * cpu/avx512_vec.h) and uses FMA; the portable kernels read an fp32 copy of
 * the W columns and multiply, then add. With AVX512-BF16, bf16 x and W and
 * M >= DP_MIN_M, x[b] and the W columns are also packed as bf16 pairs along
 * k and a row tile runs vdpbf16ps (twice the FMA rate) wherever the
 * exponents rule out its subnormal flush (mla_cpu_dp_safe). */
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "cpu/batched_gemm_kernel.h"
#include "cpu/cpu_rows.h"
#include "cpu/linear_kernel.h"

#define NTILE BG_NTILE
#define MR BG_MR
#define NC 512 /* columns per task */
#define PREFETCH_MAX_M 4
#define DP_MIN_M 4 /* vdpbf16ps from this many rows on (fewer: the W stream bounds the time) */

/* Per-thread scratch, in floats: x[b] in fp32 (M K), the portable kernels'
 * fp32 copy of the W columns (K nc), one tile (MR NTILE), and for vdpbf16ps x
 * and W as bf16 pairs (M P + P nc, P = ceil(K / 2)) and the exponent of each
 * row tile (M). */
typedef struct bg_plan {
    const mla_batched_gemm_args *a;
    const bg_fns *f;
    const lin_fns *lf; /* the bf16 exponent scan */
    int direct, dp;
    int64_t M, K, P, nc, per;
} bg_plan;

/* x[b] rows as bf16 pairs: xp[r * P + p] = x[r, 2p] | x[r, 2p + 1] << 16 (a
 * missing odd value is +0). */
static void x_pairs(const mla_tensor *x, int64_t b, int64_t M, int64_t K, int64_t P, uint32_t *xp)
{
    const uint16_t *base = (const uint16_t *)x->data + b * x->stride[0];
    for (int64_t r = 0; r < M; ++r)
        for (int64_t p = 0; p < P; ++p) {
            const uint16_t *v = base + r * x->stride[1] + 2 * p * x->stride[2];
            xp[r * P + p] = v[0] | (2 * p + 1 < K ? (uint32_t)v[x->stride[2]] << 16 : 0u);
        }
}

/* W[b] columns [n0, n0 + nc) as bf16 pairs along k: wp[p * nc + c] =
 * W[2p, c] | W[2p + 1, c] << 16 (unit column stride: the direct path). */
static void w_pairs(const bg_plan *pl, int64_t b, int64_t n0, int64_t nc, uint32_t *wp)
{
    const mla_tensor *w = &pl->a->w;
    const uint16_t *base = (const uint16_t *)w->data + b * w->stride[0] + n0;
    for (int64_t p = 0; p < pl->P; ++p) {
        const uint16_t *r0 = base + 2 * p * w->stride[1];
        pl->f->pair_rows(r0, 2 * p + 1 < pl->K ? r0 + w->stride[1] : NULL, nc, wp + p * nc);
    }
}

/* Batch b, columns [n0, n0 + nc). */
static void task(const bg_plan *pl, int64_t b, int64_t n0, int64_t nc, float *buf)
{
    const mla_batched_gemm_args *a = pl->a;
    const bg_fns *f = pl->f;
    const int64_t M = pl->M, K = pl->K, P = pl->P;
    const mla_tensor *w = &a->w;
    float *xr = buf, *wf = xr + M * K, *tile = wf + (pl->direct ? 0 : K * nc);
    uint32_t *xp = (uint32_t *)(tile + MR * NTILE), *wp = xp + M * P;
    uint8_t *xe = (uint8_t *)(wp + P * pl->nc);
    f->rows(&a->x, b, 0, M, 0, K, xr, K);
    int we = 0;
    if (pl->dp) {
        x_pairs(&a->x, b, M, K, P, xp);
        w_pairs(pl, b, n0, nc, wp);
        we = pl->lf->min_exp((const uint16_t *)wp, 2 * P * nc);
        for (int64_t m0 = 0; m0 < M; m0 += MR)
            xe[m0 / MR] = (uint8_t)pl->lf->min_exp((const uint16_t *)(xp + m0 * P),
                                                   2 * P * (M - m0 < MR ? M - m0 : MR));
    }
    bg_w wt;
    if (pl->direct) {
        const int64_t sz = (int64_t)mla_dtype_size(w->dtype);
        wt.p = (const char *)w->data + (b * w->stride[0] + n0) * sz;
        wt.ld = w->stride[1] * sz, wt.kind = mla_v16_kind_of(w->dtype);
    } else {
        f->rows(w, b, 0, K, n0, nc, wf, nc);
        wt.p = (const char *)wf, wt.ld = nc * (int64_t)sizeof(float), wt.kind = MLA_V16_F32;
    }
    const int64_t esz = pl->direct ? MLA_V16_SIZE(wt.kind) : (int64_t)sizeof(float);
    const int64_t *ys = a->y.stride, ysz = (int64_t)mla_dtype_size(a->y.dtype);
    const int ydirect = f->direct && pl->direct && ys[2] == 1; /* y is F32 or BF16 */
#if defined(__GNUC__)
    if (pl->direct && M <= PREFETCH_MAX_M) /* few rows: W[b] is the stream; ask for all of it */
        for (int64_t k = 0; k < K; ++k)
            for (int64_t c = 0; c < nc * esz; c += 64)
                __builtin_prefetch(wt.p + k * wt.ld + c, 0, 2);
#endif
    for (int64_t j = 0; j < nc; j += NTILE) { /* a W column block stays in L1 over all rows */
        const int64_t cols = nc - j < NTILE ? nc - j : NTILE;
        bg_w wj = wt;
        wj.p += j * esz;
        for (int64_t m0 = 0; m0 < M; m0 += MR) {
            const int64_t mr = M - m0 < MR ? M - m0 : MR;
            bg_y yt = {(char *)a->y.data + ((b * ys[0] + m0 * ys[1] + n0 + j) * ysz),
                       ys[1] * ysz, ysz == 2, a->w_scale};
            const bg_y *yd = ydirect ? &yt : NULL;
            if (pl->dp && mla_cpu_dp_safe(xe[m0 / MR], we))
                f->ukr_dp(xp + m0 * P, P, (int)mr, wp + j, nc, P, cols, tile, yd);
            else
                f->ukr(xr + m0 * K, K, (int)mr, &wj, K, cols, tile, yd);
            if (!yd)
                f->store(a, b, m0, mr, n0 + j, cols, tile);
        }
    }
}

/* Task k: batch k / chunks, its (k % chunks)-th NC columns. */
static void task_k(const void *arg, int64_t k, float *buf)
{
    const bg_plan *pl = arg;
    const int64_t N = pl->a->w.shape[2], chunks = (N + pl->nc - 1) / pl->nc;
    const int64_t b = k / chunks, n0 = (k % chunks) * pl->nc;
    task(pl, b, n0, N - n0 < pl->nc ? N - n0 : pl->nc, buf);
}

/* K = 0: every y = fl(+0 * w_scale), and x and W (empty: their data may be
 * NULL) are not touched. */
static void store_empty_sums(const mla_batched_gemm_args *a)
{
    const mla_tensor *y = &a->y;
    const int64_t ysz = (int64_t)mla_dtype_size(y->dtype);
    float v[NTILE];
    for (int c = 0; c < NTILE; ++c)
        v[c] = 0.0f * a->w_scale;
    for (int64_t b = 0; b < y->shape[0]; ++b)
        for (int64_t m = 0; m < y->shape[1]; ++m)
            for (int64_t n0 = 0; n0 < y->shape[2]; n0 += NTILE) {
                const int64_t off = b * y->stride[0] + m * y->stride[1] + n0 * y->stride[2];
                mla_cpu_store_float(v, (char *)y->data + off * ysz, y->dtype, y->stride[2],
                                    y->shape[2] - n0 < NTILE ? y->shape[2] - n0 : NTILE);
            }
}

mla_status mla_cpu_batched_gemm(mla_context *ctx, const mla_batched_gemm_args *a)
{
    const int64_t B = a->x.shape[0], M = a->x.shape[1], K = a->x.shape[2], N = a->w.shape[2];
    if (K == 0) {
        store_empty_sums(a);
        return MLA_OK;
    }
    if (mla_cpu_bgemm_dot_takes(a))
        return mla_cpu_bgemm_dot(ctx, a);
    const mla_cpu_isa isa = mla_cpu_isa_of(ctx);
    const int bf16 = mla_cpu_has_bf16(ctx);
    bg_plan pl = {a, mla_cpu_bgemm_fns(isa, bf16), mla_cpu_linear_fns(isa, bf16), 0, 0, M,
                  K, K / 2 + K % 2,          N < NC ? N : NC,         0};
    pl.direct = (pl.f->direct || (pl.f->direct_bf16 && a->w.dtype == MLA_DTYPE_BF16)) &&
                a->w.stride[2] == 1;
    pl.dp = pl.f->ukr_dp && pl.direct && M >= DP_MIN_M && a->x.dtype == MLA_DTYPE_BF16 &&
            a->w.dtype == MLA_DTYPE_BF16;
    /* M K fits (x's elements); K nc and the sum need not (a broadcast x) */
    const int64_t w_dp = pl.dp ? mla_sz_add(mla_sz_mul(M + pl.nc, pl.P), M) : 0;
    pl.per = mla_sz_add(mla_sz_add(M * K, pl.direct ? 0 : mla_sz_mul(K, pl.nc)),
                        mla_sz_add(MR * NTILE, w_dp));
    const int64_t chunks = (N + pl.nc - 1) / pl.nc, tasks = B * chunks;
    const int nt = mla_cpu_threads(ctx, tasks, mla_sz_sat(mla_sz_mul4(B, M, N, K)) / 64);
    return mla_cpu_run_tasks(ctx, nt, tasks, pl.per, "x", task_k, &pl);
}
