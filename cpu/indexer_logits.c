/* CPU paged MQA logits of the DSA indexer (MLA.md section 6). Row r = b *
 * next_n + j, key position n < bound_r = ctx_len[b] - next_n + j + 1:
 *
 *     logits[r, n] = k_scale[n] * sum_h w[r, h] * relu(q[r, h, :] . k[n, :])
 *
 * and -inf from bound_r to logits.shape[1]. Keys are read in place from the
 * paged cache in either layout (offsets of core/ref/indexer_layout.h): a
 * register block of keys is decoded from fp8 into a small L1 buffer and used
 * at once, never converted as a whole.
 *
 * Arithmetic, identical in every code path (so the bits do not depend on the
 * ISA copy, nor on the thread count: each key's value is computed on its
 * own, in this order):
 *   dot[h] = +0, then for each dim pair p ascending:
 *            dot += q[2p+1] k[2p+1];  dot += q[2p] k[2p]     (fp32 adds)
 *            Every fp8 value is exact in bf16 (and fp32), and a product of
 *            two has at most 8 significant bits, so each product is exact in
 *            fp32: only the adds round. That is the summation the
 *            conformance bound allows (fp32 sum of exact terms), and it is
 *            exactly what AVX-512 BF16 `vdpbf16ps` computes on fp8 values
 *            decoded to bf16 (per lane: acc + odd product, rounded, then +
 *            even product, rounded; its DAZ/FTZ never triggers: the smallest
 *            fp8 magnitude is 2^-10, products and their sums stay normal).
 *            So the paths are: vdpbf16ps tiles (AVX-512 BF16), fp32 FMA tiles
 *            (AVX-512 without BF16: an FMA of an exact product is the same
 *            one rounding), and an fp32 loop for the AVX2 / portable copies
 *            (mul then add, the product exact); checked bit-identical with
 *            one another on this library's test host (AMD Zen 4).
 *   relu:    d < 0 ? 0 : d (a NaN passes, as the reference and torch.relu)
 *   lane l (16 lanes): L = +0; for each 16-head vector v ascending:
 *            L += fl(w[16v + l] * relu(dot[16v + l]))
 *            (heads past Hi are zero q and zero w: they add +0, a no-op
 *            since L is never -0)
 *   S = the lanes summed by a fixed tree (l + 8, then + 4, + 2, + 1)
 *   logits = fl(S * k_scale)
 * The reference sums in float64; the difference is fp32 rounding of those
 * sums, inside the conformance bound.
 *
 * Work: chunks of up to CHUNK_MAX keys of one row, handed out dynamically
 * (the build host is shared: a thread that loses its core does not hold the
 * others up); a thread packs q of a row when its next chunk changes row.
 * Inside a chunk, blocks of NK keys against all heads, NK x HV zmm
 * accumulators (HV = heads / 16 <= 4 per group of 64 heads; larger Hi loops
 * over groups, carrying L). Measured on the 2-core Zen 4 build host, one
 * core, Hi 64: vdpbf16ps ~180 GFLOP/s with the keys in L2 (~150 streaming
 * from memory), FMA tiles ~100, the AVX2 loop ~43; cblas_sgemm ~95 there. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "core/checked.h"
#include "core/ref/indexer_layout.h"
#include "cpu/cpu_kernels.h"

#if MLA_CPU_X86
#include <immintrin.h>
#define MLA_TARGET_AVX512_BF16                                                                     \
    __attribute__((target(MLA_AVX512_ISAS ",avx512bf16")))
#endif

#define LANES 16                 /* heads per vector, and the lanes of L */
#define GROUP_HEADS 64           /* heads per group: HV_MAX vectors */
#define HV_MAX 4
#define NK_MAX 16                /* keys per register block, at most */
#define KB_ALIGN 32              /* decoded key rows padded to 32 values */
#define CHUNK_MIN 240            /* keys per task: multiples of every NK */
#define CHUNK_MAX 4080

/* Everything a thread needs, fixed for the call. */
typedef struct logits_job {
    const mla_indexer_logits_args *a;
    int64_t D;         /* head_dim */
    int64_t P;         /* dim pairs, ceil(D / 2) */
    int64_t KS;        /* decoded key row stride in pairs (u32 or 2 floats) */
    int64_t Hi, G;     /* heads, groups of 64 heads */
    int hv_last;       /* vectors in the last group (1..4) */
    int nk;            /* keys per block */
    int fnuz;
    uint16_t lut[256]; /* fp8 code -> bf16 bits (exact; NaN codes -> 0x7FC0) */
} logits_job;

/* The fp32 scratch of one thread. */
typedef struct logits_scratch {
    void *q;  /* packed q of the current row */
    float *w; /* its head weights, zero padded to G * 64 */
    void *k;  /* NK_MAX decoded keys */
    float *L; /* NK_MAX x 16 lane sums */
} logits_scratch;

