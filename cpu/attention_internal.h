/* The CPU attention core's internal interface: cpu/attention.c (the driver:
 * tasks, q packing, key addressing, prefetch lists, the combine) calls the
 * tile kernels of one instruction set through an attn_kernels table:
 *
 *   cpu/attention_generic.c  portable C loops (the compiler vectorizes them)
 *   cpu/attention_avx2.c     AVX2 + FMA register tiles, 8-lane vectors
 *   cpu/attention_avx512.c   AVX-512 register tiles, 16-lane vectors
 *   (the last two instantiate the template cpu/attention_tiles.h)
 *   cpu/attention_bf16.c     the AVX512-BF16 dot-product part (vdpbf16ps
 *                            scores and P @ V on bf16 pairs), an attn_dp table
 *   cpu/attention_amx.c      the same on AMX tiles (TDPBF16PS), another one
 *
 * Data layout (cpu/attention.c explains the algorithm): (row, head) pairs lie
 * on the vector lanes, VL = 16 per group; a task holds at most MTASK pairs,
 * mp = 16 nv of them padded:
 *   Qt [D][mp] q transposed; Kt [NKT][KS] a tile of keys as fp32 rows;
 *   St [NKT][mp] scores, then probabilities; O [mp][LS] the running output,
 *   a row per pair (LS = L rounded up to 16; the dims past L are unused). */
#ifndef MLA_CPU_ATTENTION_INTERNAL_H
#define MLA_CPU_ATTENTION_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "core/format_bits.h"
#include "core/ref/cache_layout.h"
#include "cpu/cpu_kernels.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the CPU cache kernels read multi-byte fields in host order: little-endian hosts only"
#endif

#define VL 16     /* (row, head) pairs per group */
#define MTASK 128 /* (row, head) pairs per task, at most: 8 groups */
#define NKT 64    /* keys per tile */

#if defined(__GNUC__)
#define ATTN_PREFETCH(p) __builtin_prefetch((p), 0, 1) /* prefetcht2: L2 */
#else
#define ATTN_PREFETCH(p) ((void)(p))
#endif

/* The next tile's key bytes, as line runs, prefetched `per` lines at a time
 * between the register tiles of this tile's products (a burst of prefetches
 * at the decode would stall on the miss queue and come back too early). */
typedef struct attn_pf {
    const uint8_t *p[2 * NKT]; /* 64-byte aligned starts */
    int32_t lines[2 * NKT];
    int n, i;      /* runs; the run being issued */
    int32_t line;  /* next line of run i */
    int32_t per;   /* lines per step */
    int64_t total; /* lines in all runs */
} attn_pf;

MLA_CPU_INLINE void attn_pf_run(attn_pf *pf, const uint8_t *p, int64_t bytes)
{
    const uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
    const int32_t lines = (int32_t)(((uintptr_t)p + (uintptr_t)bytes - a + 63) / 64);
    pf->p[pf->n] = (const uint8_t *)a;
    pf->lines[pf->n++] = lines;
    pf->total += lines;
}

MLA_CPU_INLINE void attn_pf_step(attn_pf *pf);

/* Issues every line not issued yet. */
MLA_CPU_INLINE void attn_pf_drain(attn_pf *pf)
{
    while (pf->i < pf->n)
        attn_pf_step(pf);
}

MLA_CPU_INLINE void attn_pf_step(attn_pf *pf)
{
    int32_t k = pf->per;
    while (k > 0 && pf->i < pf->n) {
        const int32_t left = pf->lines[pf->i] - pf->line, take = left < k ? left : k;
        for (int32_t j = 0; j < take; ++j)
            ATTN_PREFETCH(pf->p[pf->i] + 64 * (int64_t)(pf->line + j));
        pf->line += take;
        k -= take;
        if (pf->line == pf->lines[pf->i])
            ++pf->i, pf->line = 0;
    }
}

/* How a cached token is stored: what the key decoders read. */
typedef struct attn_keyfmt {
    int layout;      /* MLA_CL_NORMAL / SHUFFLED / FP8_SCALED */
    mla_dtype kdt;   /* the cache's element type */
    int64_t L, R, D; /* D = L + R */
    int64_t KS;      /* the row stride of a decoded tile: D rounded up to 16 */
    int64_t bs;      /* block size */
    float k_scale;   /* fp8 NORMAL / SHUFFLED */
} attn_keyfmt;

