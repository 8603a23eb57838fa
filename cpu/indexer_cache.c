/* CPU DSA indexer K cache writer and gather (MLA.md section 6), bytes identical
 * to the reference (core/ref/indexer_cache.c). Offsets from
 * core/ref/indexer_layout.h. Per token t over the whole head (D values of k,
 * loaded exactly as fp32):
 *
 *     amax  = max |k[t, :]|, or the last NaN's |.| (the reference's scan)
 *     scale = max(amax, 1e-4) / div            div 448 (e4m3fn) | 224 (e4m3fnuz)
 *             2^ceil(log2(that)) when ue8m0    from the quotient's bits
 *     value = sat_fp8(fl(k / scale))
 *
 * i.e. the fp8 group quant of core/format_bits.h with group D and rule
 * MLA_FB_FP8_RULE_UE8M0 or _DIV (mla_fb_fp8_group_scale / _code), as the
 * reference writer calls its group quant. The token's codes are built in a
 * contiguous buffer, then placed: one copy (NORMAL) or 16-byte tile rows
 * (SHUFFLE); the fp32 scale little-endian after the block's values.
 * The gather copies the bytes back the same way: k_fp8 rows hold the codes,
 * k_scale the stored scales.
 * Tokens (writer) and output rows (gather) are spread over the threads; the
 * validated slots are distinct, so no two threads write one row. */
#include <stdlib.h>
#include <string.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "core/checked.h"
#include "core/ref/indexer_layout.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"

#define TOKENS_PER_TASK 16

MLA_CPU_INLINE uint32_t abs_bits_max(const float *restrict v, int64_t n)
{
    uint32_t amax = 0;
    MLA_SIMD_MAX(amax) for (int64_t i = 0; i < n; ++i) {
        const uint32_t m = mla_fb_bits(v[i]) & 0x7FFFFFFFu;
        amax = m > amax ? m : amax;
    }
    return amax;
}

/* |v| bits of the last NaN of v[0, n) (one is known to be there). */
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

/* codes[0, D) of the fp32 row v for scale s: sat_fp8(fl(v / s)) (the DIV and
 * UE8M0 rules divide; the reciprocal argument is AITER's only, unused here);
 * rule and fnuz constant per call site. */
MLA_CPU_INLINE void encode(const float *restrict v, int64_t D, float s, int32_t rule, int fnuz,
                           uint8_t *restrict codes)
{
    MLA_SIMD for (int64_t i = 0; i < D; ++i) codes[i] =
        mla_fb_fp8_group_code(v[i], s, s, rule, fnuz);
}

/* Tokens [t0, t1) of the writer. row: D floats, codes: D bytes. */
MLA_CPU_INLINE void write_body(const mla_indexer_cache_args *a, int64_t t0, int64_t t1,
                               float *restrict row, uint8_t *restrict codes)
{
    const mla_indexer_cache_desc *d = &a->desc;
    const int64_t D = d->head_dim, bs = d->block_size;
    const int fnuz = d->dtype == MLA_DTYPE_FP8_E4M3FNUZ;
    const int32_t rule = d->ue8m0 ? MLA_FB_FP8_RULE_UE8M0 : MLA_FB_FP8_RULE_DIV;
    const mla_tensor *k = &a->k, *sl = &a->slots;
    const int64_t ksz = (int64_t)mla_dtype_size(k->dtype);
    for (int64_t t = t0; t < t1; ++t) {
        const int64_t off = t * sl->stride[0];
        const int64_t slot = sl->dtype == MLA_DTYPE_I32 ? ((const int32_t *)sl->data)[off]
                                                        : ((const int64_t *)sl->data)[off];
        if (slot < 0) /* "do not write" */
            continue;
        mla_cpu_load_float((const char *)k->data + t * k->stride[0] * ksz, k->dtype, k->stride[1],
                           D, row);
        uint32_t amax = abs_bits_max(row, D);
        if (amax > 0x7F800000u)
            amax = last_nan(row, D);
        const float s = mla_fb_fp8_group_scale(mla_fb_float(amax), rule, fnuz);
        /* both rules code x / s: one loop (the DIV variant) serves them */
        if (fnuz)
            encode(row, D, s, MLA_FB_FP8_RULE_DIV, 1, codes);
        else
            encode(row, D, s, MLA_FB_FP8_RULE_DIV, 0, codes);
        uint8_t *blk = (uint8_t *)a->cache.data + (slot / bs) * a->cache.stride[0];
        const int64_t tok = slot % bs;
        if (d->layout == MLA_INDEXER_SHUFFLE) {
            for (int64_t c = 0; c < D; c += MLA_IL_TILE)
                memcpy(blk + mla_il_shuffle_byte(tok, c, D), codes + c, MLA_IL_TILE);
        } else {
            memcpy(blk + mla_il_normal_byte(tok, 0, D), codes, (size_t)D);
        }
        mla_il_put_scale(blk + mla_il_scale_byte(tok, bs, D), s);
    }
}

typedef void (*write_fn)(const mla_indexer_cache_args *, int64_t, int64_t, float *, uint8_t *);

