/* CPU fp8 group quant: x [M, K] (F32, BF16, F16) -> fp8 codes [M, K] (the
 * codes' dtype picks e4m3fn or e4m3fnuz) and one F32 scale per group of
 * `group` values along K (mla_fp8_scale_rule; formulas in core/format_bits.h).
 *
 * amax follows the reference: max |x|, except that a group holding a NaN
 * takes its last NaN (with the sign cleared), like torch.amax's NaN
 * propagation does there. The integer order of |x|'s bits is the value order
 * and puts NaN above inf, so the vector pass is an integer max; the rare NaN
 * group is rescanned for its last NaN.
 * Tasks are runs of whole groups of one row, about TASK_VALUES values each. */
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"

#define TASK_VALUES 4096

/* codes (stride cs) of buf[0..n) for one group scale. rule and fnuz are
 * constants at each call site, so each variant is its own loop; rule only
 * chooses x * inv (AITER) or x / s (UE8M0 and DIV alike) here. */
MLA_CPU_INLINE void quant_loop(const float *buf, int64_t n, uint8_t *c, int64_t cs, float s,
                               float inv, int32_t rule, int fnuz)
{
    if (cs == 1) {
        MLA_SIMD for (int64_t i = 0; i < n; ++i) c[i] =
            mla_fb_fp8_group_code(buf[i], s, inv, rule, fnuz);
    } else {
        MLA_SIMD for (int64_t i = 0; i < n; ++i) c[i * cs] =
            mla_fb_fp8_group_code(buf[i], s, inv, rule, fnuz);
    }
}

/* max over buf[0..n) of the bits of |v|. */
MLA_CPU_INLINE uint32_t abs_bits_max(const float *buf, int64_t n, uint32_t amax)
{
    MLA_SIMD_MAX(amax) for (int64_t i = 0; i < n; ++i) {
        uint32_t m = mla_fb_bits(buf[i]) & 0x7FFFFFFFu;
        amax = m > amax ? m : amax;
    }
    return amax;
}

/* |x| of the last NaN among the G values of a group (one is known to be
 * there): the rare path, scalar and compiled once. */
static uint32_t last_nan(const void *x, mla_dtype xt, int64_t xs, int64_t G)
{
    uint32_t a = 0;
    for (int64_t i = G - 1; i >= 0; --i) {
        float v = 0.0f;
        mla_cpu_load_float(mla_cpu_row_at(x, xt, xs, i), xt, xs, 1, &v);
        a = mla_fb_bits(v) & 0x7FFFFFFFu;
        if (a > 0x7F800000u)
            break;
    }
    return a;
}

/* One group of G values: its scale, and its codes. Groups of up to one
 * buffer are loaded once; longer ones are read twice (amax, then codes). */
MLA_CPU_INLINE float group_body(const void *x, mla_dtype xt, int64_t xs, int64_t G, uint8_t *codes,
                                int64_t cs, int32_t rule, int fnuz)
{
    float buf[MLA_CPU_CHUNK];
    uint32_t amax = 0;
    for (int64_t i = 0; i < G; i += MLA_CPU_CHUNK) {
        int64_t c = G - i < MLA_CPU_CHUNK ? G - i : MLA_CPU_CHUNK;
        mla_cpu_load_float(mla_cpu_row_at(x, xt, xs, i), xt, xs, c, buf);
        amax = abs_bits_max(buf, c, amax);
    }
    if (amax > 0x7F800000u) /* a NaN: the reference keeps the last one */
        amax = last_nan(x, xt, xs, G);
    float s = mla_fb_fp8_group_scale(mla_fb_float(amax), rule, fnuz);
    float inv = mla_fb_div(1.0f, s); /* AITER multiplies by the fp32 reciprocal */
    for (int64_t i = 0; i < G; i += MLA_CPU_CHUNK) {
        int64_t c = G - i < MLA_CPU_CHUNK ? G - i : MLA_CPU_CHUNK;
        if (G > MLA_CPU_CHUNK)
            mla_cpu_load_float(mla_cpu_row_at(x, xt, xs, i), xt, xs, c, buf);
        uint8_t *ci = codes + i * cs;
        if (rule == MLA_FB_FP8_RULE_AITER)
            fnuz ? quant_loop(buf, c, ci, cs, s, inv, MLA_FB_FP8_RULE_AITER, 1)
                 : quant_loop(buf, c, ci, cs, s, inv, MLA_FB_FP8_RULE_AITER, 0);
        else
            fnuz ? quant_loop(buf, c, ci, cs, s, inv, MLA_FB_FP8_RULE_DIV, 1)
                 : quant_loop(buf, c, ci, cs, s, inv, MLA_FB_FP8_RULE_DIV, 0);
    }
    return s;
}

