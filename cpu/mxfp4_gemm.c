/* CPU MXFP4 batched GEMMs (MLA.md section 7): y[b] = A[b] @ deq(w[b])^T, fp32
 * accumulation, y written through its strides (F32, or BF16 rounded once).
 *
 * A task is one batch and a range of weight rows. It turns the rows' scale
 * bytes into fp32 block scales (any layout) and makes each code row
 * contiguous (a copy only when the codes' last stride is not 1); then, per
 * chunk of activation rows, builds A in fp32 (x as is, x's MXFP4 round trip
 * when prequant, or the a4w4 dequant: all bit-exact per core/format_bits.h)
 * and runs tiles of 16 dot products (cpu/mxfp4_gemm.h); from M = 64, in
 * builds with OpenBLAS, one single-threaded sgemm against the task's weight
 * rows decoded to fp32 instead. With AVX512-BF16 and 5 <= M <= 16 (and x
 * exact in bf16: BF16 x, the round trip, a4w4), a task decodes its weights
 * once to bf16 pairs and runs vdpbf16ps over all M rows per weight load
 * (cpu/mxfp4_gemm.h), where the scale bytes and x's exponents rule out the
 * instruction's subnormal flush; else the tiles. K is never split: every
 * output is one tile's (or one sgemm call's) fixed sequence of operations,
 * whatever the thread count. Scratch is allocated before anything is written, so a
 * failed allocation leaves y untouched. */
#include <stdlib.h>
#include <string.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif
#if defined(MLA_HAVE_OPENBLAS)
#include <cblas.h>
#endif

#include "core/checked.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"
#include "cpu/linear_kernel.h" /* mla_cpu_dp_safe */
#include "cpu/mxfp4_gemm.h"

#define BLOCK MLA_MX_BLOCK
#define MCHUNK 128      /* activation rows built per pass (at K = 512: 256 KB, L2) */
#define SGEMM_MIN_M 64  /* from here on OpenBLAS on a decoded weight panel, when built in */
#define PANEL_FLOATS 131072 /* decoded weights per panel (512 KB, L2) */
/* Activation rows per tile (4 x 4 tiles: measured faster on Zen 4 at M = 16
 * than 8 x 2 or 16 x 1, which load more activations per FMA). */
#define MT_MAX 4
#define MIN_TASKS 8
/* The AVX512-BF16 path from DP_MIN_M to DP_MAX_M activation rows (fewer:
 * its weight decode, a fixed cost per batch, outweighs the products; the
 * fp32 tiles decode on the fly and measured faster at M = 1, 2, as fast at
 * M = 4, slower from M = 6, Zen 4, W_kc and W_vc shapes). */
#define DP_MIN_M 5
#define DP_MAX_M 16
#define DP_MAX_SCALE 252 /* its weight decode adds exponents: 6 * 2^(252 - 127) is still finite */

/* Byte offset of scale (r, j) of batch b of an operand with nblk scales per row. */
static int64_t scale_offset(const mla_mxfp4_operand *op, int64_t b, int64_t r, int64_t j,
                            int64_t nblk)
{
    const mla_tensor *s = &op->scales;
    if (op->layout == MLA_SCALE_PRESHUFFLED_GFX950)
        return b * s->stride[0] + mla_fb_preshuffled_offset(r, j, nblk) * s->stride[1];
    return b * s->stride[0] + r * s->stride[1] + j * s->stride[2];
}

/* ---------------------------------------------------- activation rows */

/* v[0..K) -> ad[0..K): per 32-block the even k, then the odd k. */
MLA_CPU_INLINE void deinterleave(const float *v, int64_t K, float *ad)
{
    for (int64_t k0 = 0; k0 < K; k0 += BLOCK)
        MLA_SIMD for (int i = 0; i < BLOCK / 2; ++i)
        {
            ad[k0 + i] = v[k0 + 2 * i];
            ad[k0 + BLOCK / 2 + i] = v[k0 + 2 * i + 1];
        }
}