static void write_generic(const mla_indexer_cache_args *a, int64_t t0, int64_t t1, float *row,
                          uint8_t *codes)
{
    write_body(a, t0, t1, row, codes);
}

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void write_avx2(const mla_indexer_cache_args *a, int64_t t0, int64_t t1,
                                       float *row, uint8_t *codes)
{
    write_body(a, t0, t1, row, codes);
}

MLA_TARGET_AVX512 static void write_avx512(const mla_indexer_cache_args *a, int64_t t0,
                                           int64_t t1, float *row, uint8_t *codes)
{
    write_body(a, t0, t1, row, codes);
}
#endif

mla_status mla_cpu_indexer_k_cache_write(mla_context *ctx, const mla_indexer_cache_args *a)
{
    const int64_t T = a->k.shape[0], D = a->desc.head_dim;
    const int64_t tasks = (T + TOKENS_PER_TASK - 1) / TOKENS_PER_TASK;
    const int nt = mla_cpu_threads(ctx, tasks, T * D);
    const int64_t per = mla_sz_mul(D, (int64_t)sizeof(float) + 1); /* fp32 row, then the codes */
    uint8_t *bufs;
    MLA_TRY(mla_alloc_array(ctx, (void **)&bufs, nt, per, 1, "k"));
    const write_fn run = MLA_CPU_PICK(mla_cpu_isa_of(ctx), write);
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int64_t j = 0; j < tasks; ++j) {
        int id = 0;
#if defined(MLA_HAVE_OPENMP)
        id = omp_get_thread_num();
#endif
        const int64_t t0 = j * TOKENS_PER_TASK;
        const int64_t t1 = T - t0 < TOKENS_PER_TASK ? T : t0 + TOKENS_PER_TASK;
        uint8_t *b = bufs + id * per;
        run(a, t0, t1, (float *)(void *)b, b + D * (int64_t)sizeof(float));
    }
    free(bufs);
    return MLA_OK;
}

/* Output rows [n0, n1) of the gather, the first one being token j of
 * sequence s (cu: the S + 1 row offsets). */
static void gather_rows(const mla_indexer_cache_args *a, const int64_t *cu, int64_t n0, int64_t n1,
                        int64_t s, int64_t j)
{
    const mla_indexer_cache_desc *d = &a->desc;
    const int64_t D = d->head_dim, bs = d->block_size;
    const mla_tensor *bt = &a->block_table, *kf = &a->k_fp8, *ks = &a->k_scale;
    for (int64_t n = n0; n < n1; ++n, ++j) {
        while (j >= cu[s + 1] - cu[s]) /* next non-empty sequence */
            ++s, j = 0;
        const int64_t block =
            ((const int32_t *)bt->data)[s * bt->stride[0] + (j / bs) * bt->stride[1]];
        const uint8_t *blk = (const uint8_t *)a->cache.data + block * a->cache.stride[0];
        const int64_t tok = j % bs;
        uint8_t *out = (uint8_t *)kf->data + n * kf->stride[0];
        if (kf->stride[1] == 1) {
            if (d->layout == MLA_INDEXER_SHUFFLE) {
                for (int64_t c = 0; c < D; c += MLA_IL_TILE)
                    memcpy(out + c, blk + mla_il_shuffle_byte(tok, c, D), MLA_IL_TILE);
            } else {
                memcpy(out, blk + mla_il_normal_byte(tok, 0, D), (size_t)D);
            }
        } else {
            for (int64_t i = 0; i < D; ++i)
                out[i * kf->stride[1]] = blk[mla_il_value_byte((int32_t)d->layout, tok, i, D)];
        }
        ((float *)ks->data)[n * ks->stride[0]] =
            mla_il_get_scale(blk + mla_il_scale_byte(tok, bs, D));
    }
}

mla_status mla_cpu_indexer_k_gather(mla_context *ctx, const mla_indexer_cache_args *a)
{
    const int64_t S = a->cu_seq_lens.shape[0] - 1, D = a->desc.head_dim;
    const int64_t rows = a->k_fp8.shape[0];
    const int64_t tasks = (rows + TOKENS_PER_TASK - 1) / TOKENS_PER_TASK;
    int64_t *cu;
    MLA_TRY(mla_alloc_array(ctx, (void **)&cu, S + 1, 1, sizeof *cu, "cu_seq_lens"));
    for (int64_t s = 0; s <= S; ++s)
        cu[s] = ((const int32_t *)a->cu_seq_lens.data)[s * a->cu_seq_lens.stride[0]];
    const int nt = mla_cpu_threads(ctx, tasks, rows * D);
    (void)nt;
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int64_t k = 0; k < tasks; ++k) {
        const int64_t n0 = k * TOKENS_PER_TASK;
        const int64_t n1 = rows - n0 < TOKENS_PER_TASK ? rows : n0 + TOKENS_PER_TASK;
        int64_t lo = 0, hi = S - 1; /* the last s with cu[s] <= n0 */
        while (lo < hi) {
            const int64_t mid = (lo + hi + 1) / 2;
            if (cu[mid] <= n0)
                lo = mid;
            else
                hi = mid - 1;
        }
        gather_rows(a, cu, n0, n1, lo, n0 - cu[lo]);
    }
    free(cu);
    return MLA_OK;
}
