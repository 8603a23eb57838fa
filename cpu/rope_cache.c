/* CPU fused RoPE + concat + cache write (mla_fused_rope_concat_cache),
 * bit-identical to the reference (core/ref/rope_cache.c):
 *
 *     q_cat[t, h, :L] = q_nope[t, h, :],  q_cat[t, h, L:] = RoPE(q_pe[t, h, :], q_pos[t])
 *     for every key token j < Tk: k_rot = RoPE(k_pe[j, :], k_pos[j]);
 *         cache[slots[j]] = [k_nope[j, :] | k_rot] (slot >= 0);  k_pe_out[j, :] = k_rot
 *
 * RoPE is rope.c's rotation (mla_cpu_pick_rotate) and the cache row goes
 * through cache_write.c's writer (mla_cpu_pick_cache_row), so the bytes are
 * those of mla_rope into F32 followed by mla_cache_write. Each value reaches
 * q_cat by one rounding from fp32: F32 / BF16 RNE, or fp8 sat_fp8(fl(v /
 * q_scale)) through mla_fb_div. q_nope may be q_cat's own nope slice: each
 * row is read into a buffer before it is written back.
 * Tasks: up to HEADS_PER_TASK heads of one query token, then runs of
 * KEYS_PER_TASK key tokens, all spread over the threads. */
#include <stdlib.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "core/checked.h"
#include "cpu/avx512_vec.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"
#include "cpu/stream_store.h"

#define HEADS_PER_TASK 16
#define KEYS_PER_TASK 8

/* n values from src (F32 / BF16, unit stride) to q_cat's row at dst (unit
 * stride), rounded as store_q does: an ISA's vector copy, or NULL. */
typedef void (*copyq_fn)(const char *src, mla_dtype sdt, char *dst, mla_dtype ddt, int64_t n,
                         float q_scale, int stream);

typedef struct rc_job {
    const mla_rope_cache_op_args *a;
    mla_cpu_rotate_fn rotate;
    mla_cpu_cache_row_fn write_row;
    copyq_fn copyq;
    int stream; /* copyq may use non-temporal stores (cpu/stream_store.h) */
} rc_job;

MLA_CPU_INLINE int64_t load_index(const mla_tensor *t, int64_t i)
{
    const int64_t off = i * t->stride[0];
    return t->dtype == MLA_DTYPE_I32 ? ((const int32_t *)t->data)[off]
                                     : ((const int64_t *)t->data)[off];
}

/* n values into q_cat's row at p (element stride s). */
MLA_CPU_INLINE void store_q(const float *restrict v, int64_t n, const mla_tensor *qc, char *p,
                            int64_t s, float q_scale)
{
    if (qc->dtype == MLA_DTYPE_FP8_E4M3FN) {
        uint8_t *o = (uint8_t *)p;
        MLA_SIMD for (int64_t i = 0; i < n; ++i) o[i * s] =
            mla_fb_f32_to_e4m3fn(mla_fb_div(v[i], q_scale), 1);
    } else if (qc->dtype == MLA_DTYPE_FP8_E4M3FNUZ) {
        uint8_t *o = (uint8_t *)p;
        MLA_SIMD for (int64_t i = 0; i < n; ++i) o[i * s] =
            mla_fb_f32_to_e4m3fnuz(mla_fb_div(v[i], q_scale), 1);
    } else {
        mla_cpu_store_float(v, p, qc->dtype, s, n);
    }
}

/* Rows (t, h) for h in [h0, h1). buf: 2 R + max(R, MLA_CPU_CHUNK) + R floats. */
MLA_CPU_INLINE void q_body(const rc_job *jb, int64_t t, int64_t h0, int64_t h1, float *buf)
{
    const mla_rope_cache_op_args *a = jb->a;
    const mla_tensor *qn = &a->q_nope, *qp = &a->q_pe, *qc = &a->q_cat;
    const int64_t L = a->desc.kv_lora, R = a->desc.rope, half = R / 2;
    const int64_t nsz = (int64_t)mla_dtype_size(qn->dtype),
                  psz = (int64_t)mla_dtype_size(qp->dtype);
    const int64_t csz = (int64_t)mla_dtype_size(qc->dtype);
    float *c = buf, *s = buf + half, *in = buf + R, *out = buf + 2 * R, *chunk = buf + 3 * R;
    const int64_t pos = load_index(&a->q_pos, t);
    mla_cpu_load_float((const float *)a->cos.data + pos * a->cos.stride[0], MLA_DTYPE_F32,
                       a->cos.stride[1], half, c);
    mla_cpu_load_float((const float *)a->sin.data + pos * a->sin.stride[0], MLA_DTYPE_F32,
                       a->sin.stride[1], half, s);
    for (int64_t h = h0; h < h1; ++h) {
        const char *nr = (const char *)qn->data + (t * qn->stride[0] + h * qn->stride[1]) * nsz;
        char *cr = (char *)qc->data + (t * qc->stride[0] + h * qc->stride[1]) * csz;
        const int fast = jb->copyq && qc->stride[2] == 1;
        if (fast && qn->stride[2] == 1 && qn->dtype != MLA_DTYPE_F16) { /* copyq: F32 / BF16 */
            jb->copyq(nr, qn->dtype, cr, qc->dtype, L, a->q_scale, jb->stream);
        } else {
            for (int64_t i = 0; i < L; i += MLA_CPU_CHUNK) {
                const int64_t n = L - i < MLA_CPU_CHUNK ? L - i : MLA_CPU_CHUNK;
                mla_cpu_load_float(nr + i * qn->stride[2] * nsz, qn->dtype, qn->stride[2], n,
                                   chunk);
                store_q(chunk, n, qc, cr + i * qc->stride[2] * csz, qc->stride[2], a->q_scale);
            }
        }
        mla_cpu_load_float((const char *)qp->data + (t * qp->stride[0] + h * qp->stride[1]) * psz,
                           qp->dtype, qp->stride[2], R, in);
        jb->rotate(in, c, s, half, a->style, out);
        if (fast)
            jb->copyq((const char *)out, MLA_DTYPE_F32, cr + L * csz, qc->dtype, R, a->q_scale,
                      jb->stream);
        else
            store_q(out, R, qc, cr + L * qc->stride[2] * csz, qc->stride[2], a->q_scale);
    }
}