/* ng groups of one row; scales to sc (float stride ss). */
MLA_CPU_INLINE void groups_body(const void *x, mla_dtype xt, int64_t xs, int64_t G, int64_t ng,
                                uint8_t *codes, int64_t cs, float *sc, int64_t ss, int32_t rule,
                                int fnuz)
{
    for (int64_t g = 0; g < ng; ++g)
        sc[g * ss] = group_body(mla_cpu_row_at(x, xt, xs, g * G), xt, xs, G, codes + g * G * cs,
                                cs, rule, fnuz);
}

typedef void (*groups_fn)(const void *, mla_dtype, int64_t, int64_t, int64_t, uint8_t *, int64_t,
                          float *, int64_t, int32_t, int);

static void groups_generic(const void *x, mla_dtype xt, int64_t xs, int64_t G, int64_t ng,
                           uint8_t *codes, int64_t cs, float *sc, int64_t ss, int32_t rule,
                           int fnuz)
{
    groups_body(x, xt, xs, G, ng, codes, cs, sc, ss, rule, fnuz);
}

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void groups_avx2(const void *x, mla_dtype xt, int64_t xs, int64_t G,
                                        int64_t ng, uint8_t *codes, int64_t cs, float *sc,
                                        int64_t ss, int32_t rule, int fnuz)
{
    groups_body(x, xt, xs, G, ng, codes, cs, sc, ss, rule, fnuz);
}

MLA_TARGET_AVX512 static void groups_avx512(const void *x, mla_dtype xt, int64_t xs, int64_t G,
                                            int64_t ng, uint8_t *codes, int64_t cs, float *sc,
                                            int64_t ss, int32_t rule, int fnuz)
{
    groups_body(x, xt, xs, G, ng, codes, cs, sc, ss, rule, fnuz);
}
#endif

mla_status mla_cpu_fp8_group_quant(mla_context *ctx, const mla_fp8_group_quant_args *a)
{
    int64_t G = a->group, NG = a->K / G;
    int64_t per = TASK_VALUES / G > 1 ? TASK_VALUES / G : 1; /* groups per task */
    int64_t tiles = (NG + per - 1) / per, tasks = a->M * tiles;
    groups_fn run = MLA_CPU_PICK(mla_cpu_isa_of(ctx), groups);
    int64_t xsz = (int64_t)mla_dtype_size(a->x.dtype);
    int fnuz = a->codes.dtype == MLA_DTYPE_FP8_E4M3FNUZ;
    int32_t rule = (int32_t)a->rule;
    int nt = mla_cpu_threads(ctx, tasks, a->M * a->K);
    (void)nt;
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int64_t t = 0; t < tasks; ++t) {
        int64_t m = t / tiles, g0 = (t % tiles) * per;
        int64_t ng = NG - g0 < per ? NG - g0 : per;
        const char *x = (const char *)a->x.data + (m * a->x.stride[0] + g0 * G * a->x.stride[1]) * xsz;
        uint8_t *codes = (uint8_t *)a->codes.data + m * a->codes.stride[0] +
                         g0 * G * a->codes.stride[1];
        float *sc = (float *)a->scales.data + m * a->scales.stride[0] + g0 * a->scales.stride[1];
        run(x, a->x.dtype, a->x.stride[1], G, ng, codes, a->codes.stride[1], sc,
            a->scales.stride[1], rule, fnuz);
    }
    return MLA_OK;
}
