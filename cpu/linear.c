/* CPU projection (mla_linear): y [T, N] = x [T, K] @ W^T with fp32
 * accumulation; W [N, K] bf16, or fp8 with DeepSeek's 128 x 128 block scales
 * (a weight is fl(code * scale), one fp32 rounding), one rounding to y.
 *
 * A dot-product kernel (cpu/linear_kernel.h): a micro-kernel accumulates MT
 * tokens x NR rows of W in LANES-wide partial sums (lane l holds the k with
 * k % 16 == l, in k order), kept across k chunks in a per-task buffer; at the
 * end the lanes are added in a fixed tree. Each output is computed by one
 * thread in that order whatever the blocking, so the bits do not depend on
 * the thread count. The AVX-512 kernel reads W where it lies (bf16, fp8
 * through the folded scale) and uses FMA; the portable ones multiply a
 * decoded fp32 copy of the W rows, then add (the AVX2 one also reads bf16 W
 * in place when few tokens make the W stream the cost).
 *
 * With AVX512-BF16 and bf16 x (T >= DP_MIN_T), micro-tiles run vdpbf16ps
 * instead (cpu/linear_kernel_bf16.c): two exact products per lane per step,
 * fp32 adds, twice the FMA rate. bf16 W is read in place; fp8 W is decoded
 * per tile to its exact bf16 codes, and each 128-value block's sum is added
 * times the block scale by one FMA. A tile takes that path only when the
 * exponents of its x and W values rule out the instruction's subnormal
 * flushing (mla_cpu_dp_safe), so its result is the exact fp32 summation of
 * its own (pairwise) order; else the FMA kernel.
 *
 * Blocking: up to KFULL_MAX_T tokens, W rows stream once, whole (the weight
 * bandwidth case), in tasks of NS rows; above, tasks are TB tokens x NS
 * rows and k runs in chunks of KC shared by all token groups (K up to
 * KFULL_MAX_K is one chunk). The portable kernels decode a task's NS rows
 * once and sweep all tokens over them.
 *
 * (OpenBLAS is not used: a panel-decode + cblas_sgemm path was slower than
 * this kernel on DeepSeek-V3 shapes at T >= 128.)
 *
 * x is copied to fp32 rows whose stride is not a multiple of 4 KiB (rows a
 * page apart share L1 sets). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "core/checked.h"
#include "core/format_bits.h"
#include "cpu/linear_kernel.h"

#define NS 48         /* W rows per task, a multiple of NR */
#define TB 64         /* tokens per task, a multiple of MT */
#define KC 1024       /* k values per chunk when many tokens share a W tile */
#define KFULL_MAX_K 2048 /* rows up to this long are never chunked */
#define KFULL_MAX_T 32   /* up to this T, W rows stream once, whole */
#define DP_MIN_T 4       /* vdpbf16ps from this T on (below, the weight stream bounds the
                          * time and the exponent scan would be a second pass) */

/* y[t, n] = v, rounded once to y's dtype (F32 or BF16). */
static void store_y(const mla_tensor *y, int64_t t, int64_t n, float v)
{
    const int64_t off = t * y->stride[0] + n * y->stride[1];
    if (y->dtype == MLA_DTYPE_F32)
        ((float *)y->data)[off] = v;
    else
        ((uint16_t *)y->data)[off] = mla_fb_f32_to_bf16(v);
}

/* Everything a task needs. */
typedef struct lin_run {
    const mla_linear_args *a;
    const lin_fns *f;
    const float *x;    /* fp32 [T, K], row stride ldx */
    int64_t ldx;
    const float *sp;   /* direct fp8: folded scales (mla_v16_fp8_fold), [nb, kb] */
    int64_t sp_ld;
    int direct;        /* the micro-kernel reads W itself */
    int64_t kcs;       /* k chunk */
    int64_t ldw;       /* row stride of decoded W rows */
    const uint16_t *xb; /* vdpbf16ps: x as bf16 rows (stride ldxb), and the */
    int64_t ldxb;       /* smallest exponent field of each token group's */
    const uint8_t *xe;  /* nonzero values (xe[t / MT]); NULL: not this path */
    int dp8;            /* fp8 W through exact bf16 codes (ukr_dp8) */
    int code_exp;       /* the exponent field of the smallest nonzero fp8 code */
} lin_run;

/* W rows [nb, nb + nr) from k0 on, as the micro-kernel reads them: straight
 * from W (direct), or from the task's decoded rows wrows (W rows n0 .. in
 * fp32, row stride ldw). Missing rows repeat row 0 (their sums are never
 * stored). */