/* Key tokens [j0, j1). buf: L + 3 R floats, then 2 (L + R) bytes of scratch. */
MLA_CPU_INLINE void k_body(const rc_job *jb, int64_t j0, int64_t j1, float *buf)
{
    const mla_rope_cache_op_args *a = jb->a;
    const mla_tensor *kn = &a->k_nope, *kp = &a->k_pe, *ko = &a->k_pe_out;
    const int64_t L = a->desc.kv_lora, R = a->desc.rope, half = R / 2;
    const int64_t nsz = (int64_t)mla_dtype_size(kn->dtype),
                  psz = (int64_t)mla_dtype_size(kp->dtype);
    float *row = buf, *c = buf + L + R, *s = c + half, *in = s + half;
    uint8_t *scratch = (uint8_t *)(in + R);
    for (int64_t j = j0; j < j1; ++j) {
        const int64_t pos = load_index(&a->k_pos, j);
        mla_cpu_load_float((const float *)a->cos.data + pos * a->cos.stride[0], MLA_DTYPE_F32,
                           a->cos.stride[1], half, c);
        mla_cpu_load_float((const float *)a->sin.data + pos * a->sin.stride[0], MLA_DTYPE_F32,
                           a->sin.stride[1], half, s);
        mla_cpu_load_float((const char *)kp->data + j * kp->stride[0] * psz, kp->dtype,
                           kp->stride[1], R, in);
        jb->rotate(in, c, s, half, a->style, row + L);
        if (ko->data)
            mla_cpu_store_float(
                row + L, (char *)ko->data + j * ko->stride[0] * (int64_t)mla_dtype_size(ko->dtype),
                ko->dtype, ko->stride[1], R);
        const int64_t slot = load_index(&a->slots, j);
        if (slot < 0) /* "do not write" */
            continue;
        mla_cpu_load_float((const char *)kn->data + j * kn->stride[0] * nsz, kn->dtype,
                           kn->stride[1], L, row);
        jb->write_row(&a->desc, &a->cache, slot, row, scratch);
    }
}

typedef void (*q_fn)(const rc_job *, int64_t, int64_t, int64_t, float *);
typedef void (*k_fn)(const rc_job *, int64_t, int64_t, float *);

static void q_generic(const rc_job *jb, int64_t t, int64_t h0, int64_t h1, float *buf)
{
    q_body(jb, t, h0, h1, buf);
}

static void k_generic(const rc_job *jb, int64_t j0, int64_t j1, float *buf)
{
    k_body(jb, j0, j1, buf);
}

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void q_avx2(const rc_job *jb, int64_t t, int64_t h0, int64_t h1, float *buf)
{
    q_body(jb, t, h0, h1, buf);
}

MLA_TARGET_AVX2 static void k_avx2(const rc_job *jb, int64_t j0, int64_t j1, float *buf)
{
    k_body(jb, j0, j1, buf);
}

/* store_q in AVX-512: BF16 by mla_v16_store (mla_fb_f32_to_bf16), fp8 by
 * vdivps (mla_fb_div's NaN choice) and mla_v16_to_fp8. stream: by
 * non-temporal stores where dst is 32-byte aligned and n a multiple of 16. */
