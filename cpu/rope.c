/* CPU RoPE (MLA.md section 3), bit-identical to the reference: for pair i of a
 * row, with c = cos[pos, i] and s = sin[pos, i] in fp32,
 *
 *     out_a = fl(fl(a * c) - fl(b * s)),   out_b = fl(fl(a * s) + fl(b * c))
 *
 * (interleaved: (a, b) = (x[2i], x[2i+1]); NeoX: (x[i], x[i + R/2])), every
 * product its own fp32 multiply: plain C under -ffp-contract=off, which the
 * compiler vectorizes but may not fuse. One rounding to y's dtype; dims
 * R .. D-1 are copied (converted).
 *
 * Tasks are up to HEADS_PER_TASK heads of one token, spread over the threads;
 * a task loads its token's cos/sin row once. F32 / BF16 rows with unit inner
 * stride take an AVX-512 intrinsics path (same operations, in the same
 * order: separate multiplies and adds/subtracts, never an FMA). In place is safe: a row's values
 * are read into a buffer before any of them is written. */
#include <stdlib.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "core/checked.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"

#include "cpu/avx512_vec.h"
#include "cpu/stream_store.h"

#define HEADS_PER_TASK 64
#define PREFETCH_ROWS 12

MLA_CPU_INLINE void rotate_body(const float *restrict in, const float *restrict c,
                                const float *restrict s, int64_t half, mla_rope_style style,
                                float *restrict out)
{
    if (style == MLA_ROPE_NEOX) {
        MLA_SIMD for (int64_t i = 0; i < half; ++i)
        {
            const float a = in[i], b = in[i + half];
            const float ac = a * c[i], bs = b * s[i], as = a * s[i], bc = b * c[i];
            out[i] = ac - bs;
            out[i + half] = as + bc;
        }
    } else {
        MLA_SIMD for (int64_t i = 0; i < half; ++i)
        {
            const float a = in[2 * i], b = in[2 * i + 1];
            const float ac = a * c[i], bs = b * s[i], as = a * s[i], bc = b * c[i];
            out[2 * i] = ac - bs;
            out[2 * i + 1] = as + bc;
        }
    }
}

MLA_CPU_INLINE int64_t load_index(const mla_tensor *t, int64_t i)
{
    const int64_t off = i * t->stride[0];
    return t->dtype == MLA_DTYPE_I32 ? ((const int32_t *)t->data)[off]
                                     : ((const int64_t *)t->data)[off];
}

/* Rows are short (q_pe: 128 bytes every 384) and the hardware prefetchers do
 * not follow them: rows PREFETCH_ROWS ahead are requested by hand. */
MLA_CPU_INLINE void prefetch_row(const char *p, int64_t bytes, int write)
{
#if defined(__GNUC__)
    for (int64_t b = 0; b < bytes; b += 64)
        write ? __builtin_prefetch(p + b, 1) : __builtin_prefetch(p + b, 0);
#else
    (void)p, (void)bytes, (void)write;
#endif
}

/* Rows (t, h + PREFETCH_ROWS), running on into the next token's heads. */
MLA_CPU_INLINE void prefetch_ahead(const mla_rope_args *a, int64_t t, int64_t h, int y_too,
                                   int64_t xsz, int64_t ysz)
{
    const mla_tensor *x = &a->x, *y = &a->y;
    const int64_t H = x->shape[1], R = a->rope_dim;
    h += PREFETCH_ROWS;
    if (H == 1) /* one row per token (k_pe) */
        t += h, h = 0;
    else if (h >= H) /* no division on the common path */
        t += h / H, h %= H;
    if (t >= x->shape[0])
        return;
    prefetch_row((const char *)x->data + (t * x->stride[0] + h * x->stride[1]) * xsz,
                 R * x->stride[2] * xsz, 0);
    if (y_too)
        prefetch_row((const char *)y->data + (t * y->stride[0] + h * y->stride[1]) * ysz,
                     R * y->stride[2] * ysz, 1);
}