/* v[0..K) replaced by deq(Q(v)): each block's scale byte and codes as the
 * MXFP4 quant computes them, then fp4 * 2^(scale - 127) exactly. */
MLA_CPU_INLINE void round_trip(float *v, int64_t K, int production)
{
    for (int64_t k0 = 0; k0 < K; k0 += BLOCK) {
        uint32_t amax = 0;
        MLA_SIMD_MAX(amax) for (int i = 0; i < BLOCK; ++i)
        {
            uint32_t m = mla_fb_bits(v[k0 + i]) & 0x7FFFFFFFu;
            amax = m > amax ? m : amax;
        }
        uint8_t sb = mla_fb_mxfp4_scale_byte(amax, production);
        uint32_t mask = mla_fb_mxfp4_code_mask(amax);
        MLA_SIMD for (int i = 0; i < BLOCK; ++i) v[k0 + i] =
            mla_fb_e2m1_scaled_to_f32(mla_fb_mxfp4_code(v[k0 + i], sb, mask), sb);
    }
}

/* Rows m0 .. m0 + mc of A[b] into ad (row stride K); buf holds K floats. */
MLA_CPU_INLINE void act_rows_body(const mla_mxfp4_gemm_args *g, int a4w4, int64_t b, int64_t m0,
                                  int64_t mc, float *ad, float *buf)
{
    const int64_t K = g->K, nblk = K / BLOCK;
    for (int64_t m = m0; m < m0 + mc; ++m) {
        if (a4w4) {
            const mla_mxfp4_operand *x = &g->xq;
            const uint8_t *c = (const uint8_t *)x->codes.data + b * x->codes.stride[0] +
                               m * x->codes.stride[1];
            const uint8_t *s = (const uint8_t *)x->scales.data;
            static const float fp4[16] = MLA_MX_FP4_VALUES;
            for (int64_t j = 0; j < nblk; ++j) {
                /* fp4 * 2^(s - 127) in fp32 is exact (or inf; NaN for s = 255,
                 * as mla_fb_e2m1_scaled_to_f32): a table per block */
                const float sc = mla_fb_e8m0_to_f32(s[scale_offset(x, b, m, j, nblk)]);
                float table[16];
                MLA_SIMD for (int i = 0; i < 16; ++i) table[i] = fp4[i] * sc;
                const uint8_t *cj = c + j * (BLOCK / 2) * x->codes.stride[2];
                for (int i = 0; i < BLOCK / 2; ++i) {
                    uint8_t byte = cj[i * x->codes.stride[2]];
                    buf[j * BLOCK + 2 * i] = table[byte & 0xFu];
                    buf[j * BLOCK + 2 * i + 1] = table[byte >> 4];
                }
            }
        } else {
            const char *x = (const char *)g->x.data +
                            (b * g->x.stride[0] + m * g->x.stride[1]) *
                                (int64_t)mla_dtype_size(g->x.dtype);
            mla_cpu_load_float(x, g->x.dtype, g->x.stride[2], K, buf);
            if (g->prequant)
                round_trip(buf, K, g->rule == MLA_MXFP4_PRODUCTION);
        }
        deinterleave(buf, K, ad + (m - m0) * K);
    }
}

/* ------------------------------------------------------ weight rows */

/* Code row c (K/2 bytes) with block scales ws as fp32, de-interleaved per
 * block like A: the rows of the OpenBLAS path's weight panel. */
MLA_CPU_INLINE void weight_row_body(const uint8_t *c, const float *ws, int64_t nblk, float *out)
{
    static const float fp4[16] = MLA_MX_FP4_VALUES;
    for (int64_t j = 0; j < nblk; ++j) {
        float table[16];
        MLA_SIMD for (int i = 0; i < 16; ++i) table[i] = fp4[i] * ws[j];
        for (int i = 0; i < BLOCK / 2; ++i) {
            out[j * BLOCK + i] = table[c[j * (BLOCK / 2) + i] & 0xF];
            out[j * BLOCK + BLOCK / 2 + i] = table[c[j * (BLOCK / 2) + i] >> 4];
        }
    }
}

