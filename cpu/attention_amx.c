/* The attention core's bf16 dot-product part on AMX (an attn_dp of
 * cpu/attention_internal.h, for CPUs with AMX-BF16: Sapphire Rapids on).
 * Same inputs and the same arithmetic as the vdpbf16ps part
 * (cpu/attention_bf16.c, which documents it and supplies the key copy):
 * TDPBF16PS multiplies bf16 pairs exactly and accumulates in fp32 with RNE,
 * inputs and results of each step flushed like vdpbf16ps's, so the driver's
 * safety test (mla_cpu_dp_safe) covers it; only the order of the fp32 adds
 * differs, which the conformance bound leaves free.
 *
 * Tiles (16 rows x 64 bytes each; C fp32, A and B bf16 pairs):
 *   scores  C = St [16 keys][16 pairs] += A (16 key rows of kb, 32 dims)
 *           x B (16 rows of q's pairs qp [d/2][mp], 16 pairs): q is already
 *           in the pair layout B wants, and St is the row layout C gives;
 *   P @ V   C = O [16 pairs][16 value dims] += A (P [pair][32 keys], bf16)
 *           x B (16 rows of vp [key pair][ls], 16 dims): the values paired
 *           over keys, as vdpbf16ps reads them; O's rows are C's rows.
 * Four C tiles are live at a time (one group of 16 pairs x 4 key blocks,
 * two groups x 2, or 4 blocks of value dims), so that each A or B tile
 * feeds two or four products. The key dim of the scores is in chunks of 32
 * and the values are paired 32 dims at a time, so the copy needs KS and LS
 * multiples of 32 (mla_cpu_attn_dp_amx_usable).
 *
 * Linux hands the tile state to a process that asks for it once
 * (arch_prctl ARCH_REQ_XCOMP_PERM); each call loads its tile configuration
 * and releases the tiles at its end. */
#define _GNU_SOURCE /* syscall */
#include "cpu/attention_internal.h"

#include "cpu/linear_kernel.h" /* mla_cpu_linear_min_exp */

#if MLA_CPU_X86 && defined(__linux__) && defined(__x86_64__)
#include <immintrin.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define AMX_TARGET __attribute__((target(MLA_AVX512_ISAS ",avx512bf16,amx-tile,amx-bf16")))
#define ARCH_REQ_XCOMP_PERM_ 0x1023
#define XFEATURE_XTILEDATA_ 18

/* The tile asm statements name only their base pointer: what C code wrote
 * just before a tile load must be in memory by then. */
#define AMX_MEMORY_BARRIER() __asm__ volatile("" ::: "memory")

typedef struct amx_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_config;

/* Tiles 0-3: C, 4-5: A, 6-7: B; all 16 rows x 64 bytes. */
AMX_TARGET static void amx_begin(void)
{
    _Alignas(64) amx_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; ++t) {
        c.rows[t] = 16;
        c.colsb[t] = 64;
    }
    AMX_MEMORY_BARRIER();
    _tile_loadconfig(&c);
}

int mla_cpu_attn_dp_amx_usable(int64_t KS, int64_t LS)
{
    static atomic_int state; /* 0 unknown, 1 usable, -1 not */
    int s = atomic_load_explicit(&state, memory_order_relaxed);
    if (s == 0) {
        const unsigned need = MLA_CPU_HAS_AMX_BF16 | MLA_CPU_HAS_AVX512_BF16;
        s = (mla_cpu_features() & need) == need &&
                    syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM_, XFEATURE_XTILEDATA_) == 0
                ? 1
                : -1;
        atomic_store_explicit(&state, s, memory_order_relaxed);
    }
    return s > 0 && KS % 32 == 0 && LS % 32 == 0;
}

/* St for one group of pairs (qp at its first lane) and nkb <= 4 blocks of 16
 * keys from key row a0. */
AMX_TARGET static void qk_group(const uint32_t *qp, int64_t mp, const uint32_t *kb, int64_t kbs,
                                int nkb, int64_t P, float *st, attn_pf *pf)
{
    const long qs = (long)(mp * 4), ks = (long)(kbs * 4), ss = (long)(mp * 4);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t p = 0; p < P; p += 16, attn_pf_step(pf)) {
        _tile_loadd(6, qp + p * mp, qs);
        _tile_loadd(4, kb + p, ks);
        _tile_dpbf16ps(0, 4, 6);
        if (nkb > 1) {
            _tile_loadd(5, kb + 16 * kbs + p, ks);
            _tile_dpbf16ps(1, 5, 6);
        }
        if (nkb > 2) {
            _tile_loadd(4, kb + 32 * kbs + p, ks);
            _tile_dpbf16ps(2, 4, 6);
        }
        if (nkb > 3) {
            _tile_loadd(5, kb + 48 * kbs + p, ks);
            _tile_dpbf16ps(3, 5, 6);
        }
    }
    _tile_stored(0, st, ss);
    if (nkb > 1)
        _tile_stored(1, st + 16 * mp, ss);
    if (nkb > 2)
        _tile_stored(2, st + 32 * mp, ss);
    if (nkb > 3)
        _tile_stored(3, st + 48 * mp, ss);
}