/* The hot kernels of one instruction set. */
typedef struct attn_kernels {
    /* Token t of block blk as the fp32 row [k_nope | k_pe], zeros to KS:
     * bf16 as is, fp8 NORMAL / SHUFFLED fl(code * k_scale), FP8_SCALED
     * fl(code * s) and its bf16 rope dims (the reference's values). */
    void (*decode)(const attn_keyfmt *f, const uint8_t *blk, int64_t t, float *out);
    /* st[a][m] = sum_{d < D} qt[d][m] * kt[a][d], a < nk, m < 16 nv (row
     * strides mp, ks); each lane's sum in increasing d. */
    void (*qk)(const float *qt, int64_t mp, int nv, const float *kt, int64_t ks, int nk, int64_t D,
               float *st, attn_pf *pf);
    /* The online-softmax step on st (a < nk): scores times scale, -inf where
     * mask and kpos[a] > plim[m]; mx' = max(mx, max_a); alpha = e^(mx - mx');
     * P = e^(st - mx') in place; l = l alpha + sum_a P (mx' replaced by 0
     * while it is -inf). */
    void (*softmax)(float *st, int64_t mp, int nv, int nk, float scale, const int32_t *kpos,
                    const int32_t *plim, int mask, float *mx, float *l, float *alpha);
    /* ot[m][v] = (alpha ? alpha[m] ot[m][v] : 0) + sum_{a < nk} pt[a][m] kt[a][v] for
     * m < 16 nv, v < ls (a multiple of 16; row stride ls), each sum in increasing a. */
    void (*pv)(const float *pt, int64_t mp, int nv, const float *kt, int64_t ks, int nk, int64_t ls,
               float *ot, const float *alpha, attn_pf *pf);
    /* register-tile calls of qk + pv for one tile (each issues one prefetch
     * step), or NULL: the copy does not prefetch */
    int64_t (*calls)(int nv, int nk, int64_t ls);
    /* softmax with the template's inline exp polynomial (cpu/attention_tiles.h,
     * about 2 ulps) instead of a SLEEF call, or NULL: softmax only. The
     * expanded form's short rows (nope + R dims per score) make the exp a
     * larger share of its time than the absorbed form's. */
    void (*softmax_poly)(float *st, int64_t mp, int nv, int nk, float scale, const int32_t *kpos,
                         const int32_t *plim, int mask, float *mx, float *l, float *alpha);
} attn_kernels;

/* The AVX512-BF16 dot-product part (cpu/attention_bf16.c). */
typedef struct attn_dp {
    /* Token t of block blk as bf16 pairs in NORMAL order, zeros to KS values
     * (bf16 as stored; fp8 NORMAL / SHUFFLED codes as the exact bf16 of
     * their value; FP8_SCALED code * s and the bf16 rope dims). Returns 0
     * when a value is not exact in bf16. */
    int (*copy_key)(const attn_keyfmt *f, const uint8_t *blk, int64_t t, uint32_t *out);
    /* The smallest exponent field of the nonzero bf16 values p[0, n) (255: none). */
    int (*min_exp)(const uint16_t *p, int64_t n);
    /* qk from bf16 pairs by vdpbf16ps: st[a][m] = sum_{p < P} of the two
     * products of qp[p][m] and the pair p of key row kb + a * kbs (exact
     * products, fp32 adds). */
    void (*qk)(const uint32_t *qp, int64_t mp, int nv, const uint32_t *kb, int64_t kbs, int nk,
               int64_t P, float *st, attn_pf *pf);
    /* P @ V by vdpbf16ps: P (times pscale) rounded to bf16 (RNE) and paired
     * over keys into pp [NKT / 2][mp], the values (the first ls of each bf16
     * key row kb + a * kbs) paired over the same keys into vp [NKT / 2][ls],
     * then ot[m][v] = (alpha ? alpha[m] ot[m][v] : 0) + the sum over pairs. */
    void (*pv)(const float *st, int64_t mp, int nv, int nk, float pscale, const uint16_t *kb,
               int64_t kbs, uint32_t *pp, uint32_t *vp, int64_t ls, float *ot, const float *alpha,
               attn_pf *pf);
    /* prefetch steps of qk + pv for one tile (P pairs of dims), or NULL:
     * those of the attn_kernels' calls */
    int64_t (*calls)(int nv, int nk, int64_t P, int64_t ls);
} attn_dp;

extern const attn_kernels mla_cpu_attn_generic;
#if MLA_CPU_X86
extern const attn_kernels mla_cpu_attn_avx2; /* needs FMA as well */
extern const attn_kernels mla_cpu_attn_avx512;
extern const attn_dp mla_cpu_attn_dp_avx512; /* needs AVX512-BF16 */
extern const attn_dp mla_cpu_attn_dp_amx;    /* when mla_cpu_attn_dp_amx_usable */
/* attn_dp.copy_key of both (cpu/attention_bf16.c). */
int mla_cpu_attn_copy_key_bf16(const attn_keyfmt *f, const uint8_t *blk, int64_t t, uint32_t *out);
#endif
/* AMX-BF16 on this CPU, granted to the process, for key rows of KS and O
 * rows of LS values (multiples of 32) (cpu/attention_amx.c; the caller
 * checks the context's tuning). */