/* The tiles of cpu/mxfp4_gemm.h in plain C (generic and AVX2 copies): the
 * same products, each lane's terms summed by block, the 16 lanes in order. */
MLA_CPU_INLINE void rows_portable_body(const mla_mx_rows *r, int mt)
{
    const int nt = MLA_MX_TILE / mt;
    for (int64_t n0 = 0; n0 < r->rows; n0 += nt) {
        float acc[MLA_MX_TILE][16];
        memset(acc, 0, sizeof acc);
        for (int64_t j = 0; j < r->nblk; ++j)
            for (int ni = 0; ni < nt; ++ni) {
                const int64_t n = n0 + ni < r->rows ? n0 + ni : r->rows - 1;
                float w[BLOCK];
                weight_row_body(r->w + n * r->ldw + j * (BLOCK / 2), r->ws + n * r->nblk + j, 1,
                                w);
                for (int mi = 0; mi < mt; ++mi) {
                    const float *a = r->a + mi * r->lda + BLOCK * j;
                    float *s = acc[mi * nt + ni];
                    MLA_SIMD for (int i = 0; i < 16; ++i) s[i] +=
                        w[i] * a[i] + w[16 + i] * a[16 + i];
                }
            }
        for (int o = 0; o < MLA_MX_TILE; ++o) {
            float sum = 0.0f;
            for (int i = 0; i < 16; ++i)
                sum += acc[o][i];
            r->out[(o / nt) * r->ldo + n0 + o % nt] = sum;
        }
    }
}

/* ----------------------------------------------------- ISA copies */

typedef void (*act_fn)(const mla_mxfp4_gemm_args *, int, int64_t, int64_t, int64_t, float *,
                       float *);
typedef void (*rows_fn)(const mla_mx_rows *, int);
typedef void (*wrow_fn)(const uint8_t *, const float *, int64_t, float *);

static void act_generic(const mla_mxfp4_gemm_args *g, int a4w4, int64_t b, int64_t m0,
                        int64_t mc, float *ad, float *buf)
{
    act_rows_body(g, a4w4, b, m0, mc, ad, buf);
}

static void wrow_generic(const uint8_t *c, const float *ws, int64_t nblk, float *out)
{
    weight_row_body(c, ws, nblk, out);
}

static void rows_generic(const mla_mx_rows *r, int mt) { rows_portable_body(r, mt); }

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void act_avx2(const mla_mxfp4_gemm_args *g, int a4w4, int64_t b,
                                     int64_t m0, int64_t mc, float *ad, float *buf)
{
    act_rows_body(g, a4w4, b, m0, mc, ad, buf);
}

MLA_TARGET_AVX2 static void wrow_avx2(const uint8_t *c, const float *ws, int64_t nblk,
                                      float *out)
{
    weight_row_body(c, ws, nblk, out);
}

MLA_TARGET_AVX2 static void rows_avx2(const mla_mx_rows *r, int mt)
{
    rows_portable_body(r, mt);
}

MLA_TARGET_AVX512 static void act_avx512(const mla_mxfp4_gemm_args *g, int a4w4, int64_t b,
                                         int64_t m0, int64_t mc, float *ad, float *buf)
{
    act_rows_body(g, a4w4, b, m0, mc, ad, buf);
}

MLA_TARGET_AVX512 static void wrow_avx512(const uint8_t *c, const float *ws, int64_t nblk,
                                          float *out)
{
    weight_row_body(c, ws, nblk, out);
}
#endif

typedef struct kernels {
    act_fn act;
    rows_fn rows;
    wrow_fn wrow;
} kernels;

static kernels pick(mla_cpu_isa isa)
{
#if MLA_CPU_X86
    if (isa == MLA_CPU_ISA_AVX512)
        return (kernels){act_avx512, mla_cpu_mx_rows_avx512, wrow_avx512};
    if (isa == MLA_CPU_ISA_AVX2)
        return (kernels){act_avx2, rows_avx2, wrow_avx2};
#endif
    (void)isa;
    return (kernels){act_generic, rows_generic, wrow_generic};
}

