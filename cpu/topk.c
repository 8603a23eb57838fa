/* CPU top-k of the DSA indexer (MLA.md section 6), indices identical to the
 * reference (core/ref/topk.c): per row r, the min(k, len) largest of
 * logits[r, 0:len], in ascending index order, ties to the lower index (+0
 * and -0 tie), NaN below every number (NaNs tie among themselves), -1
 * padding to k.
 *
 * That order is total on (key desc, index asc) with the 32-bit key
 *     NaN -> 0;  -0 -> +0;  then the usual flip: x >= +0 -> bits | 2^31,
 *     x < 0 -> ~bits
 * (unsigned key order = value order, -inf at 0x007FFFFF above NaN's 0). So
 * the answer is the m = min(k, len) smallest (~key, index) pairs, found in
 * O(len) without a sort of the row:
 *   1. histogram of the key's top 12 bits (sign, exponent, 3 mantissa
 *      bits); the bin B1 holding the m-th largest key; everything above B1
 *      is in;
 *   2. one scan lists, in index order, the indices at or above B1;
 *   3. two more histogram rounds over the list's B1 entries only (bits
 *      19..8, then 7..0) give the m-th largest key T exactly; the list's
 *      entries above T are in, and the first (in index order) of those equal
 *      to T up to m, written as they come: in index order.
 * Deterministic integer work: the bits never depend on the thread count.
 * Rows are spread over the threads. */
#include <stdlib.h>
#include <string.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "core/checked.h"
#include "core/format_bits.h"
#include "cpu/cpu_kernels.h"

#define B1_BITS 12
#define B2_BITS 12
#define B3_BITS 8
#define HIST (1 << 12)
#define HIST_WAYS 4
#define HIST_CHUNK 256 /* keys computed at a time (a multiple of HIST_WAYS) */

/* Per-thread buffers: the list (N), histograms. */
typedef struct topk_scratch {
    int32_t *list; /* indices at or above B1, in index order (len) */
    uint32_t *hist;
} topk_scratch;

/* The order key of the header. */
MLA_CPU_INLINE uint32_t order_key(float v)
{
    uint32_t u = mla_fb_bits(v);
    u = u == 0x80000000u ? 0u : u;
    const uint32_t k = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return (u & 0x7FFFFFFFu) > 0x7F800000u ? 0u : k;
}

/* Bin of h[0..nb) holding the m-th largest (m >= 1, sum h >= m), scanning
 * from the top; *above = the count in higher bins. */
static uint32_t find_bin(const uint32_t *h, uint32_t nb, int64_t m, int64_t *above)
{
    int64_t acc = 0;
    uint32_t b = nb - 1;
    for (;; --b) {
        if (acc + h[b] >= m || b == 0)
            break;
        acc += h[b];
    }
    *above = acc;
    return b;
}

