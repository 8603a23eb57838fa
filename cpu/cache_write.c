/* CPU latent cache writer (MLA.md section 4), byte-identical to the reference
 * (core/ref/cache.c): offsets from core/ref/cache_layout.h, values from the
 * fp32 value v of each input through core/format_bits.h:
 *
 *     BF16:                 RNE(v)
 *     fp8 NORMAL/SHUFFLED:  sat_fp8(fl(v / k_scale))
 *     FP8_SCALED, per 128 nope dims: s = 2^ceil(log2(max(fl(amax / fp8_max), 1e-4)))
 *                           (the floor after the division; amax keeps the last
 *                           NaN, as the reference's scan does), values
 *                           sat_fp8(fl(v / s)), s as fp32; rope dims RNE(v) bf16.
 *
 * fp8_max is 448 (e4m3fn) or 224 (e4m3fnuz). Divisions go through
 * mla_fb_div, so a NaN's sign (the only part of it an fp8 code keeps) is the
 * reference's. A token's row is encoded into a contiguous element buffer in
 * NORMAL order, then placed: one copy (NORMAL), 16-byte tile rows
 * (SHUFFLED), or field by field (FP8_SCALED). Tokens are spread over the
 * threads; validated slots are distinct, so no two tasks write one row. */
#include <stdlib.h>
#include <string.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "core/checked.h"
#include "core/ref/cache_layout.h"
#include "cpu/avx512_vec.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the CPU cache kernels store multi-byte fields in host order: little-endian hosts only"
#endif

#define TOKENS_PER_TASK 8

/* fp8 codes sat_fp8(fl(row[i] / div)), i < n: an ISA's vector twin of the
 * plain loops below (NULL: those loops). */
typedef void (*enc8_fn)(const float *row, int64_t n, float div, int fnuz, uint8_t *out);

/* n values of row as cache elements of dtype dt (fp8 divided by k_scale). */
MLA_CPU_INLINE void encode(const float *restrict row, int64_t n, mla_dtype dt, float k_scale,
                           void *restrict out, enc8_fn enc8)
{
    if (dt != MLA_DTYPE_BF16 && enc8) {
        enc8(row, n, k_scale, dt == MLA_DTYPE_FP8_E4M3FNUZ, (uint8_t *)out);
    } else if (dt == MLA_DTYPE_BF16) {
        uint16_t *o = (uint16_t *)out;
        MLA_SIMD for (int64_t i = 0; i < n; ++i) o[i] = mla_fb_f32_to_bf16(row[i]);
    } else if (dt == MLA_DTYPE_FP8_E4M3FN) {
        uint8_t *o = (uint8_t *)out;
        MLA_SIMD for (int64_t i = 0; i < n; ++i) o[i] =
            mla_fb_f32_to_e4m3fn(mla_fb_div(row[i], k_scale), 1);
    } else {
        uint8_t *o = (uint8_t *)out;
        MLA_SIMD for (int64_t i = 0; i < n; ++i) o[i] =
            mla_fb_f32_to_e4m3fnuz(mla_fb_div(row[i], k_scale), 1);
    }
}

/* The FP8_SCALED scale of 128 values (formula in the header comment). */
MLA_CPU_INLINE float group_scale(const float *restrict v, int fnuz)
{
    uint32_t amax = 0;
    MLA_SIMD_MAX(amax) for (int i = 0; i < MLA_CL_SCALE_GROUP; ++i)
    {
        uint32_t m = mla_fb_bits(v[i]) & 0x7FFFFFFFu;
        amax = m > amax ? m : amax;
    }
    if (amax > 0x7F800000u) /* a NaN: the reference keeps the last one */
        for (int i = MLA_CL_SCALE_GROUP - 1; i >= 0; --i) {
            amax = mla_fb_bits(v[i]) & 0x7FFFFFFFu;
            if (amax > 0x7F800000u)
                break;
        }
    const float q = mla_fb_div(mla_fb_float(amax), fnuz ? 224.0f : 448.0f);
    return mla_fb_pow2_ceil(mla_fb_floor_pos(q, 1e-4f));
}