/* ----------------------------------------------------------- driver */

typedef struct plan {
    const mla_mxfp4_gemm_args *g;
    int a4w4, sgemm, dp;
    kernels k;
    int64_t nchunk, nsplit; /* weight rows per task, tasks per batch */
    int64_t mchunk;         /* activation rows per pass */
    int64_t prows;          /* weight rows per decoded panel (OpenBLAS path) */
    size_t scratch;         /* floats of one task's scratch */
} plan;

static int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

/* One task's scratch, in floats: block scales, A chunk, a row buffer,
 * outputs, weight panel, contiguous code rows (a copy only when needed). */
static int64_t scratch_floats(const plan *p)
{
    const int64_t K = p->g->K, rows = p->nchunk, ldo = round16(rows);
    const int64_t out = p->sgemm ? p->mchunk * p->prows : (p->dp ? DP_MAX_M : MT_MAX) * ldo;
    int64_t n = mla_sz_add(mla_sz_mul(rows, K / BLOCK), mla_sz_mul(p->mchunk + 1, K));
    n = mla_sz_add(mla_sz_add(n, out), p->sgemm ? mla_sz_mul(p->prows, K) : 0);
    n = mla_sz_add(n, mla_sz_ceil_div(mla_sz_mul(rows, K / 2), 4));
    return mla_sz_add(n, p->dp ? mla_sz_mul(2 * DP_MAX_M, K / 2) : 0);
}


/* y[b, m0 + mi, n_lo + n] = out[mi * ldo + n] (rounded once for BF16). */
static void store_rows(const mla_tensor *y, int64_t b, int64_t m0, int64_t mt, int64_t n_lo,
                       int64_t rows, const float *out, int64_t ldo)
{
    for (int64_t mi = 0; mi < mt; ++mi) {
        const int64_t off = b * y->stride[0] + (m0 + mi) * y->stride[1] + n_lo * y->stride[2];
        const float *v = out + mi * ldo;
        if (y->dtype == MLA_DTYPE_F32)
            for (int64_t n = 0; n < rows; ++n)
                ((float *)y->data)[off + n * y->stride[2]] = v[n];
        else
            for (int64_t n = 0; n < rows; ++n)
                ((uint16_t *)y->data)[off + n * y->stride[2]] = mla_fb_f32_to_bf16(v[n]);
    }
}

#if defined(MLA_HAVE_OPENBLAS)
/* C [mc, rows] = A [mc, K] W [rows, K]^T on this thread only: OpenBLAS must
 * not split a call, or its bits could change with the thread count. */
static void sgemm_one_thread(int64_t mc, int64_t rows, int64_t K, const float *A,
                             const float *W, float *C)
{
#if defined(MLA_HAVE_OPENMP)
    const int outer = !omp_in_parallel(), prev = omp_get_max_threads();
    if (outer)
        omp_set_num_threads(1);
#endif
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)mc, (blasint)rows, (blasint)K,
                1.0f, A, (blasint)K, W, (blasint)K, 0.0f, C, (blasint)rows);
#if defined(MLA_HAVE_OPENMP)
    if (outer)
        omp_set_num_threads(prev);
#endif
}

/* Activation rows m0 .. m0 + mc against the weight rows, a panel of at
 * most p->prows decoded rows at a time (decoded once per task when one
 * panel holds them all). */
static void sgemm_rows(const plan *p, const mla_mx_rows *r, int64_t b, int64_t n_lo, int64_t m0,
                       int64_t mc, const float *ad, float *panel, float *out)
{
    const int64_t K = p->g->K;
    for (int64_t n0 = 0; n0 < r->rows; n0 += p->prows) {
        const int64_t nr = r->rows - n0 < p->prows ? r->rows - n0 : p->prows;
        for (int64_t n = n0; p->prows < r->rows && n < n0 + nr; ++n)
            p->k.wrow(r->w + n * r->ldw, r->ws + n * r->nblk, r->nblk, panel + (n - n0) * K);
        sgemm_one_thread(mc, nr, K, ad, panel, out);
        store_rows(&p->g->y, b, m0, mc, n_lo + n0, nr, out, nr);
    }
}
#endif