static lin_wtile make_tile(const lin_run *r, int64_t nb, int64_t nr, int64_t k0,
                           const float *wrows, int64_t n0)
{
    const mla_tensor *w = &r->a->w;
    lin_wtile t;
    t.k0 = k0;
    t.ahead = 0;
    if (!r->direct) {
        t.kind = MLA_V16_F32;
        t.ahead = NR * r->ldw * (int64_t)sizeof(float);
        for (int j = 0; j < NR; ++j)
            t.row[j] = wrows + (nb - n0 + (j < nr ? j : 0)) * r->ldw + k0, t.s[j] = NULL;
        return t;
    }
    t.kind = mla_v16_kind_of(w->dtype);
    const int64_t sz = (int64_t)mla_dtype_size(w->dtype);
    t.ahead = NR * w->stride[0] * sz; /* the next micro-tile's rows */
    for (int j = 0; j < NR; ++j) {
        const int64_t n = nb + (j < nr ? j : 0);
        t.row[j] = (const char *)w->data + (n * w->stride[0] + k0) * sz;
        t.s[j] = r->sp ? r->sp + (n / WBLOCK) * r->sp_ld : NULL;
    }
    return t;
}

/* The smallest exponent field of the nonzero values of W rows [nb, nb + nr)
 * (bf16, unit stride: the vdpbf16ps path). */
static int w_min_exp(const lin_run *r, int64_t nb, int64_t nr)
{
    const mla_tensor *w = &r->a->w;
    int m = 0xFF;
    for (int64_t j = 0; j < nr; ++j) {
        const int e = r->f->min_exp((const uint16_t *)w->data + (nb + j) * w->stride[0],
                                    w->shape[1]);
        m = e < m ? e : m;
    }
    return m;
}

/* fp8 W rows [nb, nb + nr), values [k0, k0 + kc), as exact bf16 rows of
 * tile (stride kcs + 2 LANES), and each row's scales from block k0 / WBLOCK. */
static void dp8_tile(const lin_run *r, int64_t nb, int64_t nr, int64_t k0, int64_t kc,
                     uint16_t *tile, const float **s)
{
    const mla_tensor *w = &r->a->w, *sc = &r->a->w_scale;
    for (int j = 0; j < NR; ++j) {
        const int64_t n = nb + (j < nr ? j : 0);
        if (j < nr)
            r->f->fp8_to_bf16((const uint8_t *)w->data + n * w->stride[0] + k0, kc,
                              w->dtype == MLA_DTYPE_FP8_E4M3FNUZ, tile + j * (r->kcs + 2 * LANES));
        else
            memcpy(tile + j * (r->kcs + 2 * LANES), tile, (size_t)kc * sizeof(uint16_t));
        s[j] = (const float *)sc->data + (n / WBLOCK) * sc->stride[0] + (k0 / WBLOCK) * sc->stride[1];
    }
}

/* One micro-tile of fp8 W by ukr_dp8, in halves of MT / 2 tokens. */
static void run_dp8(const lin_run *r, int64_t tg, int mt, int64_t k0, int64_t kc,
                    const uint16_t *tile, const float *const *s, float *lanes, float *sums)
{
    for (int h = 0; h < mt; h += MT / 2) {
        const int n = mt - h < MT / 2 ? mt - h : MT / 2;
        r->f->ukr_dp8(r->xb + (tg + h) * r->ldxb + k0, r->ldxb, n, tile, r->kcs + 2 * LANES, s,
                      r->a->w_scale.stride[1], kc, lanes + h * NR * LANES, k0 == 0,
                      sums ? sums + h * NR : NULL);
    }
}

/* Tokens [t0, t1) x W rows [n0, n1); part: the lanes of every micro-tile,
 * then (dp8) a bf16 tile of NR rows. */