MLA_CPU_INLINE int64_t row_bound(const mla_indexer_logits_args *a, int64_t r)
{
    const int64_t b = r / a->next_n, j = r % a->next_n;
    const int64_t len = ((const int32_t *)a->context_lens.data)[b * a->context_lens.stride[0]];
    return len - a->next_n + j + 1;
}

/* Where key n of sequence b lives: its block (block_table[b, n / bs]) and
 * token; stepped key by key, so the division happens once per run. */
typedef struct key_cursor {
    const uint8_t *blk;
    int64_t t, j; /* token in the block, block number in the sequence */
} key_cursor;

MLA_CPU_INLINE const uint8_t *block_at(const mla_indexer_logits_args *a, int64_t b, int64_t j)
{
    const mla_tensor *bt = &a->block_table;
    const int64_t blk = ((const int32_t *)bt->data)[b * bt->stride[0] + j * bt->stride[1]];
    return (const uint8_t *)a->cache.data + blk * a->cache.stride[0];
}

MLA_CPU_INLINE key_cursor cursor_at(const mla_indexer_logits_args *a, int64_t b, int64_t n)
{
    key_cursor c;
    c.j = n / a->desc.block_size;
    c.t = n % a->desc.block_size;
    c.blk = block_at(a, b, c.j);
    return c;
}

/* The next key; the block table is read only when the block changes (and
 * never past the sequence's last valid block: limit = that key count). */
MLA_CPU_INLINE void cursor_next(const mla_indexer_logits_args *a, int64_t b, int64_t n_next,
                                int64_t limit, key_cursor *c)
{
    if (++c->t == a->desc.block_size) {
        c->t = 0;
        ++c->j;
        if (n_next < limit)
            c->blk = block_at(a, b, c->j);
    }
}

/* S of the header: lanes 0..15 summed by the fixed tree. */
MLA_CPU_INLINE float tree16(const float *L)
{
    float t[LANES];
    for (int l = 0; l < LANES; ++l)
        t[l] = L[l];
    for (int w = LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; ++l)
            t[l] = t[l] + t[l + w];
    return t[0];
}

MLA_CPU_INLINE uint8_t q_code(const mla_tensor *q, int64_t r, int64_t h, int64_t d)
{
    return ((const uint8_t *)q->data)[r * q->stride[0] + h * q->stride[1] + d * q->stride[2]];
}

/* w[r, :] zero padded to G * 64 heads. */
static void pack_w(const logits_job *jb, int64_t r, float *w)
{
    const mla_tensor *wt = &jb->a->w;
    for (int64_t h = 0; h < jb->G * GROUP_HEADS; ++h)
        w[h] = h < jb->Hi ? ((const float *)wt->data)[r * wt->stride[0] + h * wt->stride[1]] : 0.0f;
}

/* ------------------------------------------------------ portable path (fp32) */

/* q[r] as fp32: [G][P][2][64], [..][0][h] = q[h, 2p], [..][1][h] = q[h, 2p+1];
 * zero past Hi and past D. */
static void pack_q_f32(const logits_job *jb, int64_t r, float *qf)
{
    const mla_tensor *q = &jb->a->q;
    const int64_t D = jb->D;
    for (int64_t g = 0; g < jb->G; ++g)
        for (int64_t p = 0; p < jb->P; ++p)
            for (int e = 0; e < 2; ++e) {
                float *o = qf + ((g * jb->P + p) * 2 + e) * GROUP_HEADS;
                for (int64_t i = 0; i < GROUP_HEADS; ++i) {
                    const int64_t h = g * GROUP_HEADS + i, d = 2 * p + e;
                    const uint16_t v = (h < jb->Hi && d < D) ? jb->lut[q_code(q, r, h, d)] : 0;
                    o[i] = mla_fb_bf16_to_f32(v);
                }
            }
}

/* The cursor's key as fp32 [2P] (zero past D) and its scale. */
MLA_CPU_INLINE void key_f32(const logits_job *jb, const key_cursor *kc, float *out, float *ks)
{
    const mla_indexer_logits_args *a = jb->a;
    const int64_t D = jb->D, t = kc->t;
    const uint8_t *blk = kc->blk;
    if (a->desc.layout == MLA_INDEXER_SHUFFLE) {
        for (int64_t c = 0; c < D; c += MLA_IL_TILE) {
            const uint8_t *src = blk + mla_il_shuffle_byte(t, c, D);
            for (int i = 0; i < MLA_IL_TILE; ++i)
                out[c + i] = mla_fb_bf16_to_f32(jb->lut[src[i]]);
        }
    } else {
        const uint8_t *src = blk + mla_il_normal_byte(t, 0, D);
        for (int64_t d = 0; d < D; ++d)
            out[d] = mla_fb_bf16_to_f32(jb->lut[src[d]]);
    }
    for (int64_t d = D; d < 2 * jb->P; ++d)
        out[d] = 0.0f;
    *ks = mla_il_get_scale(blk + mla_il_scale_byte(t, a->desc.block_size, D));
}