#if MLA_CPU_X86
/* Rows 0 .. M of x[b] through the vectorized round trip into ad (the
 * layout of act_rows_body); 0 where a block's scale byte rules it out. */
MLA_TARGET_AVX512 static int prequant_rows_avx512(const mla_mxfp4_gemm_args *g, int64_t b,
                                                  float *ad, float *buf)
{
    const int64_t K = g->K, sz = (int64_t)mla_dtype_size(g->x.dtype);
    for (int64_t m = 0; m < g->M; ++m) {
        const char *x =
            (const char *)g->x.data + (b * g->x.stride[0] + m * g->x.stride[1]) * sz;
        mla_cpu_load_float(x, g->x.dtype, g->x.stride[2], K, buf);
        if (!mla_cpu_mx_round_trip(buf, K, g->rule == MLA_MXFP4_PRODUCTION, ad + m * K))
            return 0;
    }
    return 1;
}
#endif

/* The AVX512-BF16 path (cpu/mxfp4_gemm.h) for all M <= 16 rows: x as
 * bf16 pairs in the lanes (exact: BF16 x, its MXFP4 round trip, or a4w4
 * codes), then the tiles; 0 when a subnormal could occur (the caller then
 * runs the fp32 tiles, which write every output again). */
static int dp_rows(const plan *p, int64_t b, const mla_mx_rows *r, int ew, float *ad,
                   float *buf, uint32_t *xt, uint32_t *wp, int64_t n_lo)
{
    const mla_mxfp4_gemm_args *g = p->g;
    const int64_t M = g->M, K = g->K;
    int xe = 255;
    if (p->a4w4) { /* the codes and scale bytes, contiguous, decoded like W */
        const mla_mxfp4_operand *x = &g->xq;
        const int64_t nblk = K / BLOCK;
        uint8_t *xc = (uint8_t *)ad, *xs = xc + M * (K / 2);
        for (int64_t m = 0; m < M; ++m) {
            const uint8_t *c = (const uint8_t *)x->codes.data + b * x->codes.stride[0] +
                               m * x->codes.stride[1];
            if (x->codes.stride[2] == 1)
                memcpy(xc + m * (K / 2), c, (size_t)(K / 2));
            for (int64_t i = 0; x->codes.stride[2] != 1 && i < K / 2; ++i)
                xc[m * (K / 2) + i] = c[i * x->codes.stride[2]];
            for (int64_t j = 0; j < nblk; ++j) {
                const uint8_t s = ((const uint8_t *)x->scales.data)[scale_offset(x, b, m, j, nblk)];
                xs[m * nblk + j] = s;
                xe = s - 1 < xe ? s - 1 : xe; /* as for W */
            }
        }
        mla_cpu_mx_x_codes(xc, xs, K, M, xt);
    } else if (g->prequant) { /* the round trip, vectorized */
        xe = mla_cpu_mx_x_prequant(g, b, xt);
        if (xe == -2)
            return 0;
#if MLA_CPU_X86
        if (xe == -1) {
            if (!prequant_rows_avx512(g, b, ad, buf))
                return 0;
            xe = mla_cpu_mx_x_pairs(ad, K, M, xt);
        }
#endif
    } else {
        p->k.act(g, 0, b, 0, M, ad, buf);
        xe = mla_cpu_mx_x_pairs(ad, K, M, xt);
    }
    if (!mla_cpu_dp_safe(xe, ew))
        return 0;
    const mla_tensor *y = &g->y;
    const int64_t ysz = (int64_t)mla_dtype_size(y->dtype);
    mla_mx_dp d = {xt, M, r->w, r->ldw, r->ws, r->rows, r->nblk, wp, r->out, r->ldo, NULL, 0, 0};
    if (y->stride[2] == 1) /* y is F32 or BF16: written by the tiles */
        d.y = (char *)y->data + (b * y->stride[0] + n_lo) * ysz, d.ldy = y->stride[1] * ysz,
        d.ybf16 = y->dtype == MLA_DTYPE_BF16;
    mla_cpu_mx_rows_dp(&d);
    if (!d.y)
        store_rows(y, b, 0, M, n_lo, r->rows, r->out, r->ldo);
    return 1;
}