MLA_TARGET_AVX512 static void copyq_avx512(const char *src, mla_dtype sdt, char *dst, mla_dtype ddt,
                                           int64_t n, float q_scale, int stream)
{
    const int sk = sdt == MLA_DTYPE_BF16 ? MLA_V16_BF16 : MLA_V16_F32;
    const int64_t ssz = sdt == MLA_DTYPE_BF16 ? 2 : 4;
    const __m512 qs = _mm512_set1_ps(q_scale);
    if (stream && n % 16 == 0 && (uintptr_t)dst % 32 == 0) {
        for (int64_t i = 0; i < n; i += 16) {
            const __m512 v = sk == MLA_V16_BF16
                                 ? mla_v16_load(src + i * ssz, MLA_V16_BF16, 0.0f, 0xFFFF)
                                 : mla_v16_load(src + i * ssz, MLA_V16_F32, 0.0f, 0xFFFF);
            if (ddt == MLA_DTYPE_BF16 || ddt == MLA_DTYPE_F32)
                mla_cpu_stream16(dst + i * (ddt == MLA_DTYPE_BF16 ? 2 : 4), v,
                                 ddt == MLA_DTYPE_BF16);
            else
                _mm_stream_si128(
                    (__m128i *)(dst + i),
                    mla_v16_to_fp8(_mm512_div_ps(v, qs), ddt == MLA_DTYPE_FP8_E4M3FNUZ));
        }
        return;
    }
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = mla_v16_mask(n - i);
        const __m512 v = sk == MLA_V16_BF16 ? mla_v16_load(src + i * ssz, MLA_V16_BF16, 0.0f, m)
                                            : mla_v16_load(src + i * ssz, MLA_V16_F32, 0.0f, m);
        if (ddt == MLA_DTYPE_BF16 || ddt == MLA_DTYPE_F32)
            mla_v16_store(dst + i * (ddt == MLA_DTYPE_BF16 ? 2 : 4), v, ddt == MLA_DTYPE_BF16, m);
        else
            _mm_mask_storeu_epi8(
                dst + i, m, mla_v16_to_fp8(_mm512_div_ps(v, qs), ddt == MLA_DTYPE_FP8_E4M3FNUZ));
    }
}

MLA_TARGET_AVX512 static void q_avx512(const rc_job *jb, int64_t t, int64_t h0, int64_t h1,
                                       float *buf)
{
    q_body(jb, t, h0, h1, buf);
    if (jb->stream) /* the streamed rows are visible before the task counts as done */
        _mm_sfence();
}

MLA_TARGET_AVX512 static void k_avx512(const rc_job *jb, int64_t j0, int64_t j1, float *buf)
{
    k_body(jb, j0, j1, buf);
}
#endif

mla_status mla_cpu_rope_cache(mla_context *ctx, const mla_rope_cache_op_args *a)
{
    const int64_t T = a->q_nope.shape[0], H = a->q_nope.shape[1], Tk = a->k_nope.shape[0];
    const int64_t L = a->desc.kv_lora, R = a->desc.rope;
    const int64_t per_t = (H + HEADS_PER_TASK - 1) / HEADS_PER_TASK, qtasks = T * per_t;
    const int64_t ktasks = (Tk + KEYS_PER_TASK - 1) / KEYS_PER_TASK;
    /* per thread: q needs 3 R + CHUNK floats; k needs L + 3 R floats + 2 (L + R) bytes */
    const int64_t per_thread =
        mla_sz_add(mla_sz_add(L, mla_sz_mul(R, 4)), MLA_CPU_CHUNK + (L + R) / 2 + 1);
    const int64_t values = mla_sz_sat(mla_sz_mul(mla_sz_add(T * H, Tk), L + R));
    const int64_t bytes = mla_sz_sat(mla_sz_mul(
        values, (int64_t)(mla_dtype_size(a->q_nope.dtype) + mla_dtype_size(a->q_cat.dtype))));
    const int nt =
        mla_cpu_threads(ctx, qtasks + ktasks, bytes < MLA_CPU_ONE_THREAD_BYTES ? 0 : values);
    float *bufs;
    MLA_TRY(mla_alloc_array(ctx, (void **)&bufs, nt, per_thread, sizeof(float), "cache_desc"));
    const mla_cpu_isa isa = mla_cpu_isa_of(ctx);
    rc_job jb = {a, mla_cpu_pick_rotate(isa), mla_cpu_pick_cache_row(isa), NULL, 0};
    q_fn qrun = q_generic;
    k_fn krun = k_generic;
#if MLA_CPU_X86
    if (isa == MLA_CPU_ISA_AVX512) {
        const mla_tensor *qc = &a->q_cat;
        qrun = q_avx512, krun = k_avx512, jb.copyq = copyq_avx512;
        jb.stream = T > 1 && (T - 1) * qc->stride[0] * (int64_t)mla_dtype_size(qc->dtype) >
                                 MLA_CPU_STREAM_MIN_BYTES;
    } else if (isa == MLA_CPU_ISA_AVX2)
        qrun = q_avx2, krun = k_avx2;
#endif
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int64_t k = 0; k < qtasks + ktasks; ++k) {
        int id = 0;
#if defined(MLA_HAVE_OPENMP)
        id = omp_get_thread_num();
#endif
        float *buf = bufs + id * per_thread;
        if (k < qtasks) {
            const int64_t t = k / per_t, h0 = (k % per_t) * HEADS_PER_TASK;
            qrun(&jb, t, h0, H - h0 < HEADS_PER_TASK ? H : h0 + HEADS_PER_TASK, buf);
        } else {
            const int64_t j0 = (k - qtasks) * KEYS_PER_TASK;
            krun(&jb, j0, Tk - j0 < KEYS_PER_TASK ? Tk : j0 + KEYS_PER_TASK, buf);
        }
    }
    free(bufs);
    return MLA_OK;
}