/* One group of nh (<= 64) heads against nk decoded keys (rows of kf, stride
 * ks floats): the dots in the header's order, then L updated. */
MLA_CPU_INLINE void group_f32(const float *qg, const float *wg, const float *kf, int64_t ks,
                              int64_t P, int nk, int nh, float *L, int first)
{
    float acc[NK_MAX][GROUP_HEADS];
    for (int n = 0; n < nk; ++n)
        for (int h = 0; h < nh; ++h)
            acc[n][h] = 0.0f;
    for (int64_t p = 0; p < P; ++p) {
        const float *q0 = qg + p * 2 * GROUP_HEADS, *q1 = q0 + GROUP_HEADS;
        for (int n = 0; n < nk; ++n) {
            const float k0 = kf[n * ks + 2 * p], k1 = kf[n * ks + 2 * p + 1];
            float *an = acc[n];
            MLA_SIMD for (int h = 0; h < nh; ++h)
            {
                const float s = an[h] + q1[h] * k1; /* odd first, as vdpbf16ps */
                an[h] = s + q0[h] * k0;
            }
        }
    }
    for (int n = 0; n < nk; ++n)
        for (int l = 0; l < LANES; ++l) {
            float s = first ? 0.0f : L[n * LANES + l];
            for (int h = l; h < nh; h += LANES) {
                const float d = acc[n][h];
                s = s + wg[h] * (d < 0.0f ? 0.0f : d);
            }
            L[n * LANES + l] = s;
        }
}

/* Keys [n0, n1) of row r (sequence b), its q packed in s. */
MLA_CPU_INLINE void row_keys_f32(const logits_job *jb, int64_t r, int64_t n0, int64_t n1,
                                 const logits_scratch *s)
{
    const mla_indexer_logits_args *a = jb->a;
    const int64_t b = r / a->next_n, P = jb->P, KS = 2 * jb->KS;
    float *kf = (float *)s->k, *L = s->L;
    float ks[NK_MAX];
    float *out = (float *)a->logits.data + r * a->logits.stride[0];
    key_cursor kc = cursor_at(a, b, n0);
    for (int64_t n = n0; n < n1; n += jb->nk) {
        const int nk = (int)(n1 - n < jb->nk ? n1 - n : jb->nk);
        for (int i = 0; i < nk; ++i) {
            key_f32(jb, &kc, kf + i * KS, &ks[i]);
            cursor_next(a, b, n + i + 1, n1, &kc);
        }
        for (int64_t g = 0; g < jb->G; ++g) {
            const int nh = g == jb->G - 1 ? jb->hv_last * LANES : GROUP_HEADS;
            group_f32((const float *)s->q + g * P * 2 * GROUP_HEADS, s->w + g * GROUP_HEADS, kf,
                      KS, P, nk, nh, L, g == 0);
        }
        for (int i = 0; i < nk; ++i)
            out[(n + i) * a->logits.stride[1]] = tree16(L + i * LANES) * ks[i];
    }
}

typedef void (*row_keys_fn)(const logits_job *, int64_t, int64_t, int64_t, const logits_scratch *);

static void row_keys_generic(const logits_job *jb, int64_t r, int64_t n0, int64_t n1,
                             const logits_scratch *s)
{
    row_keys_f32(jb, r, n0, n1, s);
}

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void row_keys_avx2(const logits_job *jb, int64_t r, int64_t n0, int64_t n1,
                                          const logits_scratch *s)
{
    row_keys_f32(jb, r, n0, n1, s);
}

MLA_TARGET_AVX512 static void row_keys_avx512(const logits_job *jb, int64_t r, int64_t n0,
                                              int64_t n1, const logits_scratch *s)
{
    row_keys_f32(jb, r, n0, n1, s);
}

/* ------------------------------------------------ AVX-512 BF16 path (vdpbf16ps) */

/* q[r] as bf16 pairs: u32 [G][P][64], low half q[h, 2p], high half q[h, 2p+1]
 * (vdpbf16ps's pair order); zero past Hi and past D. */
static void pack_q_bf16(const logits_job *jb, int64_t r, uint32_t *qp)
{
    const mla_tensor *q = &jb->a->q;
    const int64_t D = jb->D;
    for (int64_t g = 0; g < jb->G; ++g)
        for (int64_t p = 0; p < jb->P; ++p) {
            uint32_t *o = qp + (g * jb->P + p) * GROUP_HEADS;
            for (int64_t i = 0; i < GROUP_HEADS; ++i) {
                const int64_t h = g * GROUP_HEADS + i, d = 2 * p;
                uint32_t lo = 0, hi = 0;
                if (h < jb->Hi) {
                    lo = jb->lut[q_code(q, r, h, d)];
                    hi = d + 1 < D ? jb->lut[q_code(q, r, h, d + 1)] : 0u;
                }
                o[i] = lo | hi << 16;
            }
        }
}