/* ws[n * nblk + j] = the block scales of weight rows n_lo .. n_lo + rows as
 * fp32; with smin, smax also the smallest and largest scale byte. */
MLA_CPU_INLINE void weight_scales(const mla_mxfp4_operand *w, int64_t b, int64_t n_lo,
                                  int64_t rows, int64_t nblk, float *ws, unsigned *smin,
                                  unsigned *smax)
{
    const int plain = w->layout != MLA_SCALE_PRESHUFFLED_GFX950 && w->scales.stride[2] == 1;
    const uint8_t *sd = (const uint8_t *)w->scales.data;
    unsigned lo = 255, hi = 0;
    for (int64_t n = 0; n < rows; ++n) {
        const uint8_t *sr = sd + (plain ? scale_offset(w, b, n_lo + n, 0, nblk) : 0);
        for (int64_t j = 0; j < nblk; ++j) {
            const uint8_t s = plain ? sr[j] : sd[scale_offset(w, b, n_lo + n, j, nblk)];
            if (smin) {
                lo = s < lo ? s : lo;
                hi = s > hi ? s : hi;
            }
            ws[n * nblk + j] = mla_fb_e8m0_to_f32(s);
        }
    }
    if (smin)
        *smin = lo, *smax = hi;
}

/* Batch b, weight rows [n_lo, n_hi). */
static void run_task(const plan *p, int64_t b, int64_t n_lo, int64_t n_hi, float *scratch)
{
    const mla_mxfp4_gemm_args *g = p->g;
    const mla_mxfp4_operand *w = &g->w;
    const int64_t K = g->K, nblk = K / BLOCK, rows = n_hi - n_lo, ldo = round16(rows);
    float *ws = scratch, *ad = ws + rows * nblk, *buf = ad + p->mchunk * K, *out = buf + K;
    float *panel = out + (p->sgemm ? p->mchunk * p->prows : (p->dp ? DP_MAX_M : MT_MAX) * ldo);
    uint32_t *xt = (uint32_t *)(panel + (p->sgemm ? p->prows * K : 0));
    uint32_t *wp = xt + (p->dp ? DP_MAX_M * (K / 2) : 0);
    uint8_t *codes = (uint8_t *)(wp + (p->dp ? DP_MAX_M * (K / 2) : 0));
    const uint8_t *wc = (const uint8_t *)w->codes.data + b * w->codes.stride[0] +
                        n_lo * w->codes.stride[1];
    const int copy = w->codes.stride[2] != 1;
    unsigned smin = 255, smax = 0; /* nonzero weights of a block with scale byte s: exponent
                                    * field >= s - 1 */
    if (p->dp)
        weight_scales(w, b, n_lo, rows, nblk, ws, &smin, &smax);
    else
        weight_scales(w, b, n_lo, rows, nblk, ws, NULL, NULL);
    for (int64_t n = 0; copy && n < rows; ++n)
        for (int64_t i = 0; i < K / 2; ++i)
            codes[n * (K / 2) + i] = wc[n * w->codes.stride[1] + i * w->codes.stride[2]];
    mla_mx_rows r = {NULL, K, copy ? codes : wc, copy ? K / 2 : w->codes.stride[1], ws, rows,
                     nblk, out, ldo};
    if (p->dp && smax <= DP_MAX_SCALE && dp_rows(p, b, &r, (int)smin - 1, ad, buf, xt, wp, n_lo))
        return;
    for (int64_t n = 0; p->sgemm && p->prows >= rows && n < rows; ++n)
        p->k.wrow(r.w + n * r.ldw, ws + n * nblk, nblk, panel + n * K);
    for (int64_t m0 = 0; m0 < g->M; m0 += p->mchunk) {
        const int64_t mc = g->M - m0 < p->mchunk ? g->M - m0 : p->mchunk;
        p->k.act(g, p->a4w4, b, m0, mc, ad, buf);
#if defined(MLA_HAVE_OPENBLAS)
        if (p->sgemm) {
            sgemm_rows(p, &r, b, n_lo, m0, mc, ad, panel, out);
            continue;
        }
#endif
        for (int64_t mi = 0; mi < mc;) {
            int mt = MT_MAX;
            while (mt > mc - mi)
                mt /= 2;
            r.a = ad + mi * K;
            p->k.rows(&r, mt);
            store_rows(&g->y, b, m0 + mi, mt, n_lo, rows, out, ldo);
            mi += mt;
        }
    }
}