/* Heads [h0, h1) of token t. buf: 3 * R + MLA_CPU_CHUNK floats. */
MLA_CPU_INLINE void task_body(const mla_rope_args *a, int64_t t, int64_t h0, int64_t h1, float *buf)
{
    const mla_tensor *x = &a->x, *y = &a->y;
    const int64_t R = a->rope_dim, half = R / 2, D = x->shape[2];
    const int64_t xsz = (int64_t)mla_dtype_size(x->dtype), ysz = (int64_t)mla_dtype_size(y->dtype);
    float *c = buf, *s = buf + half, *in = buf + R, *out = buf + 2 * R, *rest = buf + 3 * R;
    const int64_t pos = load_index(&a->positions, t);
    mla_cpu_load_float((const float *)a->cos.data + pos * a->cos.stride[0], MLA_DTYPE_F32,
                       a->cos.stride[1], half, c);
    mla_cpu_load_float((const float *)a->sin.data + pos * a->sin.stride[0], MLA_DTYPE_F32,
                       a->sin.stride[1], half, s);
    for (int64_t h = h0; h < h1; ++h) {
        const char *xr = (const char *)x->data + (t * x->stride[0] + h * x->stride[1]) * xsz;
        char *yr = (char *)y->data + (t * y->stride[0] + h * y->stride[1]) * ysz;
        prefetch_ahead(a, t, h, 1, xsz, ysz);
        mla_cpu_load_float(xr, x->dtype, x->stride[2], R, in);
        rotate_body(in, c, s, half, a->style, out);
        mla_cpu_store_float(out, yr, y->dtype, y->stride[2], R);
        for (int64_t d = R; d < D; d += MLA_CPU_CHUNK) {
            const int64_t n = D - d < MLA_CPU_CHUNK ? D - d : MLA_CPU_CHUNK;
            mla_cpu_load_float(xr + d * x->stride[2] * xsz, x->dtype, x->stride[2], n, rest);
            mla_cpu_store_float(rest, yr + d * y->stride[2] * ysz, y->dtype, y->stride[2], n);
        }
    }
}

typedef void (*task_fn)(const mla_rope_args *, int64_t, int64_t, int64_t, float *);

#if MLA_CPU_X86
/* AVX-512 rows of F32 / BF16 with unit inner stride, R % 16 == 0 (NeoX:
 * R % 32 == 0): 16 values per step, the same products and sums as
 * rotate_body. Interleaved pairs stay in place: with P = v * (c0 c0 c1 c1
 * ...) and Q = swap(v) * (s0 s0 s1 s1 ...), even lanes are P - Q (a c - b s)
 * and odd lanes Q + P (a s + b c, operands in the reference's order). */
MLA_AVX512_INLINE __m512 load16(const char *p, int bf16)
{
    return mla_v16_load(p, bf16 ? MLA_V16_BF16 : MLA_V16_F32, 0.0f, 0xFFFF);
}

MLA_AVX512_INLINE void store16(char *p, __m512 v, int bf16) { mla_v16_store(p, v, bf16, 0xFFFF); }

/* store16 by non-temporal stores (p 32-byte aligned; cpu/stream_store.h). */
MLA_AVX512_INLINE void stream16(char *p, __m512 v, int bf16) { mla_cpu_stream16(p, v, bf16); }

static int fast_ok(const mla_rope_args *a)
{
    const mla_tensor *x = &a->x, *y = &a->y;
    const int xf = x->dtype == MLA_DTYPE_F32 || x->dtype == MLA_DTYPE_BF16;
    const int yf = y->dtype == MLA_DTYPE_F32 || y->dtype == MLA_DTYPE_BF16;
    const int64_t m = a->style == MLA_ROPE_NEOX ? 32 : 16;
    return xf && yf && x->stride[2] == 1 && y->stride[2] == 1 && a->rope_dim % m == 0;
}

/* Non-temporal stores of the rotated dims: y's rows span more than
 * MLA_CPU_STREAM_MIN_BYTES (far more than the caches hold, so nothing is lost by not
 * keeping them) and every 16-value group starts 32-byte aligned. */
static int stream_ok(const mla_rope_args *a)
{
    const mla_tensor *y = &a->y;
    const int64_t ysz = (int64_t)mla_dtype_size(y->dtype);
    const int64_t span = (y->shape[0] - 1) * y->stride[0] * ysz;
    return span > MLA_CPU_STREAM_MIN_BYTES && (uintptr_t)y->data % 32 == 0 &&
           (y->stride[0] * ysz) % 32 == 0 && (y->shape[1] == 1 || (y->stride[1] * ysz) % 32 == 0) &&
           (a->rope_dim / 2 * ysz) % 32 == 0;
}

