/* CPU RMSNorm and fused QK RMSNorm (MLA.md section 2, step 2), fp32 math:
 *
 *     ss = sum_d x[t, d]^2      (64 lanes: lane l sums d = l, l + 64, ... in
 *                                order; then a fixed pairwise tree)
 *     r  = 1.0f / sqrtf(ss / D + eps)
 *     y[t, d] = fl(fl(x[t, d] * r) * w[d]), then one rounding to y's dtype.
 *
 * Each product and sum is its own fp32 operation (-ffp-contract=off), and the
 * lane structure is written out, so the three ISA copies give the same bits.
 * The reference works in float64; the difference is inside the conformance
 * bound (conformance/bounds.c, conf_norm_rel).
 *
 * A quantized q_out quantizes the fp32 normalized row exactly as
 * mla_cpu_fp8_group_quant (group 128, MLA_FP8_SCALE_AITER) and
 * mla_cpu_mxfp4_quant (MLA_MXFP4_PRODUCTION) would: same bit helpers from
 * core/format_bits.h, same amax rule (the last NaN of an fp8 group).
 *
 * A row is read once into a per-thread fp32 buffer; rows are spread over the
 * threads. In place is safe: a row is read whole before it is written. */
#include <math.h>
#include <stdlib.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "core/checked.h"
#include "cpu/avx512_vec.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"

#define LANES 64 /* four zmm, eight ymm or sixteen xmm accumulators: the same lanes */
#define FP8_GROUP 128
#define MX_BLOCK 32

typedef enum { OUT_FLOAT, OUT_FP8, OUT_FP4 } out_kind;

/* One norm over rows: x [T, D] -> y (float dtype, or quantized with scales). */
typedef struct norm_job {
    const mla_tensor *x, *y, *scales;
    const float *w; /* [D] fp32 */
    float eps;
    out_kind kind;
} norm_job;

/* sum of v[i]^2 in LANES lanes, then the pairwise tree (32, 16, ..., 1 apart). */
MLA_CPU_INLINE float sum_squares(const float *restrict v, int64_t n)
{
    float lane[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; ++l)
            lane[l] += v[i + l] * v[i + l];
    for (int l = 0; i + l < n; ++l)
        lane[l] += v[i + l] * v[i + l];
    for (int w = LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; ++l)
            lane[l] += lane[l + w];
    return lane[0];
}

/* |v| bits of the last NaN among v[0, n) (one is known to be there). */
static uint32_t last_nan(const float *v, int64_t n)
{
    uint32_t a = 0;
    for (int64_t i = n - 1; i >= 0; --i) {
        a = mla_fb_bits(v[i]) & 0x7FFFFFFFu;
        if (a > 0x7F800000u)
            break;
    }
    return a;
}

MLA_CPU_INLINE uint32_t abs_max_bits(const float *restrict v, int64_t n)
{
    uint32_t amax = 0;
    MLA_SIMD_MAX(amax) for (int64_t i = 0; i < n; ++i)
    {
        uint32_t m = mla_fb_bits(v[i]) & 0x7FFFFFFFu;
        amax = m > amax ? m : amax;
    }
    return amax;
}

/* fp8 group 128, aiter rule: s = max(amax, 1e-10) / fp8_max, q = sat(x * fl(1/s)). */
MLA_CPU_INLINE void quant_fp8_row(const float *restrict v, int64_t D, uint8_t *c, int64_t cs,
                                  float *sc, int64_t ss, int fnuz)
{
    for (int64_t g = 0; g < D / FP8_GROUP; ++g) {
        const float *vg = v + g * FP8_GROUP;
        uint32_t amax = abs_max_bits(vg, FP8_GROUP);
        if (amax > 0x7F800000u)
            amax = last_nan(vg, FP8_GROUP);
        const float s = mla_fb_fp8_group_scale(mla_fb_float(amax), MLA_FB_FP8_RULE_AITER, fnuz);
        const float inv = mla_fb_div(1.0f, s);
        uint8_t *cg = c + g * FP8_GROUP * cs;
        if (fnuz) {
            MLA_SIMD for (int i = 0; i < FP8_GROUP; ++i) cg[i * cs] =
                mla_fb_fp8_group_code(vg[i], s, inv, MLA_FB_FP8_RULE_AITER, 1);
        } else {
            MLA_SIMD for (int i = 0; i < FP8_GROUP; ++i) cg[i * cs] =
                mla_fb_fp8_group_code(vg[i], s, inv, MLA_FB_FP8_RULE_AITER, 0);
        }
        sc[g * ss] = s;
    }
}