static mla_status run(mla_context *ctx, const mla_mxfp4_gemm_args *g, int a4w4)
{
    const mla_cpu_isa isa = mla_cpu_isa_of(ctx);
    plan p = {g, a4w4, 0, 0, pick(isa), g->N, 1, 0, 0, 0};
#if defined(MLA_HAVE_OPENBLAS)
    p.sgemm = g->M >= SGEMM_MIN_M;
#endif
#if MLA_CPU_X86
    /* x exact in bf16: a4w4 codes, the round trip, or BF16 x itself */
    p.dp = isa == MLA_CPU_ISA_AVX512 && g->M >= DP_MIN_M && g->M <= DP_MAX_M &&
           (a4w4 || g->prequant || g->x.dtype == MLA_DTYPE_BF16) && mla_cpu_has_bf16(ctx);
#endif
    p.mchunk = g->M < MCHUNK ? g->M : MCHUNK;
    /* Few batches: split the weight rows too (16-row multiples, about
     * MIN_TASKS tasks), so that threads have work. The split is a function
     * of the shape alone, not of the thread count (an OpenBLAS call's shape
     * could change its bits; the tiles' results never depend on it). */
    if (g->B < MIN_TASKS) {
        int64_t want = (MIN_TASKS + g->B - 1) / g->B;
        int64_t chunk = round16((g->N + want - 1) / want);
        p.nchunk = chunk < g->N ? chunk : g->N;
        p.nsplit = (g->N + p.nchunk - 1) / p.nchunk;
    }
    p.prows = round16(PANEL_FLOATS / g->K);
    p.prows = p.prows < p.nchunk ? p.prows : p.nchunk;
    const int64_t tasks = g->B * p.nsplit;
    const int nt =
        mla_cpu_threads(ctx, tasks, mla_sz_sat(mla_sz_mul4(g->B, g->M, g->N, g->K / 16)));
    const int64_t per = scratch_floats(&p);
    float *scratch;
    MLA_TRY(mla_alloc_array(ctx, (void **)&scratch, nt, per, sizeof(float), "x"));
    p.scratch = (size_t)per;
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int64_t t = 0; t < tasks; ++t) {
        int tid = 0;
#if defined(MLA_HAVE_OPENMP)
        tid = omp_get_thread_num();
#endif
        const int64_t b = t / p.nsplit, n_lo = (t % p.nsplit) * p.nchunk;
        const int64_t n_hi = n_lo + p.nchunk < g->N ? n_lo + p.nchunk : g->N;
        run_task(&p, b, n_lo, n_hi, scratch + (size_t)tid * p.scratch);
    }
    free(scratch);
    return MLA_OK;
}

mla_status mla_cpu_gemm_a16wfp4(mla_context *ctx, const mla_mxfp4_gemm_args *g)
{
    return run(ctx, g, 0);
}

mla_status mla_cpu_gemm_a4w4(mla_context *ctx, const mla_mxfp4_gemm_args *g)
{
    return run(ctx, g, 1);
}