/* task_body for fast_ok() arguments. buf: 3 * R + MLA_CPU_CHUNK floats. */
MLA_TARGET_AVX512 static void task_avx512_fast(const mla_rope_args *a, int64_t t, int64_t h0,
                                               int64_t h1, float *buf)
{
    const mla_tensor *x = &a->x, *y = &a->y;
    const int64_t R = a->rope_dim, half = R / 2, D = x->shape[2];
    const int64_t xsz = (int64_t)mla_dtype_size(x->dtype), ysz = (int64_t)mla_dtype_size(y->dtype);
    const int xb = x->dtype == MLA_DTYPE_BF16, yb = y->dtype == MLA_DTYPE_BF16;
    const int neox = a->style == MLA_ROPE_NEOX, nt = stream_ok(a);
    const int64_t H = x->shape[1], xs1 = x->stride[1] * xsz, ys1 = y->stride[1] * ysz;
    float *c = buf, *s = buf + R, *rest = buf + 2 * R; /* c, s: R values (interleaved: doubled) */
    const int64_t pos = load_index(&a->positions, t);
    const float *cr = (const float *)a->cos.data + pos * a->cos.stride[0];
    const float *sr = (const float *)a->sin.data + pos * a->sin.stride[0];
    if (a->cos.stride[1] == 1 && a->sin.stride[1] == 1 && !neox) { /* 8 pairs at a time */
        const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
        for (int64_t i = 0; i < half; i += 8) { /* half % 8 == 0 (fast_ok) */
            const __m512 cv = _mm512_castps256_ps512(_mm256_loadu_ps(cr + i));
            const __m512 sv = _mm512_castps256_ps512(_mm256_loadu_ps(sr + i));
            _mm512_storeu_ps(c + 2 * i, _mm512_permutexvar_ps(dup, cv));
            _mm512_storeu_ps(s + 2 * i, _mm512_permutexvar_ps(dup, sv));
        }
    } else {
        for (int64_t i = 0; i < half; ++i) {
            const float ci = cr[i * a->cos.stride[1]], si = sr[i * a->sin.stride[1]];
            if (neox)
                c[i] = ci, s[i] = si;
            else
                c[2 * i] = c[2 * i + 1] = ci, s[2 * i] = s[2 * i + 1] = si;
        }
    }
    for (int64_t h = h0; h < h1; ++h) {
        const char *xr = (const char *)x->data + (t * x->stride[0] + h * x->stride[1]) * xsz;
        char *yr = (char *)y->data + (t * y->stride[0] + h * y->stride[1]) * ysz;
        if (h + PREFETCH_ROWS < H) { /* same token: no index arithmetic, no calls */
            prefetch_row(xr + PREFETCH_ROWS * xs1, R * xsz, 0);
            if (!nt)
                prefetch_row(yr + PREFETCH_ROWS * ys1, R * ysz, 1);
        } else {
            prefetch_ahead(a, t, h, !nt, xsz, ysz);
        }
        if (neox) {
            for (int64_t i = 0; i < half; i += 16) {
                const __m512 va = load16(xr + i * xsz, xb), vb = load16(xr + (i + half) * xsz, xb);
                const __m512 vc = _mm512_loadu_ps(c + i), vs = _mm512_loadu_ps(s + i);
                const __m512 oa = _mm512_sub_ps(_mm512_mul_ps(va, vc), _mm512_mul_ps(vb, vs));
                const __m512 ob = _mm512_add_ps(_mm512_mul_ps(va, vs), _mm512_mul_ps(vb, vc));
                if (nt) {
                    stream16(yr + i * ysz, oa, yb);
                    stream16(yr + (i + half) * ysz, ob, yb);
                } else {
                    store16(yr + i * ysz, oa, yb);
                    store16(yr + (i + half) * ysz, ob, yb);
                }
            }
        } else {
            for (int64_t i = 0; i < R; i += 16) {
                const __m512 v = load16(xr + i * xsz, xb);
                const __m512 p = _mm512_mul_ps(v, _mm512_loadu_ps(c + i));
                const __m512 q = _mm512_mul_ps(_mm512_permute_ps(v, 0xB1), _mm512_loadu_ps(s + i));
                const __m512 o = _mm512_mask_add_ps(_mm512_sub_ps(p, q), 0xAAAA, q, p);
                if (nt)
                    stream16(yr + i * ysz, o, yb);
                else
                    store16(yr + i * ysz, o, yb);
            }
        }
        for (int64_t d = R; d < D; d += MLA_CPU_CHUNK) {
            const int64_t n = D - d < MLA_CPU_CHUNK ? D - d : MLA_CPU_CHUNK;
            mla_cpu_load_float(xr + d * xsz, x->dtype, 1, n, rest);
            mla_cpu_store_float(rest, yr + d * ysz, y->dtype, 1, n);
        }
    }
    if (nt) /* the streamed rows are visible before the task counts as done */
        _mm_sfence();
}
#endif