/* St for two groups of pairs and nkb <= 2 blocks of keys. */
AMX_TARGET static void qk_2groups(const uint32_t *qp, int64_t mp, const uint32_t *kb, int64_t kbs,
                                  int nkb, int64_t P, float *st, attn_pf *pf)
{
    const long qs = (long)(mp * 4), ks = (long)(kbs * 4), ss = (long)(mp * 4);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t p = 0; p < P; p += 16, attn_pf_step(pf)) {
        _tile_loadd(6, qp + p * mp, qs);
        _tile_loadd(7, qp + p * mp + VL, qs);
        _tile_loadd(4, kb + p, ks);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        if (nkb > 1) {
            _tile_loadd(5, kb + 16 * kbs + p, ks);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_stored(0, st, ss);
    _tile_stored(1, st + VL, ss);
    if (nkb > 1) {
        _tile_stored(2, st + 16 * mp, ss);
        _tile_stored(3, st + 16 * mp + VL, ss);
    }
}

/* attn_dp.qk; key rows from nk to the next multiple of 16 are zeros (the
 * driver's), so the blocks are whole and their extra rows of St unused. */
AMX_TARGET static void qk_amx(const uint32_t *qp, int64_t mp, int nv, const uint32_t *kb,
                              int64_t kbs, int nk, int64_t P, float *st, attn_pf *pf)
{
    const int nkb = (nk + 15) / 16;
    amx_begin();
    int v = 0;
    for (; v + 2 <= nv; v += 2)
        for (int b = 0; b < nkb; b += 2)
            qk_2groups(qp + VL * v, mp, kb + 16 * b * kbs, kbs, nkb - b < 2 ? nkb - b : 2, P,
                       st + 16 * b * mp + VL * v, pf);
    if (v < nv)
        qk_group(qp + VL * v, mp, kb, kbs, nkb, P, st + VL * v, pf);
    _tile_release();
}

/* O for 16 pairs (pa: their P as pairs of keys, 16 words a chunk of 32
 * keys, row stride 32 words; O at their rows) and nvb <= 4 blocks of 16
 * value dims from v0; nch chunks of keys. first: O starts from zero. */
AMX_TARGET static void pv_block(const uint32_t *pa, const uint32_t *vp, int64_t ls, int nch,
                                int nvb, float *o, int first)
{
    const long os = (long)(ls * 4), vs = (long)(ls * 4), as = 32 * 4;
    if (first) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    } else {
        _tile_loadd(0, o, os);
        if (nvb > 1)
            _tile_loadd(1, o + 16, os);
        if (nvb > 2)
            _tile_loadd(2, o + 32, os);
        if (nvb > 3)
            _tile_loadd(3, o + 48, os);
    }
    for (int c = 0; c < nch; ++c) {
        const uint32_t *b = vp + 16 * c * ls;
        _tile_loadd(4, pa + 16 * c, as);
        _tile_loadd(6, b, vs);
        _tile_dpbf16ps(0, 4, 6);
        if (nvb > 1) {
            _tile_loadd(7, b + 16, vs);
            _tile_dpbf16ps(1, 4, 7);
        }
        if (nvb > 2) {
            _tile_loadd(6, b + 32, vs);
            _tile_dpbf16ps(2, 4, 6);
        }
        if (nvb > 3) {
            _tile_loadd(7, b + 48, vs);
            _tile_dpbf16ps(3, 4, 7);
        }
    }
    _tile_stored(0, o, os);
    if (nvb > 1)
        _tile_stored(1, o + 16, os);
    if (nvb > 2)
        _tile_stored(2, o + 32, os);
    if (nvb > 3)
        _tile_stored(3, o + 48, os);
}

/* r[i] = column i of the 16 x 16 matrix of 32-bit words r[0..15] (rows). */
AMX_TARGET static void transpose16(__m512i r[16])
{
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    /* r[4g + c], 128-bit lane L: column 4L + c of rows 4g..4g+3 */
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* gather lane L of r[c], r[4 + c], r[8 + c], r[12 + c] into row 4L + c */
    for (int i = 0; i < 4; ++i) {
        t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xDD);
        t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xDD);
    }
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xDD);
        r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xDD);
    }
}

/* The bf16 (RNE) of 16 fp32 in the low halves of 16 words. */
AMX_TARGET static inline __m512i bf16_words(__m512 x)
{
    return _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x));
}