/* MXFP4 production rule, blocks of 32: code bytes (two values each) and e8m0 scales. */
MLA_CPU_INLINE void quant_fp4_row(const float *restrict v, int64_t D, uint8_t *c, int64_t cs,
                                  uint8_t *sc, int64_t ss)
{
    for (int64_t b = 0; b < D / MX_BLOCK; ++b) {
        const float *vb = v + b * MX_BLOCK;
        const uint32_t amax = abs_max_bits(vb, MX_BLOCK);
        const uint8_t scale = mla_fb_mxfp4_scale_byte(amax, 1);
        const uint32_t mask = mla_fb_mxfp4_code_mask(amax) ? 0xFFu : 0u;
        uint8_t *cb = c + b * (MX_BLOCK / 2) * cs;
        MLA_SIMD for (int j = 0; j < MX_BLOCK / 2; ++j) cb[j * cs] =
            (uint8_t)((mla_fb_mxfp4_code(vb[2 * j], scale, 0xFu) |
                       (mla_fb_mxfp4_code(vb[2 * j + 1], scale, 0xFu) << 4)) &
                      mask);
        sc[b * ss] = scale;
    }
}

/* The fp8 quantizer of a row: quant_fp8_row, or its AVX-512 twin. */
typedef void (*q8_fn)(const float *v, int64_t D, uint8_t *c, int64_t cs, float *sc, int64_t ss,
                      int fnuz);

MLA_CPU_INLINE void norm_rows_body(const norm_job *j, int64_t t0, int64_t t1, float *buf, q8_fn q8)
{
    const mla_tensor *x = j->x, *y = j->y;
    const int64_t D = x->shape[1];
    const size_t xsz = mla_dtype_size(x->dtype), ysz = mla_dtype_size(y->dtype);
    const float *restrict w = j->w;
    for (int64_t t = t0; t < t1; ++t) {
        mla_cpu_load_float((const char *)x->data + t * x->stride[0] * (int64_t)xsz, x->dtype,
                           x->stride[1], D, buf);
        const float r = 1.0f / sqrtf(sum_squares(buf, D) / (float)D + j->eps);
        char *yrow = (char *)y->data + t * y->stride[0] * (int64_t)ysz;
        if (j->kind == OUT_FLOAT && y->dtype == MLA_DTYPE_BF16 && y->stride[1] == 1) {
            uint16_t *o = (uint16_t *)yrow; /* the common case in one pass */
            MLA_SIMD for (int64_t d = 0; d < D; ++d)
            {
                const float xr = buf[d] * r;
                const float v = xr * w[d];
                o[d] = mla_fb_f32_to_bf16(v);
            }
            continue;
        }
        MLA_SIMD for (int64_t d = 0; d < D; ++d)
        {
            const float xr = buf[d] * r;
            buf[d] = xr * w[d];
        }
        if (j->kind == OUT_FLOAT) {
            mla_cpu_store_float(buf, yrow, y->dtype, y->stride[1], D);
        } else if (j->kind == OUT_FP8) {
            float *sc = (float *)j->scales->data + t * j->scales->stride[0];
            const int fnuz = y->dtype == MLA_DTYPE_FP8_E4M3FNUZ;
            if (q8)
                q8(buf, D, (uint8_t *)yrow, y->stride[1], sc, j->scales->stride[1], fnuz);
            else
                quant_fp8_row(buf, D, (uint8_t *)yrow, y->stride[1], sc, j->scales->stride[1],
                              fnuz);
        } else {
            uint8_t *sc = (uint8_t *)j->scales->data + t * j->scales->stride[0];
            quant_fp4_row(buf, D, (uint8_t *)yrow, y->stride[1], sc, j->scales->stride[1]);
        }
    }
}

typedef void (*rows_fn)(const norm_job *, int64_t, int64_t, float *);

static void rows_generic(const norm_job *j, int64_t t0, int64_t t1, float *buf)
{
    norm_rows_body(j, t0, t1, buf, NULL);
}

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void rows_avx2(const norm_job *j, int64_t t0, int64_t t1, float *buf)
{
    norm_rows_body(j, t0, t1, buf, NULL);
}

/* quant_fp8_row in AVX-512: amax as an integer max of |v| bits, codes by
 * mla_v16_to_fp8 of fl(v * inv) (x86's multiply gives mla_fb_mul's NaN; the
 * clamp to the format's max is the saturation itself). */
