/* The CPU expanded attention's decompression (cpu/attention_expanded.c, step
 * 1): kv[t][n] = sum_k c_t[k] W[n][k] over the L latent values of each
 * gathered row t, W = kv_b_proj [H (nope + v), L] (bf16, or fp8 codes whose
 * value is fl(code * block scale)), rounded once to the kv dtype.
 *
 * It is the score product of the attention kernels with W in q's place: a
 * task takes NB rows of W, packed once onto the vector lanes (Wt [L][mp]
 * transposed in fp32, or as bf16 pairs [L / 2][mp]), and sweeps every row
 * of c in tiles of NKT as the keys (kernel qk: NKT x mp sums of L products,
 * each in increasing k), so that the tile's results are already kv's row
 * pieces [t][n0 .. n0 + NB). The latent rows are read in place where their
 * dtype is the kernel's (bf16 pairs: L and R even; fp32), else converted per
 * tile. vdpbf16ps (exact products of bf16 c and bf16 W, fp32 sums) where
 * the CPU has AVX512-BF16 and mla_cpu_dp_safe rules out its subnormal flush
 * for the tile; else the FMA kernel. Each value is one task's sum in a
 * fixed order, whatever the thread count. */
#include <stdint.h>
#include <string.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "core/checked.h"
#include "core/format_bits.h"
#include "cpu/attention_expanded_internal.h"
#include "cpu/cpu_rows.h"
#include "cpu/linear_kernel.h" /* mla_cpu_dp_safe */

#define NB 64 /* W rows per task: 4 groups of VL lanes */

MLA_CPU_INLINE int64_t round16(int64_t n) { return (n + VL - 1) / VL * VL; }

/* wt [LS][NB], wp [LS / 2][NB], xt [NKT][LS], st [NKT][NB], row [LS] (LS = L
 * rounded up to 16). */
int64_t mla_cpu_expanded_kv_tile_bytes(int64_t L)
{
    const int64_t LS = round16(L);
    return mla_sz_mul(LS * NB + LS / 2 * NB + NKT * LS + NKT * NB + LS, 4);
}

typedef struct kv_job {
    const mla_attention_expanded_op_args *a;
    const mla_expanded_kv *kv;
    const attn_kernels *k;
    const attn_dp *dk; /* NULL: the FMA kernel only */
    int64_t L, R, LS, N;
    int in_place_dp; /* bf16 rows, L and R even: c's rows are the kernel's bf16 pairs */
    uint8_t *tiles;
    int64_t tile_bytes;
} kv_job;

/* W row n as fp32 values into row[0, L): bf16 as is, fp8 fl(code * scale). */
static void w_row(const kv_job *j, int64_t n, float *row)
{
    const mla_tensor *w = &j->a->kv_b, *s = &j->a->kv_b_scale;
    const size_t es = mla_dtype_size(w->dtype);
    mla_cpu_load((const uint8_t *)w->data + (size_t)(n * w->stride[0]) * es, w->dtype,
                 w->stride[1], j->L, row);
    if (w->dtype == MLA_DTYPE_BF16)
        return;
    const float *sr = (const float *)s->data + (n / 128) * s->stride[0];
    for (int64_t k = 0; k < j->L; ++k)
        row[k] *= sr[(k / 128) * s->stride[1]];
}

/* Wt [L][mp]: W rows n0 .. n0 + nr - 1 transposed in fp32, lanes past nr zero. */
static void pack_wt(const kv_job *j, int64_t n0, int64_t nr, int64_t mp, float *wt, float *row)
{
    for (int64_t m = 0; m < mp; ++m) {
        if (m < nr)
            w_row(j, n0 + m, row);
        else
            memset(row, 0, (size_t)j->L * sizeof(float));
        for (int64_t k = 0; k < j->L; ++k)
            wt[k * mp + m] = row[k];
    }
}