/* 32 fp8 codes -> 32 bf16, exactly as lut (mla_fb_e4m3fn(uz)_to_f32 >> 16):
 * normal codes rebias the exponent ((e, m) << 4, + (127 - bias) << 7),
 * subnormals (e = 0) come from a table of m * 2^(-bias-2) indexed by the low
 * bits, then the sign; NaN codes -> 0x7FC0. */
MLA_TARGET_AVX512 static inline __m512i fp8x32_to_bf16(__m256i b8, __m512i subtab, int fnuz)
{
    const __m512i w = _mm512_cvtepu8_epi16(b8);
    const __m512i mag = _mm512_and_si512(_mm512_slli_epi16(w, 4), _mm512_set1_epi16(0x07F0));
    __m512i r = _mm512_add_epi16(mag, _mm512_set1_epi16((short)((fnuz ? 119 : 120) << 7)));
    const __mmask32 sub = _mm512_testn_epi16_mask(w, _mm512_set1_epi16(0x78));
    r = _mm512_mask_permutexvar_epi16(r, sub, w, subtab);
    r = _mm512_ternarylogic_epi32(r, _mm512_slli_epi16(w, 8), _mm512_set1_epi16((short)0x8000),
                                  0xF8); /* r | (sign & 0x8000) */
    const __mmask32 nan = fnuz ? _mm512_cmpeq_epi16_mask(w, _mm512_set1_epi16(0x80))
                               : _mm512_cmpeq_epi16_mask(mag, _mm512_set1_epi16(0x07F0));
    return _mm512_mask_mov_epi16(r, nan, _mm512_set1_epi16(0x7FC0));
}

/* The cursor's key decoded 32 values at a time, each block of 32 bf16 handed
 * to put(o, i, v) (i: the block's index), zero past D; returns its scale. */
#define MLA_IDX_DECODE_KEY(jb, kc, subtab, PUT)                                                    \
    do {                                                                                           \
        const int64_t D_ = (jb)->D, t_ = (kc)->t;                                                  \
        const uint8_t *blk_ = (kc)->blk;                                                           \
        int64_t i_ = 0, c_ = 0;                                                                    \
        if ((jb)->a->desc.layout == MLA_INDEXER_SHUFFLE) {                                         \
            /* D % 16 == 0: tile rows of 16 bytes, two per 32 values */                            \
            const uint8_t *src_ = blk_ + mla_il_shuffle_byte(t_, 0, D_);                           \
            const int64_t step_ = MLA_IL_TILE * MLA_IL_TILE;                                       \
            for (; c_ + 32 <= D_; c_ += 32, ++i_) {                                                \
                const __m128i lo_ = _mm_loadu_si128((const __m128i *)(src_ + (c_ / 16) * step_));  \
                const __m128i hi_ =                                                                \
                    _mm_loadu_si128((const __m128i *)(src_ + (c_ / 16 + 1) * step_));              \
                const __m256i b8_ = _mm256_inserti128_si256(_mm256_castsi128_si256(lo_), hi_, 1);  \
                PUT(i_, fp8x32_to_bf16(b8_, subtab, (jb)->fnuz));                                  \
            }                                                                                      \
            if (c_ < D_) {                                                                         \
                const __m128i lo_ = _mm_loadu_si128((const __m128i *)(src_ + (c_ / 16) * step_));  \
                PUT(i_, fp8x32_to_bf16(_mm256_zextsi128_si256(lo_), subtab, (jb)->fnuz));          \
            }                                                                                      \
        } else {                                                                                   \
            const uint8_t *src_ = blk_ + mla_il_normal_byte(t_, 0, D_);                            \
            for (; c_ + 32 <= D_; c_ += 32, ++i_)                                                  \
                PUT(i_, fp8x32_to_bf16(_mm256_loadu_si256((const __m256i *)(src_ + c_)), subtab,   \
                                       (jb)->fnuz));                                               \
            if (c_ < D_) {                                                                         \
                const __mmask32 m_ = (__mmask32)((1ull << (D_ - c_)) - 1);                         \
                PUT(i_, fp8x32_to_bf16(_mm256_maskz_loadu_epi8(m_, src_ + c_), subtab,             \
                                       (jb)->fnuz));                                               \
            }                                                                                      \
        }                                                                                          \
    } while (0)

MLA_CPU_INLINE float key_scale(const logits_job *jb, const key_cursor *kc)
{
    return mla_il_get_scale(kc->blk + mla_il_scale_byte(kc->t, jb->a->desc.block_size, jb->D));
}