int mla_cpu_attn_dp_amx_usable(int64_t KS, int64_t LS);

/* ------------------------------------------------------------ key decode */

/* fp8 code -> fp32, the value of mla_fb_e4m3fn(uz)_to_f32 in a form that
 * vectorizes to a few integer ops: a normal code (exponent field e > 0)
 * is its magnitude bits moved to the fp32 fields, (c & 0x7F) << 20, with
 * the exponent rebiased by 127 - bias; a subnormal one is m * 2^(-bias-2)
 * (an exact int-to-float conversion and power-of-two product); then the
 * sign. NaN codes (e4m3fn: magnitude 0x7F; e4m3fnuz: 0x80) give the
 * reference's quiet NaN 0x7FC00000. */
MLA_CPU_INLINE float attn_fp8_value(uint32_t c, int fnuz)
{
    const uint32_t mag = c & 0x7Fu;
    const uint32_t nrm = (mag << 20) + ((fnuz ? 119u : 120u) << 23);
    const uint32_t sub = mla_fb_bits((float)(int32_t)(mag & 7u) * (fnuz ? 0x1p-10f : 0x1p-9f));
    const uint32_t is_sub = 0u - (uint32_t)(mag < 8u); /* all ones for e == 0 */
    const uint32_t v = (sub & is_sub) | (nrm & ~is_sub) | ((c & 0x80u) << 24);
    const uint32_t is_nan = 0u - (uint32_t)(fnuz ? c == 0x80u : mag == 0x7Fu);
    return mla_fb_float((MLA_FB_F32_QNAN & is_nan) | (v & ~is_nan));
}

/* n contiguous cache elements at p as fp32: bf16 widened (its bits are the
 * top half of the fp32), fp8 fl(code * s), one fp32 product as the
 * reference's mla_fb_mul (its NaN rule agrees: s is finite and not NaN, so a
 * NaN code's quiet NaN passes unchanged). */
MLA_CPU_INLINE void attn_decode_run(const uint8_t *restrict p, int64_t n, mla_dtype dt, float s,
                                    float *restrict out)
{
    if (dt == MLA_DTYPE_BF16) {
        MLA_SIMD for (int64_t i = 0; i < n; ++i)
        {
            uint16_t h;
            memcpy(&h, p + 2 * i, sizeof h); /* the cache need not be 2-byte aligned */
            out[i] = mla_fb_float((uint32_t)h << 16);
        }
    } else if (dt == MLA_DTYPE_FP8_E4M3FN) {
        MLA_SIMD for (int64_t i = 0; i < n; ++i) out[i] = attn_fp8_value(p[i], 0) * s;
    } else {
        MLA_SIMD for (int64_t i = 0; i < n; ++i) out[i] = attn_fp8_value(p[i], 1) * s;
    }
}

/* attn_kernels.decode, always inlined into each instruction set's copy. */
MLA_CPU_INLINE void attn_decode_key(const attn_keyfmt *f, const uint8_t *blk, int64_t t,
                                    float *restrict out)
{
    const int64_t L = f->L, R = f->R, D = f->D;
    if (f->layout == MLA_CL_FP8_SCALED) {
        for (int64_t g = 0; g < L / MLA_CL_SCALE_GROUP; ++g) {
            float s;
            memcpy(&s, blk + mla_cl_fp8s_scale_byte(t, g, L, R), sizeof s);
            attn_decode_run(blk + mla_cl_fp8s_value_byte(t, g * MLA_CL_SCALE_GROUP, L, R),
                            MLA_CL_SCALE_GROUP, f->kdt, s, out + g * MLA_CL_SCALE_GROUP);
        }
        attn_decode_run(blk + mla_cl_fp8s_rope_byte(t, 0, L, R), R, MLA_DTYPE_BF16, 1.0f, out + L);
    } else {
        const int64_t eb = f->kdt == MLA_DTYPE_BF16 ? 2 : 1;
        if (f->layout == MLA_CL_NORMAL) {
            attn_decode_run(blk + mla_cl_elem_byte(MLA_CL_NORMAL, t, 0, L, R, f->bs, eb), D, f->kdt,
                            f->k_scale, out);
        } else { /* L and R are multiples of K (validated): whole 16-byte tile rows */
            const int64_t K = mla_cl_shuffle_k(eb);
            for (int64_t i = 0; i < D; i += K)
                attn_decode_run(blk + mla_cl_elem_byte(MLA_CL_SHUFFLED, t, i, L, R, f->bs, eb), K,
                                f->kdt, f->k_scale, out + i);
        }
    }
    for (int64_t d = D; d < f->KS; ++d)
        out[d] = 0.0f;
}

#endif