static void own_block(const lin_run *r, int64_t t0, int64_t t1, int64_t n0, int64_t n1,
                      const float *wrows, float *part)
{
    uint16_t *tile = (uint16_t *)(part + (NS / NR) * (TB / MT) * MT * NR * LANES);
    const float *s8[NR];
    const int64_t K = r->a->x.shape[1], groups = (t1 - t0 + MT - 1) / MT;
    uint8_t we[NS / NR]; /* w_min_exp of each row block (vdpbf16ps path) */
    for (int64_t k0 = 0; k0 < K; k0 += r->kcs) {
        const int64_t kc = K - k0 < r->kcs ? K - k0 : r->kcs;
        for (int64_t nb = n0, bi = 0; nb < n1; nb += NR, ++bi) {
            const int64_t nr = n1 - nb < NR ? n1 - nb : NR;
            const lin_wtile wt = make_tile(r, nb, nr, k0, wrows, n0);
            if (r->dp8)
                dp8_tile(r, nb, nr, k0, kc, tile, s8);
            else if (r->xe && k0 == 0) /* once per block of rows, for all its chunks */
                we[bi] = (uint8_t)w_min_exp(r, nb, nr);
            for (int64_t tg = t0, gi = 0; tg < t1; tg += MT, ++gi) {
                const int mt = (int)(t1 - tg < MT ? t1 - tg : MT);
                float *lanes = part + (bi * groups + gi) * (MT * NR * LANES), sums[MT * NR];
                const int last = k0 + kc == K;
                if (r->dp8 && mla_cpu_dp_safe(r->xe[tg / MT], r->code_exp))
                    run_dp8(r, tg, mt, k0, kc, tile, s8, lanes, last ? sums : NULL);
                else if (r->xe && !r->dp8 && mla_cpu_dp_safe(r->xe[tg / MT], we[bi]))
                    r->f->ukr_dp(r->xb + tg * r->ldxb + k0, r->ldxb, mt, &wt, kc, lanes, k0 == 0,
                                 last ? sums : NULL);
                else
                    r->f->ukr(r->x + tg * r->ldx + k0, r->ldx, mt, &wt, kc, lanes, k0 == 0,
                              last ? sums : NULL);
                if (!last)
                    continue;
                for (int t = 0; t < mt; ++t)
                    for (int64_t j = 0; j < nr; ++j)
                        store_y(&r->a->y, tg + t, nb + j, sums[t * NR + j]);
            }
        }
    }
}

/* Task k: direct, TB tokens x NS rows; else NS rows decoded once (into buf)
 * and all tokens, TB at a time. */
static void own_task(const lin_run *r, int64_t k, float *buf)
{
    const int64_t T = r->a->x.shape[0], K = r->a->x.shape[1], N = r->a->w.shape[0];
    const int64_t tn = (N + NS - 1) / NS, n0 = (k % tn) * NS, n1 = N - n0 < NS ? N : n0 + NS;
    if (r->direct) {
        const int64_t t0 = (k / tn) * TB;
        own_block(r, t0, T - t0 < TB ? T : t0 + TB, n0, n1, NULL, buf);
        return;
    }
    r->f->decode(r->a, n0, n1 - n0, 0, K, buf, r->ldw);
    for (int64_t t0 = 0; t0 < T; t0 += TB)
        own_block(r, t0, T - t0 < TB ? T : t0 + TB, n0, n1, buf, buf + NS * r->ldw);
}

/* The folded scales for the direct fp8 kernel, or NULL when one is too large
 * for the fold to be exact (|s| * 2^8 must not overflow). */
static float *fp8_fold(const mla_linear_args *a)
{
    const mla_tensor *s = &a->w_scale;
    const int64_t nb = s->shape[0], kb = s->shape[1];
    const mla_v16_kind kind = mla_v16_kind_of(a->w.dtype);
    size_t bytes;
    float *sp = mla_ck_bytes(nb, kb, sizeof(float), &bytes) ? malloc(bytes) : NULL;
    if (!sp)
        return NULL;
    for (int64_t i = 0; i < nb; ++i)
        for (int64_t j = 0; j < kb; ++j) {
            const float v = ((const float *)s->data)[i * s->stride[0] + j * s->stride[1]];
            if (isfinite(v) && !(fabsf(v) < 0x1p+100f)) {
                free(sp);
                return NULL;
            }
            sp[i * kb + j] = mla_v16_fp8_fold(kind, v); /* exact: no overflow */
        }
    return sp;
}

static void own_task_k(const void *arg, int64_t k, float *buf) { own_task(arg, k, buf); }