/* The cursor's key as bf16 pairs [KS] (64-byte aligned rows); its scale. */
MLA_TARGET_AVX512 static inline float key_bf16(const logits_job *jb, const key_cursor *kc,
                                               __m512i subtab, uint32_t *out)
{
    __m512i *o = (__m512i *)out;
#define PUT_BF16(i, v) _mm512_store_si512(o + (i), (v))
    MLA_IDX_DECODE_KEY(jb, kc, subtab, PUT_BF16);
#undef PUT_BF16
    return key_scale(jb, kc);
}

/* The cursor's key as fp32 [2 KS] (64-byte aligned rows); its scale. A bf16
 * is the top half of its fp32. */
MLA_TARGET_AVX512 static inline float key_fp32(const logits_job *jb, const key_cursor *kc,
                                               __m512i subtab, float *out)
{
#define PUT_F32(i, v)                                                                              \
    do {                                                                                           \
        const __m512i w_ = (v);                                                                    \
        const __m512i wl_ = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(w_));                     \
        const __m512i wh_ = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(w_, 1));               \
        _mm512_store_si512(out + 32 * (i), _mm512_slli_epi32(wl_, 16));                            \
        _mm512_store_si512(out + 32 * (i) + 16, _mm512_slli_epi32(wh_, 16));                       \
    } while (0)
    MLA_IDX_DECODE_KEY(jb, kc, subtab, PUT_F32);
#undef PUT_F32
    return key_scale(jb, kc);
}

/* The tiles' loops over keys and head vectors run fully unrolled, so that
 * their accumulators live in registers (gcc leaves a 24-trip loop rolled). */
#define MLA_UNROLL _Pragma("GCC unroll 32")

/* HV vectors of 16 heads against NK keys: acc[n][v] over all pairs (one
 * vdpbf16ps each, k's pair broadcast from memory), then L updated. */
#define MLA_IDX_TILE(HV, NK)                                                                       \
    MLA_TARGET_AVX512_BF16 static void tile_##HV##_##NK(const uint32_t *qg, const float *wg,       \
                                                         const uint32_t *kb, int64_t ks,           \
                                                         int64_t P, float *L, int first)           \
    {                                                                                              \
        __m512 acc[NK][HV];                                                                        \
        MLA_UNROLL for (int n = 0; n < NK; ++n)                                                    \
            MLA_UNROLL for (int v = 0; v < HV; ++v)                                                \
                acc[n][v] = _mm512_setzero_ps();                                                   \
        for (int64_t p = 0; p < P; ++p) {                                                          \
            __m512bh qv[HV];                                                                       \
            MLA_UNROLL for (int v = 0; v < HV; ++v)                                                \
                qv[v] = (__m512bh)_mm512_load_si512(qg + p * GROUP_HEADS + v * LANES);             \
            MLA_UNROLL for (int n = 0; n < NK; ++n) {                                              \
                const __m512bh kv = (__m512bh)_mm512_set1_epi32((int)kb[n * ks + p]);              \
                MLA_UNROLL for (int v = 0; v < HV; ++v)                                            \
                    acc[n][v] = _mm512_dpbf16_ps(acc[n][v], qv[v], kv);                            \
            }                                                                                      \
        }                                                                                          \
        const __m512 zero = _mm512_setzero_ps();                                                   \
        MLA_UNROLL for (int n = 0; n < NK; ++n) {                                                  \
            __m512 s = first ? zero : _mm512_loadu_ps(L + n * LANES);                              \
            MLA_UNROLL for (int v = 0; v < HV; ++v) /* max(0, d) returns d for a NaN d */          \
                s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_loadu_ps(wg + v * LANES),                \
                                                   _mm512_max_ps(zero, acc[n][v])));               \
            _mm512_storeu_ps(L + n * LANES, s);                                                    \
        }                                                                                          \
    }

MLA_IDX_TILE(4, 6)
MLA_IDX_TILE(3, 8)
MLA_IDX_TILE(2, 12)
MLA_IDX_TILE(1, 16)
MLA_IDX_TILE(3, 6)
MLA_IDX_TILE(2, 6)
MLA_IDX_TILE(1, 6)

/* The same with fp32 FMA, for AVX-512 CPUs without BF16: q as fp32 [P][2][64]
 * (even dims, then odd), keys as fp32 rows; per pair the odd product first,
 * then the even one, each FMA one rounding of an exact product: the same
 * bits as vdpbf16ps. */