static void task_generic(const mla_rope_args *a, int64_t t, int64_t h0, int64_t h1, float *buf)
{
    task_body(a, t, h0, h1, buf);
}

static void rotate_generic(const float *in, const float *c, const float *s, int64_t half,
                           mla_rope_style style, float *out)
{
    rotate_body(in, c, s, half, style, out);
}

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void task_avx2(const mla_rope_args *a, int64_t t, int64_t h0, int64_t h1,
                                      float *buf)
{
    task_body(a, t, h0, h1, buf);
}

MLA_TARGET_AVX512 static void task_avx512(const mla_rope_args *a, int64_t t, int64_t h0, int64_t h1,
                                          float *buf)
{
    task_body(a, t, h0, h1, buf);
}

MLA_TARGET_AVX2 static void rotate_avx2(const float *in, const float *c, const float *s,
                                        int64_t half, mla_rope_style style, float *out)
{
    rotate_body(in, c, s, half, style, out);
}

MLA_TARGET_AVX512 static void rotate_avx512(const float *in, const float *c, const float *s,
                                            int64_t half, mla_rope_style style, float *out)
{
    rotate_body(in, c, s, half, style, out);
}
#endif

static task_fn pick_task(const mla_rope_args *a, mla_cpu_isa isa)
{
#if MLA_CPU_X86
    if (isa == MLA_CPU_ISA_AVX512)
        return fast_ok(a) ? task_avx512_fast : task_avx512;
    if (isa == MLA_CPU_ISA_AVX2)
        return task_avx2;
#endif
    (void)a, (void)isa;
    return task_generic;
}

mla_cpu_rotate_fn mla_cpu_pick_rotate(mla_cpu_isa isa)
{
    return MLA_CPU_PICK(isa, rotate);
}

mla_status mla_cpu_rope(mla_context *ctx, const mla_rope_args *a)
{
    const int64_t T = a->x.shape[0], H = a->x.shape[1], D = a->x.shape[2];
    const int64_t per_t = (H + HEADS_PER_TASK - 1) / HEADS_PER_TASK, tasks = T * per_t;
    const int64_t buf_len = mla_sz_add(mla_sz_mul(3, a->rope_dim), MLA_CPU_CHUNK);
    const int64_t values = T * H * D; /* y's elements */
    const int64_t bytes = mla_sz_sat(
        mla_sz_mul(values, (int64_t)(mla_dtype_size(a->x.dtype) + mla_dtype_size(a->y.dtype))));
    const int nt = mla_cpu_threads(ctx, tasks, bytes < MLA_CPU_ONE_THREAD_BYTES ? 0 : values);
    float *bufs;
    MLA_TRY(mla_alloc_array(ctx, (void **)&bufs, nt, buf_len, sizeof(float), "x"));
    task_fn run = pick_task(a, mla_cpu_isa_of(ctx));
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int64_t k = 0; k < tasks; ++k) {
        int id = 0;
#if defined(MLA_HAVE_OPENMP)
        id = omp_get_thread_num();
#endif
        const int64_t t = k / per_t, h0 = (k % per_t) * HEADS_PER_TASK;
        run(a, t, h0, H - h0 < HEADS_PER_TASK ? H : h0 + HEADS_PER_TASK, bufs + id * buf_len);
    }
    free(bufs);
    return MLA_OK;
}