MLA_CPU_INLINE void write_fp8_scaled(const mla_cache_desc *d, uint8_t *blk, int64_t t,
                                     const float *restrict row, void *scratch, enc8_fn enc8)
{
    const int64_t L = d->kv_lora, R = d->rope;
    for (int64_t g = 0; g < L / MLA_CL_SCALE_GROUP; ++g) {
        const float *v = row + g * MLA_CL_SCALE_GROUP;
        const float s = group_scale(v, d->dtype == MLA_DTYPE_FP8_E4M3FNUZ);
        memcpy(blk + mla_cl_fp8s_scale_byte(t, g, L, R), &s, sizeof s);
        encode(v, MLA_CL_SCALE_GROUP, d->dtype, s,
               blk + mla_cl_fp8s_value_byte(t, g * MLA_CL_SCALE_GROUP, L, R), enc8);
    }
    encode(row + L, R, MLA_DTYPE_BF16, 1.0f, scratch, NULL);
    memcpy(blk + mla_cl_fp8s_rope_byte(t, 0, L, R), scratch, (size_t)(2 * R));
}

MLA_CPU_INLINE void write_row_body(const mla_cache_desc *d, const mla_tensor *cache, int64_t slot,
                                   const float *row, uint8_t *scratch, enc8_fn enc8)
{
    const int64_t L = d->kv_lora, R = d->rope, bs = d->block_size;
    uint8_t *blk = (uint8_t *)cache->data + mla_cl_slot_block(slot, bs) * cache->stride[0];
    const int64_t t = mla_cl_slot_token(slot, bs);
    if (d->layout == MLA_CACHE_FP8_SCALED) {
        write_fp8_scaled(d, blk, t, row, scratch, enc8);
        return;
    }
    /* Through the scratch row: the cache's bytes need not be 2-byte aligned. */
    const int64_t eb = (int64_t)mla_dtype_size(d->dtype);
    encode(row, L + R, d->dtype, d->k_scale, scratch, enc8);
    if (d->layout == MLA_CACHE_NORMAL) {
        memcpy(blk + mla_cl_elem_byte(MLA_CL_NORMAL, t, 0, L, R, bs, eb), scratch,
               (size_t)((L + R) * eb));
        return;
    }
    const int64_t K = mla_cl_shuffle_k(eb); /* L and R are multiples of K: validated */
    for (int64_t i = 0; i < L + R; i += K)
        memcpy(blk + mla_cl_elem_byte(MLA_CL_SHUFFLED, t, i, L, R, bs, eb), scratch + i * eb,
               MLA_CL_TILE_BYTES);
}

/* Tokens [j0, j1) of the op: row = [k_nope | k_pe] in fp32, then the writer. */
MLA_CPU_INLINE void tokens_body(const mla_cache_write_args *a, int64_t j0, int64_t j1, float *row,
                                uint8_t *scratch, enc8_fn enc8)
{
    const int64_t L = a->desc.kv_lora, R = a->desc.rope;
    const mla_tensor *kn = &a->k_nope, *kp = &a->k_pe;
    const int64_t nsz = (int64_t)mla_dtype_size(kn->dtype),
                  psz = (int64_t)mla_dtype_size(kp->dtype);
    for (int64_t j = j0; j < j1; ++j) {
        const int64_t off = j * a->slots.stride[0];
        const int64_t slot = a->slots.dtype == MLA_DTYPE_I32
                                 ? ((const int32_t *)a->slots.data)[off]
                                 : ((const int64_t *)a->slots.data)[off];
        if (slot < 0) /* "do not write" */
            continue;
        mla_cpu_load_float((const char *)kn->data + j * kn->stride[0] * nsz, kn->dtype,
                           kn->stride[1], L, row);
        mla_cpu_load_float((const char *)kp->data + j * kp->stride[0] * psz, kp->dtype,
                           kp->stride[1], R, row + L);
        write_row_body(&a->desc, &a->cache, slot, row, scratch, enc8);
    }
}

