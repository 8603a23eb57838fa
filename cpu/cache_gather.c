/* CPU latent cache gather (MLA.md section 4), bit-identical to the reference:
 * out row n is token j of sequence s (sequences in order, j < seq_lens[s]),
 * read from block block_table[s, j / block_size], token j % block_size, and
 * returned as the NORMAL row [k_nope | k_pe] dequantized in fp32:
 *
 *     bf16: the value;  fp8 NORMAL/SHUFFLED: fp8 * k_scale;
 *     FP8_SCALED: fp8 * s of its group of 128, rope dims bf16 as stored,
 *
 * products through mla_fb_mul (the reference's NaN payloads, which an F32
 * out keeps), then one rounding to out's dtype. Offsets come from
 * core/ref/cache_layout.h. Rows are spread over the threads in runs of
 * ROWS_PER_TASK; a run finds its first sequence by binary search. */
#include <stdlib.h>
#include <string.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "core/checked.h"
#include "core/ref/cache_layout.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the CPU cache kernels read multi-byte fields in host order: little-endian hosts only"
#endif

#define ROWS_PER_TASK 16

/* n cache elements of dtype dt at p (contiguous) as fp32; fp8 times scale. */
MLA_CPU_INLINE void decode(const void *restrict p, int64_t n, mla_dtype dt, float scale,
                           float *restrict out)
{
    if (dt == MLA_DTYPE_BF16) {
        const uint16_t *e = (const uint16_t *)p;
        MLA_SIMD for (int64_t i = 0; i < n; ++i) out[i] = mla_fb_bf16_to_f32(e[i]);
    } else if (dt == MLA_DTYPE_FP8_E4M3FN) {
        const uint8_t *e = (const uint8_t *)p;
        MLA_SIMD for (int64_t i = 0; i < n; ++i) out[i] =
            mla_fb_mul(mla_fb_e4m3fn_to_f32(e[i]), scale);
    } else {
        const uint8_t *e = (const uint8_t *)p;
        MLA_SIMD for (int64_t i = 0; i < n; ++i) out[i] =
            mla_fb_mul(mla_fb_e4m3fnuz_to_f32(e[i]), scale);
    }
}

/* Token t of block blk as an fp32 row of L + R values. scratch: 2 (L + R) bytes. */
MLA_CPU_INLINE void read_row(const mla_cache_desc *d, const uint8_t *blk, int64_t t, float *row,
                             uint8_t *scratch)
{
    const int64_t L = d->kv_lora, R = d->rope, bs = d->block_size;
    if (d->layout == MLA_CACHE_FP8_SCALED) {
        for (int64_t g = 0; g < L / MLA_CL_SCALE_GROUP; ++g) {
            float s;
            memcpy(&s, blk + mla_cl_fp8s_scale_byte(t, g, L, R), sizeof s);
            decode(blk + mla_cl_fp8s_value_byte(t, g * MLA_CL_SCALE_GROUP, L, R),
                   MLA_CL_SCALE_GROUP, d->dtype, s, row + g * MLA_CL_SCALE_GROUP);
        }
        memcpy(scratch, blk + mla_cl_fp8s_rope_byte(t, 0, L, R), (size_t)(2 * R));
        decode(scratch, R, MLA_DTYPE_BF16, 1.0f, row + L);
        return;
    }
    /* Into the scratch row in NORMAL order (the cache's bytes need not be aligned). */
    const int64_t eb = (int64_t)mla_dtype_size(d->dtype);
    if (d->layout == MLA_CACHE_NORMAL) {
        memcpy(scratch, blk + mla_cl_elem_byte(MLA_CL_NORMAL, t, 0, L, R, bs, eb),
               (size_t)((L + R) * eb));
    } else {
        const int64_t K = mla_cl_shuffle_k(eb); /* L and R are multiples of K: validated */
        for (int64_t i = 0; i < L + R; i += K)
            memcpy(scratch + i * eb, blk + mla_cl_elem_byte(MLA_CL_SHUFFLED, t, i, L, R, bs, eb),
                   MLA_CL_TILE_BYTES);
    }
    decode(scratch, L + R, d->dtype, d->k_scale, row);
}