#define MLA_IDX_FTILE(HV, NK)                                                                      \
    MLA_TARGET_AVX512 static void ftile_##HV##_##NK(const float *qg, const float *wg,              \
                                                    const float *kf, int64_t ks, int64_t P,        \
                                                    float *L, int first)                           \
    {                                                                                              \
        __m512 acc[NK][HV];                                                                        \
        MLA_UNROLL for (int n = 0; n < NK; ++n)                                                    \
            MLA_UNROLL for (int v = 0; v < HV; ++v)                                                \
                acc[n][v] = _mm512_setzero_ps();                                                   \
        for (int64_t p = 0; p < P; ++p) {                                                          \
            __m512 q0[HV], q1[HV];                                                                 \
            MLA_UNROLL for (int v = 0; v < HV; ++v) {                                              \
                q0[v] = _mm512_load_ps(qg + p * 2 * GROUP_HEADS + v * LANES);                      \
                q1[v] = _mm512_load_ps(qg + p * 2 * GROUP_HEADS + GROUP_HEADS + v * LANES);        \
            }                                                                                      \
            MLA_UNROLL for (int n = 0; n < NK; ++n) {                                              \
                const __m512 k1 = _mm512_set1_ps(kf[n * ks + 2 * p + 1]);                          \
                const __m512 k0 = _mm512_set1_ps(kf[n * ks + 2 * p]);                              \
                MLA_UNROLL for (int v = 0; v < HV; ++v)                                            \
                    acc[n][v] = _mm512_fmadd_ps(q0[v], k0, _mm512_fmadd_ps(q1[v], k1, acc[n][v])); \
            }                                                                                      \
        }                                                                                          \
        const __m512 zero = _mm512_setzero_ps();                                                   \
        MLA_UNROLL for (int n = 0; n < NK; ++n) {                                                  \
            __m512 s = first ? zero : _mm512_loadu_ps(L + n * LANES);                              \
            MLA_UNROLL for (int v = 0; v < HV; ++v)                                                \
                s = _mm512_add_ps(s, _mm512_mul_ps(_mm512_loadu_ps(wg + v * LANES),                \
                                                   _mm512_max_ps(zero, acc[n][v])));               \
            _mm512_storeu_ps(L + n * LANES, s);                                                    \
        }                                                                                          \
    }

MLA_IDX_FTILE(4, 4)
MLA_IDX_FTILE(3, 5)
MLA_IDX_FTILE(2, 8)
MLA_IDX_FTILE(1, 12)
MLA_IDX_FTILE(3, 4)
MLA_IDX_FTILE(2, 4)
MLA_IDX_FTILE(1, 4)

typedef void (*ftile_fn)(const float *, const float *, const float *, int64_t, int64_t, float *,
                         int);

/* nk of nk_fma, or 4 when the row has several groups. */
static ftile_fn pick_ftile(int hv, int nk)
{
    if (nk == 4)
        return hv == 4 ? ftile_4_4 : hv == 3 ? ftile_3_4 : hv == 2 ? ftile_2_4 : ftile_1_4;
    return hv == 3 ? ftile_3_5 : hv == 2 ? ftile_2_8 : ftile_1_12;
}

typedef void (*tile_fn)(const uint32_t *, const float *, const uint32_t *, int64_t, int64_t,
                        float *, int);

/* The tile for hv vectors in blocks of nk keys (nk of nk_bf16, or 6 when
 * the row has several groups). */
static tile_fn pick_tile(int hv, int nk)
{
    if (nk == 6)
        return hv == 4 ? tile_4_6 : hv == 3 ? tile_3_6 : hv == 2 ? tile_2_6 : tile_1_6;
    return hv == 3 ? tile_3_8 : hv == 2 ? tile_2_12 : tile_1_16;
}

MLA_TARGET_AVX512_BF16 static void row_keys_bf16(const logits_job *jb, int64_t r, int64_t n0,
                                                 int64_t n1, const logits_scratch *s)
{
    const mla_indexer_logits_args *a = jb->a;
    const int64_t b = r / a->next_n, P = jb->P, KS = jb->KS;
    uint32_t *kb = (uint32_t *)s->k;
    float *L = s->L;
    float ks[NK_MAX];
    uint16_t sub[32] = {0};
    for (int m = 0; m < 8; ++m)
        sub[m] = jb->lut[m];
    const __m512i subtab = _mm512_loadu_si512(sub);
    const tile_fn full = pick_tile(HV_MAX, jb->nk), last = pick_tile(jb->hv_last, jb->nk);
    float *out = (float *)a->logits.data + r * a->logits.stride[0];
    key_cursor kc = cursor_at(a, b, n0);
    for (int64_t n = n0; n < n1; n += jb->nk) {
        const int nk = (int)(n1 - n < jb->nk ? n1 - n : jb->nk);
        for (int i = 0; i < nk; ++i) {
            ks[i] = key_bf16(jb, &kc, subtab, kb + i * KS);
            cursor_next(a, b, n + i + 1, n1, &kc);
        }
        if (nk < jb->nk) /* a short block: zero keys, results unused */
            memset(kb + nk * KS, 0, (size_t)((jb->nk - nk) * KS) * sizeof *kb);
        for (int64_t g = 0; g < jb->G; ++g)
            (g == jb->G - 1 ? last : full)((const uint32_t *)s->q + g * P * GROUP_HEADS,
                                           s->w + g * GROUP_HEADS, kb, KS, P, L, g == 0);
        for (int i = 0; i < nk; ++i)
            out[(n + i) * a->logits.stride[1]] = tree16(L + i * LANES) * ks[i];
    }
}