/* attn_dp.pv: pp holds P as [pair][32 key pairs] here (mp x 32 words, the
 * size of the [NKT / 2][mp] of the vdpbf16ps part). P's bf16 by
 * vcvtneps2bf16 (RNE; a P below 2^-126 becomes 0, as the bound allows). */
AMX_TARGET static void pv_amx(const float *st, int64_t mp, int nv, int nk, float pscale,
                              const uint16_t *kb, int64_t kbs, uint32_t *pp, uint32_t *vp,
                              int64_t ls, float *ot, const float *alpha, attn_pf *pf)
{
    const int np = (nk + 1) / 2, nch = (np + 15) / 16, npad = 16 * nch;
    const int64_t pairs = (int64_t)nv * VL;
    const __m512 ps = _mm512_set1_ps(pscale);
    for (int64_t m = 0; m < pairs; m += VL) /* P as pairs of keys, a row per pair */
        for (int c = 0; c < nch; ++c) {
            __m512i r[16];
            for (int i = 0; i < 16; ++i) {
                const int a = 2 * (16 * c + i);
                const __m512i lo =
                    a < nk ? bf16_words(_mm512_mul_ps(_mm512_loadu_ps(st + a * mp + m), ps))
                           : _mm512_setzero_si512();
                const __m512i hi =
                    a + 1 < nk
                        ? bf16_words(_mm512_mul_ps(_mm512_loadu_ps(st + (a + 1) * mp + m), ps))
                        : _mm512_setzero_si512();
                r[i] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
            }
            transpose16(r);
            for (int i = 0; i < 16; ++i)
                _mm512_storeu_si512(pp + (m + i) * 32 + 16 * c, r[i]);
        }
    /* values: the same pairs of keys, zeros past nk; 16-bit interleaves work
     * within 128-bit lanes, the 64-bit permutes put the lanes back in order */
    const __m512i lo_idx = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0),
                  hi_idx = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
    for (int j = 0; j < npad; ++j) {
        const uint16_t *v0 = kb + 2 * j * kbs, *v1 = v0 + kbs;
        const int lo = 2 * j < nk, hi = 2 * j + 1 < nk;
        uint32_t *o = vp + j * ls;
        for (int64_t d = 0; d < ls; d += 32) {
            const __m512i a = lo ? _mm512_loadu_si512(v0 + d) : _mm512_setzero_si512();
            const __m512i b = hi ? _mm512_loadu_si512(v1 + d) : _mm512_setzero_si512();
            const __m512i u = _mm512_unpacklo_epi16(a, b), w = _mm512_unpackhi_epi16(a, b);
            _mm512_storeu_si512(o + d, _mm512_permutex2var_epi64(u, lo_idx, w));
            _mm512_storeu_si512(o + d + 16, _mm512_permutex2var_epi64(u, hi_idx, w));
        }
    }
    if (alpha) /* rows whose maximum did not move have alpha 1: nothing to do */
        for (int64_t m = 0; m < pairs; ++m)
            if (alpha[m] != 1.0f) {
                const __m512 al = _mm512_set1_ps(alpha[m]);
                float *o = ot + m * ls;
                for (int64_t d = 0; d < ls; d += VL)
                    _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_loadu_ps(o + d), al));
            }
    AMX_MEMORY_BARRIER();
    amx_begin();
    const int nvb = (int)(ls / 16);
    for (int64_t m = 0; m < pairs; m += 16)
        for (int b = 0; b < nvb; b += 4, attn_pf_step(pf))
            pv_block(pp + m * 32, vp + 16 * b, ls, nch, nvb - b < 4 ? nvb - b : 4,
                     ot + m * ls + 16 * b, !alpha);
    _tile_release();
    attn_pf_drain(pf); /* the lines the pacing left over, if any */
}

/* The prefetch steps of qk_amx + pv_amx for one tile: one per chunk of 32
 * dims of a score block, one per P @ V block. */
static int64_t calls_amx(int nv, int nk, int64_t P, int64_t ls)
{
    const int64_t nkb = (nk + 15) / 16, chunks = P / 16;
    const int64_t qk = (nv / 2) * ((nkb + 1) / 2) * chunks + (nv % 2) * chunks;
    return qk + (int64_t)nv * ((ls / 16 + 3) / 4);
}

const attn_dp mla_cpu_attn_dp_amx = {mla_cpu_attn_copy_key_bf16, mla_cpu_linear_min_exp, qk_amx,
                                     pv_amx, calls_amx};

#else

int mla_cpu_attn_dp_amx_usable(int64_t KS, int64_t LS)
{
    (void)KS, (void)LS;
    return 0;
}

#endif