/* Output rows [n0, n1), the first one being token j of sequence s. */
MLA_CPU_INLINE void rows_body(const mla_cache_gather_args *a, int64_t n0, int64_t n1, int64_t s,
                              int64_t j, float *row, uint8_t *scratch)
{
    const mla_cache_desc *d = &a->desc;
    const mla_tensor *bt = &a->block_table, *sl = &a->seq_lens, *out = &a->out;
    const int64_t D = d->kv_lora + d->rope, bs = d->block_size;
    const int64_t osz = (int64_t)mla_dtype_size(out->dtype);
    for (int64_t n = n0; n < n1; ++n, ++j) {
        while (j >= ((const int32_t *)sl->data)[s * sl->stride[0]]) /* next non-empty sequence */
            ++s, j = 0;
        const int64_t block = ((const int32_t *)bt->data)[s * bt->stride[0] + (j / bs) * bt->stride[1]];
        read_row(d, (const uint8_t *)a->cache.data + block * a->cache.stride[0], j % bs, row,
                 scratch);
        mla_cpu_store_float(row, (char *)out->data + n * out->stride[0] * osz, out->dtype,
                            out->stride[1], D);
    }
}

typedef void (*rows_fn)(const mla_cache_gather_args *, int64_t, int64_t, int64_t, int64_t,
                        float *, uint8_t *);

static void rows_generic(const mla_cache_gather_args *a, int64_t n0, int64_t n1, int64_t s,
                         int64_t j, float *row, uint8_t *scratch)
{
    rows_body(a, n0, n1, s, j, row, scratch);
}

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void rows_avx2(const mla_cache_gather_args *a, int64_t n0, int64_t n1,
                                      int64_t s, int64_t j, float *row, uint8_t *scratch)
{
    rows_body(a, n0, n1, s, j, row, scratch);
}

MLA_TARGET_AVX512 static void rows_avx512(const mla_cache_gather_args *a, int64_t n0, int64_t n1,
                                          int64_t s, int64_t j, float *row, uint8_t *scratch)
{
    rows_body(a, n0, n1, s, j, row, scratch);
}
#endif

mla_status mla_cpu_cache_gather(mla_context *ctx, const mla_cache_gather_args *a)
{
    const int64_t S = a->seq_lens.shape[0], D = a->desc.kv_lora + a->desc.rope;
    const int64_t rows = a->out.shape[0], tasks = (rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
    const int nt = mla_cpu_threads(ctx, tasks, rows * D);
    const int64_t per_thread = D + D / 2 + 1; /* fp32 row, then 2 D bytes of scratch */
    int64_t *start = NULL;
    float *bufs = NULL;
    mla_status st =
        mla_alloc_array(ctx, (void **)&start, mla_sz_add(S, 1), 1, sizeof *start, "seq_lens");
    if (st == MLA_OK)
        st = mla_alloc_array(ctx, (void **)&bufs, nt, per_thread, sizeof(float), "cache_desc");
    if (st != MLA_OK) {
        free(start);
        return st;
    }
    start[0] = 0; /* start[s]: the first out row of sequence s */
    for (int64_t s = 0; s < S; ++s)
        start[s + 1] = start[s] + ((const int32_t *)a->seq_lens.data)[s * a->seq_lens.stride[0]];
    rows_fn run = MLA_CPU_PICK(mla_cpu_isa_of(ctx), rows);
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int64_t k = 0; k < tasks; ++k) {
        int id = 0;
#if defined(MLA_HAVE_OPENMP)
        id = omp_get_thread_num();
#endif
        const int64_t n0 = k * ROWS_PER_TASK, n1 = rows - n0 < ROWS_PER_TASK ? rows : n0 + ROWS_PER_TASK;
        int64_t lo = 0, hi = S - 1; /* the last s with start[s] <= n0 */
        while (lo < hi) {
            const int64_t mid = (lo + hi + 1) / 2;
            if (start[mid] <= n0)
                lo = mid;
            else
                hi = mid - 1;
        }
        float *row = bufs + id * per_thread;
        run(a, n0, n1, lo, n0 - start[lo], row, (uint8_t *)(row + D));
    }
    free(start);
    free(bufs);
    return MLA_OK;
}