MLA_TARGET_AVX512 static void row_keys_fma(const logits_job *jb, int64_t r, int64_t n0, int64_t n1,
                                           const logits_scratch *s)
{
    const mla_indexer_logits_args *a = jb->a;
    const int64_t b = r / a->next_n, P = jb->P, KS = 2 * jb->KS;
    float *kf = (float *)s->k;
    float *L = s->L;
    float ks[NK_MAX];
    uint16_t sub[32] = {0};
    for (int m = 0; m < 8; ++m)
        sub[m] = jb->lut[m];
    const __m512i subtab = _mm512_loadu_si512(sub);
    const ftile_fn full = pick_ftile(HV_MAX, jb->nk), last = pick_ftile(jb->hv_last, jb->nk);
    float *out = (float *)a->logits.data + r * a->logits.stride[0];
    key_cursor kc = cursor_at(a, b, n0);
    for (int64_t n = n0; n < n1; n += jb->nk) {
        const int nk = (int)(n1 - n < jb->nk ? n1 - n : jb->nk);
        for (int i = 0; i < nk; ++i) {
            ks[i] = key_fp32(jb, &kc, subtab, kf + i * KS);
            cursor_next(a, b, n + i + 1, n1, &kc);
        }
        if (nk < jb->nk) /* a short block: zero keys, results unused */
            memset(kf + nk * KS, 0, (size_t)((jb->nk - nk) * KS) * sizeof *kf);
        for (int64_t g = 0; g < jb->G; ++g)
            (g == jb->G - 1 ? last : full)((const float *)s->q + g * P * 2 * GROUP_HEADS,
                                           s->w + g * GROUP_HEADS, kf, KS, P, L, g == 0);
        for (int i = 0; i < nk; ++i)
            out[(n + i) * a->logits.stride[1]] = tree16(L + i * LANES) * ks[i];
    }
}
#endif

/* The path this call takes. The AVX-512 copy: vdpbf16ps tiles when the CPU
 * has AVX512_BF16, else fp32 FMA tiles (tuning.cpu_isa avx512-nobf16 picks
 * them on a BF16 CPU, so tests can run both there). Other copies: the fp32
 * loop. */
enum { PATH_F32 = 0, PATH_FMA512 = 1, PATH_BF16 = 2 };

static int pick_path(const mla_context *ctx, mla_cpu_isa isa)
{
#if MLA_CPU_X86
    if (isa == MLA_CPU_ISA_AVX512) {
        if (mla_cpu_has_bf16(ctx))
            return PATH_BF16;
        return PATH_FMA512;
    }
#endif
    (void)ctx, (void)isa;
    return PATH_F32;
}