/* Task `task`: W rows n0 .. n0 + NB - 1 against every latent row. */
static void kv_task(const kv_job *j, int64_t task, int tid)
{
    const int64_t L = j->L, LS = j->LS, Nk = j->a->Nk, n0 = task * NB;
    const int64_t nr = j->N - n0 < NB ? j->N - n0 : NB;
    const int nv = (int)((nr + VL - 1) / VL);
    const int64_t mp = (int64_t)nv * VL;
    float *wt = (float *)(j->tiles + tid * j->tile_bytes), *xt = wt + LS * NB + LS / 2 * NB;
    uint32_t *wp = (uint32_t *)(wt + LS * NB);
    float *st = xt + NKT * LS, *row = st + NKT * NB;
    const int dp = j->dk != NULL && j->kv->rows.dtype == MLA_DTYPE_BF16 &&
                   j->a->kv_b.dtype == MLA_DTYPE_BF16 && j->in_place_dp;
    /* dp: W's bf16 pairs (lanes past nr zero); the fp32 Wt only for a tile
     * that falls back */
    int ew = 0xFF, have_wt = 0;
    if (dp) {
        const mla_tensor *w = &j->a->kv_b;
        for (int64_t m = 0; m < mp; ++m) {
            uint16_t *b = (uint16_t *)row;
            if (m < nr) {
                const uint16_t *src = (const uint16_t *)w->data + (n0 + m) * w->stride[0];
                const int64_t ws = w->stride[1];
                MLA_SIMD for (int64_t k = 0; k < L; ++k) b[k] = src[k * ws];
            } else {
                memset(b, 0, (size_t)L * sizeof(uint16_t));
            }
            const int e = j->dk->min_exp(b, L);
            ew = e < ew ? e : ew;
            const uint32_t *pw = (const uint32_t *)row;
            for (int64_t p = 0; p < L / 2; ++p)
                wp[p * mp + m] = pw[p];
        }
    }
    attn_pf pf;
    memset(&pf, 0, sizeof pf);
    const mla_tensor *rows = &j->kv->rows, *kv = &j->kv->kv;
    const size_t res = mla_dtype_size(rows->dtype), kves = mla_dtype_size(kv->dtype);
    const int64_t D = L + j->R;
    for (int64_t t0 = 0; t0 < Nk; t0 += NKT) {
        const int nk = (int)(Nk - t0 < NKT ? Nk - t0 : NKT);
        const uint8_t *c0 = (const uint8_t *)rows->data + (size_t)(t0 * D) * res;
        int done = 0;
        if (dp) {
            int ex = 0xFF;
            for (int a = 0; a < nk; ++a) {
                const int e = j->dk->min_exp((const uint16_t *)c0 + a * D, L);
                ex = e < ex ? e : ex;
            }
            if (mla_cpu_dp_safe(ew, ex)) {
                j->dk->qk(wp, mp, nv, (const uint32_t *)c0, D / 2, nk, L / 2, st, &pf);
                done = 1;
            }
        }
        if (!done) {
            const float *kt = (const float *)c0;
            int64_t ks = D;
            if (rows->dtype != MLA_DTYPE_F32) {
                for (int a = 0; a < nk; ++a)
                    mla_cpu_load_float(c0 + (size_t)(a * D) * res, rows->dtype, 1, L, xt + a * LS);
                kt = xt, ks = LS;
            }
            if (!have_wt)
                pack_wt(j, n0, nr, mp, wt, row);
            have_wt = 1;
            j->k->qk(wt, mp, nv, kt, ks, nk, L, st, &pf);
        }
        for (int a = 0; a < nk; ++a)
            mla_cpu_store_float(st + a * mp,
                                (uint8_t *)kv->data + (size_t)((t0 + a) * j->N + n0) * kves,
                                kv->dtype, 1, nr);
    }
}

mla_status mla_cpu_expanded_decompress(mla_context *ctx, const mla_attention_expanded_op_args *a,
                                       const mla_expanded_kv *kv, const attn_kernels *k,
                                       const attn_dp *dk, uint8_t *tiles, int64_t tile_bytes)
{
    const mla_attention_expanded_desc *d = &a->desc;
    kv_job j;
    memset(&j, 0, sizeof j);
    j.a = a, j.kv = kv, j.k = k, j.dk = dk;
    j.L = d->cache.kv_lora, j.R = d->cache.rope, j.LS = round16(j.L);
    j.N = d->heads * (d->nope + d->v);
    j.in_place_dp = j.L % 2 == 0 && j.R % 2 == 0;
    j.tiles = tiles, j.tile_bytes = tile_bytes;
    if (a->Nk == 0)
        return MLA_OK;
    const int64_t tasks = (j.N + NB - 1) / NB;
    const int nt = mla_cpu_threads(ctx, tasks, mla_sz_sat(mla_sz_mul3(a->Nk, j.N, j.L)) / 64);
    (void)nt;
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int tid = 0;
#if defined(MLA_HAVE_OPENMP)
        tid = omp_get_thread_num();
#endif
#if defined(MLA_HAVE_OPENMP)
#pragma omp for schedule(dynamic, 1)
#endif
        for (int64_t t = 0; t < tasks; ++t)
            kv_task(&j, t, tid);
    }
    return MLA_OK;
}