MLA_TARGET_AVX512 static void quant_fp8_avx512(const float *v, int64_t D, uint8_t *c, int64_t cs,
                                               float *sc, int64_t ss, int fnuz)
{
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
    for (int64_t g = 0; g < D / FP8_GROUP; ++g) {
        const float *vg = v + g * FP8_GROUP;
        __m512i m = _mm512_setzero_si512();
        for (int i = 0; i < FP8_GROUP; i += 16)
            m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_loadu_si512(vg + i), abs_mask));
        uint32_t amax = _mm512_reduce_max_epu32(m);
        if (amax > 0x7F800000u)
            amax = last_nan(vg, FP8_GROUP);
        const float s = mla_fb_fp8_group_scale(mla_fb_float(amax), MLA_FB_FP8_RULE_AITER, fnuz);
        const __m512 inv = _mm512_set1_ps(mla_fb_div(1.0f, s));
        uint8_t *cg = c + g * FP8_GROUP * cs;
        for (int i = 0; i < FP8_GROUP; i += 16) {
            const __m128i q = mla_v16_to_fp8(_mm512_mul_ps(_mm512_loadu_ps(vg + i), inv), fnuz);
            if (cs == 1) {
                _mm_storeu_si128((__m128i *)(cg + i), q);
            } else {
                uint8_t b[16];
                _mm_storeu_si128((__m128i *)b, q);
                for (int k = 0; k < 16; ++k)
                    cg[(i + k) * cs] = b[k];
            }
        }
        sc[g * ss] = s;
    }
}

MLA_TARGET_AVX512 static void rows_avx512(const norm_job *j, int64_t t0, int64_t t1, float *buf)
{
    norm_rows_body(j, t0, t1, buf, quant_fp8_avx512);
}
#endif

/* Runs the norm jobs (one or two, same T) with rows spread over the threads.
 * Scratch: each job's w in fp32, plus one row buffer per thread. */
static mla_status run_jobs(mla_context *ctx, norm_job *jobs, const mla_tensor *const *ws, int n)
{
    const int64_t T = jobs[0].x->shape[0];
    int64_t dmax = 0, wtot = 0, values = 0, bytes = 0;
    for (int i = 0; i < n; ++i) {
        const int64_t D = jobs[i].x->shape[1];
        dmax = D > dmax ? D : dmax;
        wtot = mla_sz_add(wtot, D);
        values = mla_sz_add(values, mla_sz_mul(T, D));
        bytes = mla_sz_add(bytes, mla_sz_mul3(T, D,
                                              (int64_t)(mla_dtype_size(jobs[i].x->dtype) +
                                                        mla_dtype_size(jobs[i].y->dtype))));
    }
    values = mla_sz_sat(values), bytes = mla_sz_sat(bytes);
    const int nt = mla_cpu_threads(ctx, T, bytes < MLA_CPU_ONE_THREAD_BYTES ? 0 : values);
    float *scratch;
    MLA_TRY(mla_alloc_array(ctx, (void **)&scratch, mla_sz_add(wtot, mla_sz_mul(nt, dmax)), 1,
                            sizeof(float), "x"));
    float *wf = scratch;
    for (int i = 0; i < n; ++i) {
        const int64_t D = jobs[i].x->shape[1];
        mla_cpu_load_float(ws[i]->data, ws[i]->dtype, ws[i]->stride[0], D, wf);
        jobs[i].w = wf;
        wf += D;
    }
    rows_fn run = MLA_CPU_PICK(mla_cpu_isa_of(ctx), rows);
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int id = 0, cnt = 1;
#if defined(MLA_HAVE_OPENMP)
        id = omp_get_thread_num();
        cnt = omp_get_num_threads();
#endif
        const int64_t t0 = T * id / cnt, t1 = T * (id + 1) / cnt;
        for (int i = 0; i < n; ++i)
            run(&jobs[i], t0, t1, wf + (int64_t)id * dmax);
    }
    free(scratch);
    return MLA_OK;
}

mla_status mla_cpu_rmsnorm(mla_context *ctx, const mla_rmsnorm_args *a)
{
    norm_job j = {&a->x, &a->y, NULL, NULL, a->eps, OUT_FLOAT};
    const mla_tensor *ws[1] = {&a->w};
    return run_jobs(ctx, &j, ws, 1);
}

mla_status mla_cpu_qk_rmsnorm(mla_context *ctx, const mla_qk_rmsnorm_args *a)
{
    const mla_dtype qd = a->q_out.dtype;
    const out_kind qk = qd == MLA_DTYPE_FP4X2                                          ? OUT_FP4
                        : (qd == MLA_DTYPE_FP8_E4M3FN || qd == MLA_DTYPE_FP8_E4M3FNUZ) ? OUT_FP8
                                                                                       : OUT_FLOAT;
    norm_job j[2] = {{&a->q, &a->q_out, &a->q_scales, NULL, a->q_eps, qk},
                     {&a->kv, &a->kv_out, NULL, NULL, a->kv_eps, OUT_FLOAT}};
    const mla_tensor *ws[2] = {&a->q_w, &a->kv_w};
    return run_jobs(ctx, j, ws, 2);
}