mla_status mla_cpu_indexer_logits(mla_context *ctx, const mla_indexer_logits_args *a)
{
    const int64_t R = a->logits.shape[0], N = a->logits.shape[1];
    logits_job jb;
    jb.a = a;
    jb.D = a->desc.head_dim;
    jb.P = (jb.D + 1) / 2;
    jb.KS = (jb.P + KB_ALIGN / 2 - 1) / (KB_ALIGN / 2) * (KB_ALIGN / 2);
    jb.Hi = a->q.shape[1];
    const int64_t V = jb.Hi > 0 ? (jb.Hi + LANES - 1) / LANES : 1; /* Hi = 0: zero heads, sum +0 */
    jb.G = (V + HV_MAX - 1) / HV_MAX;
    jb.hv_last = (int)(V - (jb.G - 1) * HV_MAX);
    const mla_cpu_isa isa = mla_cpu_isa_of(ctx);
    const int path = pick_path(ctx, isa), bf16 = path == PATH_BF16;
    /* keys per tile: NK x HV accumulators and the q vectors in 32 zmm */
    static const int nk_bf16[HV_MAX + 1] = {0, 16, 12, 8, 6}, nk_fma[HV_MAX + 1] = {0, 12, 8, 5, 4};
    if (path == PATH_FMA512)
        jb.nk = jb.G > 1 ? 4 : nk_fma[jb.hv_last];
    else
        jb.nk = jb.G > 1 ? 6 : nk_bf16[jb.hv_last];
    jb.fnuz = a->desc.dtype == MLA_DTYPE_FP8_E4M3FNUZ;
    for (int c = 0; c < 256; ++c)
        jb.lut[c] = (uint16_t)(mla_fb_bits(jb.fnuz ? mla_fb_e4m3fnuz_to_f32((uint8_t)c)
                                                   : mla_fb_e4m3fn_to_f32((uint8_t)c)) >>
                               16);
    const row_keys_fn f32 = MLA_CPU_PICK(isa, row_keys);

    int64_t *bound; /* R <= logits' elements / 4: 2 R + 1 fits */
    MLA_TRY(mla_alloc_array(ctx, (void **)&bound, 2 * R + 1, 1, sizeof *bound, "logits"));
    int64_t *first = bound + R; /* first[r]: row r's first task */
    int64_t total = 0;          /* <= R * N, logits' elements */
    for (int64_t r = 0; r < R; ++r) {
        bound[r] = row_bound(a, r);
        total += bound[r];
    }
    const int nt =
        mla_cpu_threads(ctx, total / CHUNK_MIN + 1, mla_sz_sat(mla_sz_mul3(total, jb.Hi, jb.D)));
    /* about 8 tasks per thread, within [CHUNK_MIN, CHUNK_MAX] keys */
    int64_t chunk = total / (8 * (int64_t)nt) / CHUNK_MIN * CHUNK_MIN;
    chunk = chunk < CHUNK_MIN ? CHUNK_MIN : chunk > CHUNK_MAX ? CHUNK_MAX : chunk;
    first[0] = 0;
    for (int64_t r = 0; r < R; ++r)
        first[r + 1] = first[r] + (bound[r] + chunk - 1) / chunk;
    const int64_t tasks = first[R];

    /* Per thread: q (fp32 path: 2 floats per pair and head), w, NK_MAX keys
     * (fp32 path: 2 floats per pair), lane sums; 64-byte aligned pieces. */
    const int64_t qb = mla_sz_round_up(mla_sz_mul4(jb.G, jb.P, GROUP_HEADS, bf16 ? 4 : 8), 64);
    const int64_t wb = mla_sz_round_up(mla_sz_mul(jb.G, GROUP_HEADS * 4), 64);
    const int64_t kbb = mla_sz_round_up(mla_sz_mul(NK_MAX * (bf16 ? 4 : 8), jb.KS), 64);
    const int64_t per = mla_sz_add(mla_sz_add(qb, wb), mla_sz_add(kbb, NK_MAX * LANES * 4));
    size_t bytes; /* a multiple of 64, as aligned_alloc wants */
    if (!mla_ck_bytes(per, nt, 1, &bytes)) {
        free(bound);
        return mla_fail(ctx, MLA_ERR_OVERFLOW, "q", "q: %d x %lld scratch bytes overflow", nt,
                        (long long)per);
    }
    uint8_t *mem = aligned_alloc(64, bytes);
    if (!mem) {
        free(bound);
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "q", "no memory for %zu scratch bytes", bytes);
    }

#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int id = 0, cnt = 1;
#if defined(MLA_HAVE_OPENMP)
        id = omp_get_thread_num();
        cnt = omp_get_num_threads();
#endif
        uint8_t *base = mem + (int64_t)id * per;
        logits_scratch s;
        s.q = base;
        s.w = (float *)(base + qb);
        s.k = base + qb + wb;
        s.L = (float *)(base + qb + wb + kbb);
        /* -inf past each row's bound: rows split over the threads */
        for (int64_t r = R * id / cnt; r < R * (id + 1) / cnt; ++r) {
            float *out = (float *)a->logits.data + r * a->logits.stride[0];
            for (int64_t n = bound[r]; n < N; ++n)
                out[n * a->logits.stride[1]] = -INFINITY;
        }
        int64_t packed = -1, r = 0; /* the row whose q is in s; the row of task i */
#if defined(MLA_HAVE_OPENMP)
#pragma omp for schedule(dynamic, 1)
#endif
        for (int64_t i = 0; i < tasks; ++i) {
            if (i < first[r] || i >= first[r + 1]) { /* tasks are handed out in order */
                int64_t lo = 0, hi = R - 1;       /* the last row with first[r] <= i */
                while (lo < hi) {
                    const int64_t mid = (lo + hi + 1) / 2;
                    if (first[mid] <= i)
                        lo = mid;
                    else
                        hi = mid - 1;
                }
                r = lo;
            }
            const int64_t n0 = (i - first[r]) * chunk;
            const int64_t n1 = n0 + chunk < bound[r] ? n0 + chunk : bound[r];
            if (packed != r) {
                pack_w(&jb, r, s.w);
#if MLA_CPU_X86
                if (bf16)
                    pack_q_bf16(&jb, r, (uint32_t *)s.q);
                else
#endif
                    pack_q_f32(&jb, r, (float *)s.q);
                packed = r;
            }
#if MLA_CPU_X86
            if (path == PATH_BF16) {
                row_keys_bf16(&jb, r, n0, n1, &s);
                continue;
            }
            if (path == PATH_FMA512) {
                row_keys_fma(&jb, r, n0, n1, &s);
                continue;
            }
#endif
            f32(&jb, r, n0, n1, &s);
        }
    }
    free(mem);
    free(bound);
    return MLA_OK;
}