typedef void (*tokens_fn)(const mla_cache_write_args *, int64_t, int64_t, float *, uint8_t *);

static void tokens_generic(const mla_cache_write_args *a, int64_t j0, int64_t j1, float *row,
                           uint8_t *scratch)
{
    tokens_body(a, j0, j1, row, scratch, NULL);
}

static void row_generic(const mla_cache_desc *d, const mla_tensor *cache, int64_t slot,
                        const float *row, uint8_t *scratch)
{
    write_row_body(d, cache, slot, row, scratch, NULL);
}

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void tokens_avx2(const mla_cache_write_args *a, int64_t j0, int64_t j1,
                                        float *row, uint8_t *scratch)
{
    tokens_body(a, j0, j1, row, scratch, NULL);
}

/* encode's fp8 loop: vdivps is the IEEE quotient with mla_fb_div's NaN choice
 * (x86's rule); codes by mla_v16_to_fp8 (bit for bit mla_fb_f32_to_e4m3fn*). */
MLA_TARGET_AVX512 static void enc8_avx512(const float *row, int64_t n, float div, int fnuz,
                                          uint8_t *out)
{
    const __m512 d = _mm512_set1_ps(div);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = mla_v16_mask(n - i);
        const __m128i c = mla_v16_to_fp8(_mm512_div_ps(_mm512_maskz_loadu_ps(m, row + i), d), fnuz);
        _mm_mask_storeu_epi8(out + i, m, c);
    }
}

MLA_TARGET_AVX512 static void tokens_avx512(const mla_cache_write_args *a, int64_t j0, int64_t j1,
                                            float *row, uint8_t *scratch)
{
    tokens_body(a, j0, j1, row, scratch, enc8_avx512);
}

MLA_TARGET_AVX2 static void row_avx2(const mla_cache_desc *d, const mla_tensor *cache, int64_t slot,
                                     const float *row, uint8_t *scratch)
{
    write_row_body(d, cache, slot, row, scratch, NULL);
}

MLA_TARGET_AVX512 static void row_avx512(const mla_cache_desc *d, const mla_tensor *cache,
                                         int64_t slot, const float *row, uint8_t *scratch)
{
    write_row_body(d, cache, slot, row, scratch, enc8_avx512);
}
#endif

mla_cpu_cache_row_fn mla_cpu_pick_cache_row(mla_cpu_isa isa)
{
    return MLA_CPU_PICK(isa, row);
}

mla_status mla_cpu_cache_write(mla_context *ctx, const mla_cache_write_args *a)
{
    const int64_t T = a->k_nope.shape[0], D = a->desc.kv_lora + a->desc.rope;
    const int64_t tasks = (T + TOKENS_PER_TASK - 1) / TOKENS_PER_TASK;
    const int64_t values = mla_sz_sat(mla_sz_mul(T, D));
    const int64_t bytes = mla_sz_sat(mla_sz_mul(
        values, (int64_t)(mla_dtype_size(a->k_nope.dtype) + mla_dtype_size(a->desc.dtype))));
    const int nt = mla_cpu_threads(ctx, tasks, bytes < MLA_CPU_ONE_THREAD_BYTES ? 0 : values);
    /* per thread: the fp32 row, then 2 * D bytes of element scratch */
    float *bufs;
    MLA_TRY(mla_alloc_array(ctx, (void **)&bufs, nt, D + D / 2 + 1, sizeof(float), "cache_desc"));
    tokens_fn run = MLA_CPU_PICK(mla_cpu_isa_of(ctx), tokens);
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int64_t k = 0; k < tasks; ++k) {
        int id = 0;
#if defined(MLA_HAVE_OPENMP)
        id = omp_get_thread_num();
#endif
        float *row = bufs + (int64_t)id * (D + D / 2 + 1);
        const int64_t j0 = k * TOKENS_PER_TASK;
        run(a, j0, T - j0 < TOKENS_PER_TASK ? T : j0 + TOKENS_PER_TASK, row, (uint8_t *)(row + D));
    }
    free(bufs);
    return MLA_OK;
}