static mla_status own_path(mla_context *ctx, lin_run *r)
{
    const mla_linear_args *a = r->a;
    const int64_t T = a->x.shape[0], K = a->x.shape[1], N = a->w.shape[0];
    float *sp = NULL;
    r->direct = (r->f->direct || (a->w.dtype == MLA_DTYPE_BF16 && T <= r->f->bf16_direct_t)) &&
                a->w.stride[1] == 1;
    if (r->direct && a->w.dtype != MLA_DTYPE_BF16) {
        sp = fp8_fold(a);
        r->direct = sp != NULL;
        r->sp = sp, r->sp_ld = a->w_scale.shape[1];
    }
    if (!r->direct) /* the vdpbf16ps kernels read W in place too */
        r->xe = NULL, r->dp8 = 0;
    /* few tokens: W rows stream once, whole; else chunks shared by the groups */
    r->kcs = (r->direct && T <= KFULL_MAX_T) || K <= KFULL_MAX_K ? K : KC;
    r->ldw = K + LANES; /* decoded rows: a stride that is no multiple of 4 KiB */
    r->ldw += (r->ldw * 4) % 4096 == 0 ? LANES : 0;
    const int64_t tn = (N + NS - 1) / NS, tasks = r->direct ? (T + TB - 1) / TB * tn : tn;
    const int nt = mla_cpu_threads(ctx, tasks, mla_sz_sat(mla_sz_mul3(T, N, K)) / 64);
    const int64_t per = mla_sz_add(
        mla_sz_add(r->direct ? 0 : mla_sz_mul(NS, r->ldw), (NS / NR) * (TB / MT) * MT * NR * LANES),
        mla_sz_add(mla_sz_mul(NR, mla_sz_add(r->kcs, 2 * LANES)) / 2, 1)); /* the dp8 tile */
    const mla_status st = mla_cpu_run_tasks(ctx, nt, tasks, per, "w", own_task_k, r);
    free(sp);
    return st;
}

mla_status mla_cpu_linear(mla_context *ctx, const mla_linear_args *a)
{
    const int64_t T = a->x.shape[0], K = a->x.shape[1];
    if (K == 0) { /* empty sums */
        for (int64_t t = 0; t < T; ++t)
            for (int64_t n = 0; n < a->w.shape[0]; ++n)
                store_y(&a->y, t, n, 0.0f);
        return MLA_OK;
    }
    const lin_fns *fns = mla_cpu_linear_fns(mla_cpu_isa_of(ctx), mla_cpu_has_bf16(ctx));
    lin_run r = {a, fns, NULL, 0, NULL, 0, 0, 0, 0, NULL, 0, NULL, 0, 0};
    /* row stride: K rounded up to LANES, plus LANES when that is a multiple of 4 KiB */
    int64_t ldx = mla_sz_round_up(K, LANES);
    ldx = ldx >= 0 && ldx % 1024 == 0 ? mla_sz_add(ldx, LANES) : ldx; /* 4 KiB rows */
    float *xf;
    MLA_TRY(mla_alloc_array(ctx, (void **)&xf, T, ldx, sizeof(float), "x"));
    const int nt = mla_cpu_threads(ctx, T, mla_sz_sat(mla_sz_mul(T, K)));
    (void)nt;
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int64_t t = 0; t < T; t += 8)
        r.f->pack(&a->x, t, T - t < 8 ? T : t + 8, xf, ldx);
    r.x = xf, r.ldx = ldx;
    uint16_t *xb = NULL;
    uint8_t *xe = NULL;
    const int wbf16 = a->w.dtype == MLA_DTYPE_BF16;
    if (r.f->ukr_dp && T >= DP_MIN_T && a->x.dtype == MLA_DTYPE_BF16 && a->w.stride[1] == 1) {
        int64_t ldxb = (K + 2 * LANES - 1) / (2 * LANES) * (2 * LANES); /* <= ldx: fits */
        ldxb += (ldxb * 2) % 4096 == 0 ? 2 * LANES : 0;
        size_t xbb, xeb;
        xb = mla_ck_bytes(T, ldxb, sizeof(uint16_t), &xbb) ? malloc(xbb) : NULL;
        xe = mla_ck_bytes(mla_sz_ceil_div(T, MT), 1, 1, &xeb) ? malloc(xeb) : NULL;
        if (xb && xe) { /* else the fp32 path */
            for (int64_t t = 0; t < T; ++t) {
                const uint16_t *src = (const uint16_t *)a->x.data + t * a->x.stride[0];
                for (int64_t k = 0; k < K; ++k)
                    xb[t * ldxb + k] = src[k * a->x.stride[1]];
                const int e = r.f->min_exp(xb + t * ldxb, K);
                if (t % MT == 0 || e < xe[t / MT])
                    xe[t / MT] = (uint8_t)e;
            }
            r.xb = xb, r.ldxb = ldxb, r.xe = xe;
            r.dp8 = !wbf16; /* fp8 codes: down to 2^-9 (e4m3fn) or 2^-10 (e4m3fnuz) */
            r.code_exp = a->w.dtype == MLA_DTYPE_FP8_E4M3FNUZ ? 117 : 118;
        }
    }
    const mla_status st = own_path(ctx, &r);
    free(xf);
    free(xb);
    free(xe);
    return st;
}