MLA_CPU_INLINE void row_body(const float *x, int64_t xs, int64_t len, int64_t k, int32_t *out,
                             int64_t os, const topk_scratch *s)
{
    const int64_t m = k < len ? k : len;
    if (m > 0) {
        /* 1. top 12 bits, in HIST_WAYS interleaved histograms (neighbours
         * often share a bin: separate counters keep the increments from
         * waiting on each other), then summed */
        uint32_t *h = s->hist;
        memset(h, 0, HIST_WAYS * HIST * sizeof *h);
        int64_t n = 0;
        if (xs == 1) /* contiguous rows: the keys vectorize */
            for (; n + HIST_CHUNK <= len; n += HIST_CHUNK) {
                uint16_t bin[HIST_CHUNK];
                MLA_SIMD for (int j = 0; j < HIST_CHUNK; ++j) bin[j] =
                    (uint16_t)(order_key(x[n + j]) >> (32 - B1_BITS));
                for (int j = 0; j < HIST_CHUNK; j += HIST_WAYS)
                    for (int w = 0; w < HIST_WAYS; ++w)
                        ++h[w * HIST + bin[j + w]];
            }
        for (; n + HIST_WAYS <= len; n += HIST_WAYS)
            for (int j = 0; j < HIST_WAYS; ++j)
                ++h[j * HIST + (order_key(x[(n + j) * xs]) >> (32 - B1_BITS))];
        for (; n < len; ++n)
            ++h[order_key(x[n * xs]) >> (32 - B1_BITS)];
        for (int j = 1; j < HIST_WAYS; ++j)
            for (int b = 0; b < HIST; ++b)
                h[b] += h[j * HIST + b];
        int64_t above;
        const uint32_t b1 = find_bin(h, 1u << B1_BITS, m, &above);
        /* 2. the indices at or above B1, in index order (one store each,
         * no branch: the list has a spare slot, nl <= n < len) */
        int32_t *list = s->list;
        int64_t nl = 0;
        n = 0;
        if (xs == 1)
            for (; n + HIST_CHUNK <= len; n += HIST_CHUNK) {
                uint8_t in[HIST_CHUNK];
                MLA_SIMD for (int j = 0; j < HIST_CHUNK; ++j) in[j] =
                    (uint8_t)((order_key(x[n + j]) >> (32 - B1_BITS)) >= b1);
                for (int j = 0; j < HIST_CHUNK; ++j) {
                    list[nl] = (int32_t)(n + j);
                    nl += in[j];
                }
            }
        for (; n < len; ++n) {
            list[nl] = (int32_t)n;
            nl += (order_key(x[n * xs]) >> (32 - B1_BITS)) >= b1;
        }
        /* 3. the m-th largest key T: bits 19..8, then 7..0, over the list's
         * B1 entries (keys recomputed from x: the list is short) */
        int64_t need = m - above; /* 1 <= need <= the count in B1 */
        memset(h, 0, HIST * sizeof *h);
        for (int64_t i = 0; i < nl; ++i) {
            const uint32_t key = order_key(x[list[i] * xs]);
            if (key >> (32 - B1_BITS) == b1)
                ++h[(key >> B3_BITS) & ((1u << B2_BITS) - 1)];
        }
        int64_t above2;
        const uint32_t b2 = find_bin(h, 1u << B2_BITS, need, &above2);
        const uint32_t hi20 = (b1 << B2_BITS) | b2; /* the key's top 24 bits */
        need -= above2;
        memset(h, 0, (1u << B3_BITS) * sizeof *h);
        for (int64_t i = 0; i < nl; ++i) {
            const uint32_t key = order_key(x[list[i] * xs]);
            if (key >> B3_BITS == hi20)
                ++h[key & ((1u << B3_BITS) - 1)];
        }
        int64_t above3;
        const uint32_t b3 = find_bin(h, 1u << B3_BITS, need, &above3);
        const uint32_t T = (hi20 << B3_BITS) | b3;
        int64_t ties = need - above3; /* keys equal to T to take, lowest index first */
        /* the chosen, in index order: above T, and the first `ties` equal to it */
        int64_t c = 0;
        for (int64_t i = 0; i < nl; ++i) {
            const uint32_t key = order_key(x[list[i] * xs]);
            if (key > T || (key == T && ties > 0)) {
                ties -= key == T;
                out[c++ * os] = list[i];
            }
        }
    }
    for (int64_t c = m; c < k; ++c)
        out[c * os] = -1;
}

typedef void (*row_fn)(const float *, int64_t, int64_t, int64_t, int32_t *, int64_t,
                       const topk_scratch *);

static void row_generic(const float *x, int64_t xs, int64_t len, int64_t k, int32_t *out,
                        int64_t os, const topk_scratch *s)
{
    row_body(x, xs, len, k, out, os, s);
}

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void row_avx2(const float *x, int64_t xs, int64_t len, int64_t k,
                                     int32_t *out, int64_t os, const topk_scratch *s)
{
    row_body(x, xs, len, k, out, os, s);
}

MLA_TARGET_AVX512 static void row_avx512(const float *x, int64_t xs, int64_t len, int64_t k,
                                         int32_t *out, int64_t os, const topk_scratch *s)
{
    row_body(x, xs, len, k, out, os, s);
}
#endif

mla_status mla_cpu_topk(mla_context *ctx, const mla_topk_args *a)
{
    const int64_t R = a->logits.shape[0], N = a->logits.shape[1], k = a->k;
    /* per thread: the list (the longest length: validated <= N, I32, where
     * N itself may be a broadcast view's), the histograms */
    int64_t longest = 0;
    for (int64_t r = 0; r < R; ++r) {
        const int64_t len = ((const int32_t *)a->lengths.data)[r * a->lengths.stride[0]];
        longest = len > longest ? len : longest;
    }
    const int64_t words = longest + HIST_WAYS * HIST;
    const int nt = mla_cpu_threads(ctx, R, R * N);
    uint32_t *mem;
    MLA_TRY(mla_alloc_array(ctx, (void **)&mem, nt, words, sizeof *mem, "lengths"));
    const row_fn run = MLA_CPU_PICK(mla_cpu_isa_of(ctx), row);
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int id = 0;
#if defined(MLA_HAVE_OPENMP)
        id = omp_get_thread_num();
#endif
        uint32_t *p = mem + (int64_t)id * words;
        topk_scratch s;
        s.list = (int32_t *)p;
        s.hist = p + longest;
#if defined(MLA_HAVE_OPENMP)
#pragma omp for schedule(dynamic, 1)
#endif
        for (int64_t r = 0; r < R; ++r) {
            const int64_t len =
                ((const int32_t *)a->lengths.data)[r * a->lengths.stride[0]];
            run((const float *)a->logits.data + r * a->logits.stride[0], a->logits.stride[1], len,
                k, (int32_t *)a->indices.data + r * a->indices.stride[0], a->indices.stride[1],
                &s);
        }
    }
    free(mem);
    return MLA_OK;
}
