/* The reference prepare-path kernels through the public API, on small cases
 * whose answers are computed here independently (by hand or by a direct
 * double computation): RMSNorm, fused QK RMSNorm, RoPE and its table,
 * linear, batched GEMM, the latent cache layouts, the fused RoPE + cache op,
 * and bad input that must write nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ref/cache_layout.h"
#include "mla/mla.h"
#include "tests/test_ref_host.h"
#include "tests/test_util.h"

enum { SENTINEL = 0xAB };

static mla_context *ctx;

/* bf16 nearest to the double d (ties to even), without double rounding: the
 * fp32 rounding of d decides, unless it landed exactly on a bf16 tie while d
 * is not that float; then d's side of the tie decides. */
static uint16_t bf16_of_double(double d)
{
    float f = (float)d;
    uint32_t u = bits_of(f);
    if ((u & 0xFFFFu) != 0x8000u || (double)f == d)
        return mla_f32_to_bf16(f);
    return (uint16_t)((u >> 16) + (fabs(d) > fabs((double)f) ? 1u : 0u));
}

static int all_bytes(const void *p, size_t n, uint8_t b)
{
    const uint8_t *q = p;
    for (size_t i = 0; i < n; ++i)
        if (q[i] != b)
            return 0;
    return 1;
}

static int param_is(const char *name)
{
    return strcmp(mla_context_error_param(ctx), name) == 0;
}

/* ---------------------------------------------------------------- RMSNorm */

static void test_rmsnorm(void)
{
    /* Row 0: x = (3, 4), eps 0.5: mean(x^2) + eps = 12.5 + 0.5 = 13.
     * Row 1: x = (2, -2): mean 4 + 0.5, rms = 1.5 * sqrt(2). */
    float x[4] = {3.0f, 4.0f, 2.0f, -2.0f}, w[2] = {1.0f, 0.5f}, y[4];
    mla_tensor tx = tensor(x, MLA_DTYPE_F32, 2, 2, 2, 0), tw = tensor(w, MLA_DTYPE_F32, 1, 2, 0, 0);
    mla_tensor ty = tensor(y, MLA_DTYPE_F32, 2, 2, 2, 0);
    CHECK_STATUS(mla_rmsnorm(ctx, &tx, &tw, 0.5f, &ty), MLA_OK);
    CHECK(y[0] == (float)(3.0 / sqrt(13.0)));
    CHECK(y[1] == (float)(4.0 / sqrt(13.0) * 0.5));
    CHECK(y[2] == (float)(2.0 / sqrt(4.5)));
    CHECK(y[3] == (float)(-2.0 / sqrt(4.5) * 0.5));

    /* x = (1, 1, 1, 1), eps 0: y = w exactly, in bf16 too. */
    float ones[4] = {1, 1, 1, 1}, w4[4] = {1, -2, 3, 0.25f};
    uint16_t yb[4];
    mla_tensor t1 = tensor(ones, MLA_DTYPE_F32, 2, 1, 4, 0),
               tw4 = tensor(w4, MLA_DTYPE_F32, 1, 4, 0, 0);
    mla_tensor tyb = tensor(yb, MLA_DTYPE_BF16, 2, 1, 4, 0);
    CHECK_STATUS(mla_rmsnorm(ctx, &t1, &tw4, 0.0f, &tyb), MLA_OK);
    for (int i = 0; i < 4; ++i)
        CHECK(yb[i] == mla_f32_to_bf16(w4[i]));

    /* In place gives the bits of out of place (bf16, 3 x 8). */
    enum { T = 3, D = 8 };
    uint16_t xb[T * D], out[T * D], wb[D];
    for (int i = 0; i < T * D; ++i)
        xb[i] = mla_f32_to_bf16(val(i));
    for (int i = 0; i < D; ++i)
        wb[i] = mla_f32_to_bf16(val(100 + i));
    mla_tensor txb = tensor(xb, MLA_DTYPE_BF16, 2, T, D, 0),
               twb = tensor(wb, MLA_DTYPE_BF16, 1, D, 0, 0);
    mla_tensor tout = tensor(out, MLA_DTYPE_BF16, 2, T, D, 0);
    CHECK_STATUS(mla_rmsnorm(ctx, &txb, &twb, 1e-6f, &tout), MLA_OK);
    int expected_ok = 1;
    for (int t = 0; t < T; ++t) {
        double ss = 0;
        for (int d = 0; d < D; ++d)
            ss += (double)mla_bf16_to_f32(xb[t * D + d]) * mla_bf16_to_f32(xb[t * D + d]);
        double r = 1.0 / sqrt(ss / D + (double)1e-6f);
        for (int d = 0; d < D; ++d)
            expected_ok &= out[t * D + d] == bf16_of_double(mla_bf16_to_f32(xb[t * D + d]) * r *
                                                            mla_bf16_to_f32(wb[d]));
    }
    CHECK(expected_ok);
    CHECK_STATUS(mla_rmsnorm(ctx, &txb, &twb, 1e-6f, &txb), MLA_OK);
    CHECK(memcmp(xb, out, sizeof out) == 0);
}

/* Fused QK RMSNorm: kv as mla_rmsnorm; a quantized q_out equals the
 * quantizer applied to the normalized q rows rounded to fp32. */
static void test_qk_rmsnorm(void)
{
    enum { T = 2, DQ = 256, DK = 64 };
    static float q[T * DQ], qw[DQ], kv[T * DK], kvw[DK], qn[T * DQ], kv_ref[T * DK];
    static float kv_out[T * DK], qf[T * DQ];
    static uint8_t codes[T * DQ], codes_ref[T * DQ];
    static float sc[T * 2], sc_ref[T * 2];
    static uint8_t e8[T * 8], e8_ref[T * 8];
    for (int i = 0; i < T * DQ; ++i)
        q[i] = val(i) * (i % 7 == 0 ? 40.0f : 1.0f);
    for (int i = 0; i < DQ; ++i)
        qw[i] = 1.0f + val(300 + i) / 4;
    for (int i = 0; i < T * DK; ++i)
        kv[i] = val(1000 + i);
    for (int i = 0; i < DK; ++i)
        kvw[i] = val(2000 + i);
    const float eps = 1e-6f;
    for (int t = 0; t < T; ++t) { /* the normalized q rows, rounded to fp32 */
        double ss = 0;
        for (int d = 0; d < DQ; ++d)
            ss += (double)q[t * DQ + d] * q[t * DQ + d];
        double r = 1.0 / sqrt(ss / DQ + (double)eps);
        for (int d = 0; d < DQ; ++d)
            qn[t * DQ + d] = (float)(q[t * DQ + d] * r * qw[d]);
    }
    mla_tensor tq = tensor(q, MLA_DTYPE_F32, 2, T, DQ, 0),
               tqw = tensor(qw, MLA_DTYPE_F32, 1, DQ, 0, 0);
    mla_tensor tkv = tensor(kv, MLA_DTYPE_F32, 2, T, DK, 0),
               tkvw = tensor(kvw, MLA_DTYPE_F32, 1, DK, 0, 0);
    mla_tensor tkvo = tensor(kv_out, MLA_DTYPE_F32, 2, T, DK, 0);
    mla_tensor tkvr = tensor(kv_ref, MLA_DTYPE_F32, 2, T, DK, 0);
    mla_tensor tqn = tensor(qn, MLA_DTYPE_F32, 2, T, DQ, 0);
    CHECK_STATUS(mla_rmsnorm(ctx, &tkv, &tkvw, eps, &tkvr), MLA_OK);

    /* fp8: group 128, AITER scales. */
    mla_tensor tc = tensor(codes, MLA_DTYPE_FP8_E4M3FN, 2, T, DQ, 0);
    mla_tensor ts = tensor(sc, MLA_DTYPE_F32, 2, T, DQ / 128, 0);
    CHECK_STATUS(mla_fused_qk_rmsnorm(ctx, &tq, &tqw, eps, &tkv, &tkvw, eps, &tc, &ts, &tkvo),
                 MLA_OK);
    mla_tensor tcr = tensor(codes_ref, MLA_DTYPE_FP8_E4M3FN, 2, T, DQ, 0);
    mla_tensor tsr = tensor(sc_ref, MLA_DTYPE_F32, 2, T, DQ / 128, 0);
    CHECK_STATUS(mla_fp8_group_quant(ctx, &tqn, &tcr, &tsr, 128, MLA_FP8_SCALE_AITER), MLA_OK);
    CHECK(memcmp(codes, codes_ref, sizeof codes) == 0);
    CHECK(memcmp(sc, sc_ref, sizeof sc) == 0);
    CHECK(memcmp(kv_out, kv_ref, sizeof kv_out) == 0);

    /* MXFP4: production rule, row-major e8m0 scales. */
    mla_tensor tc4 = tensor(codes, MLA_DTYPE_FP4X2, 2, T, DQ / 2, 0);
    mla_tensor ts4 = tensor(e8, MLA_DTYPE_E8M0, 2, T, DQ / 32, 0);
    CHECK_STATUS(mla_fused_qk_rmsnorm(ctx, &tq, &tqw, eps, &tkv, &tkvw, eps, &tc4, &ts4, &tkvo),
                 MLA_OK);
    mla_tensor tcr4 = tensor(codes_ref, MLA_DTYPE_FP4X2, 2, T, DQ / 2, 0);
    mla_tensor tsr4 = tensor(e8_ref, MLA_DTYPE_E8M0, 2, T, DQ / 32, 0);
    CHECK_STATUS(
        mla_mxfp4_quant(ctx, &tqn, &tcr4, &tsr4, MLA_SCALE_ROW_MAJOR, MLA_MXFP4_PRODUCTION),
        MLA_OK);
    CHECK(memcmp(codes, codes_ref, T * DQ / 2) == 0);
    CHECK(memcmp(e8, e8_ref, sizeof e8) == 0);

    /* Unquantized F32 q_out: the normalized rows themselves. */
    mla_tensor tqf = tensor(qf, MLA_DTYPE_F32, 2, T, DQ, 0);
    CHECK_STATUS(mla_fused_qk_rmsnorm(ctx, &tq, &tqw, eps, &tkv, &tkvw, eps, &tqf, NULL, &tkvo),
                 MLA_OK);
    CHECK(memcmp(qf, qn, sizeof qf) == 0);
}

/* ------------------------------------------------------------------- RoPE */

/* A 4-row table for R = 4 (2 pairs): pos 0 identity, pos 1 a quarter turn,
 * pos 2 arbitrary (c, s) = (0.6, 0.8) and (0.3, -0.7), pos 3 a half turn. */
static float tab_cos[8] = {1, 1, 0, 0, 0.6f, 0.3f, -1, -1};
static float tab_sin[8] = {0, 0, 1, 1, 0.8f, -0.7f, 0, 0};

static void rotate_expected(const float *x, int neox, const float *c, const float *s, float *out)
{
    for (int i = 0; i < 2; ++i) {
        int ia = neox ? i : 2 * i, ib = neox ? i + 2 : 2 * i + 1;
        float ac = x[ia] * c[i], bs = x[ib] * s[i], as = x[ia] * s[i], bc = x[ib] * c[i];
        out[ia] = ac - bs;
        out[ib] = as + bc;
    }
}

static void test_rope(void)
{
    mla_tensor tcos = tensor(tab_cos, MLA_DTYPE_F32, 2, 4, 2, 0);
    mla_tensor tsin = tensor(tab_sin, MLA_DTYPE_F32, 2, 4, 2, 0);

    /* A quarter turn is exact: interleaved (a, b) -> (-b, a) per pair, NeoX
     * pairs (x0, x2), (x1, x3). */
    float x[4] = {1, 2, 3, 4}, y[4], yn[4];
    int32_t p1 = 1;
    mla_tensor tx = tensor(x, MLA_DTYPE_F32, 2, 1, 4, 0), ty = tensor(y, MLA_DTYPE_F32, 2, 1, 4, 0);
    mla_tensor tyn = tensor(yn, MLA_DTYPE_F32, 2, 1, 4, 0);
    mla_tensor tp1 = tensor(&p1, MLA_DTYPE_I32, 1, 1, 0, 0);
    CHECK_STATUS(mla_rope(ctx, &tcos, &tsin, &tp1, &tx, &ty, MLA_ROPE_INTERLEAVED), MLA_OK);
    CHECK(y[0] == -2 && y[1] == 1 && y[2] == -4 && y[3] == 3);
    CHECK_STATUS(mla_rope(ctx, &tcos, &tsin, &tp1, &tx, &tyn, MLA_ROPE_NEOX), MLA_OK);
    CHECK(yn[0] == -3 && yn[1] == -4 && yn[2] == 1 && yn[3] == 2);

    /* [T=4, H=2, D=6]: R = 4 rotated, dims 4 and 5 copied; bf16 in, bf16 out;
     * positions I32 and I64 agree; in place == out of place. */
    enum { T = 4, H = 2, D = 6 };
    uint16_t xb[T * H * D], ob[T * H * D], ob64[T * H * D], ip[T * H * D];
    int32_t pos32[T] = {2, 0, 3, 2};
    int64_t pos64[T] = {2, 0, 3, 2};
    for (int i = 0; i < T * H * D; ++i)
        xb[i] = mla_f32_to_bf16(val(i));
    memcpy(ip, xb, sizeof xb);
    mla_tensor txb = tensor(xb, MLA_DTYPE_BF16, 3, T, H, D),
               tob = tensor(ob, MLA_DTYPE_BF16, 3, T, H, D);
    mla_tensor tob64 = tensor(ob64, MLA_DTYPE_BF16, 3, T, H, D),
               tip = tensor(ip, MLA_DTYPE_BF16, 3, T, H, D);
    mla_tensor tp32 = tensor(pos32, MLA_DTYPE_I32, 1, T, 0, 0),
               tp64 = tensor(pos64, MLA_DTYPE_I64, 1, T, 0, 0);
    for (int style = 0; style < 2; ++style) {
        CHECK_STATUS(mla_rope(ctx, &tcos, &tsin, &tp32, &txb, &tob, (mla_rope_style)style), MLA_OK);
        CHECK_STATUS(mla_rope(ctx, &tcos, &tsin, &tp64, &txb, &tob64, (mla_rope_style)style),
                     MLA_OK);
        CHECK(memcmp(ob, ob64, sizeof ob) == 0);
        memcpy(ip, xb, sizeof xb);
        CHECK_STATUS(mla_rope(ctx, &tcos, &tsin, &tp32, &tip, &tip, (mla_rope_style)style), MLA_OK);
        CHECK(memcmp(ip, ob, sizeof ob) == 0);
        int ok = 1;
        for (int t = 0; t < T; ++t) {
            for (int h = 0; h < H; ++h) {
                const uint16_t *row = xb + (t * H + h) * D, *orow = ob + (t * H + h) * D;
                float in[4], want[4];
                for (int d = 0; d < 4; ++d)
                    in[d] = mla_bf16_to_f32(row[d]);
                rotate_expected(in, style, tab_cos + 2 * pos32[t], tab_sin + 2 * pos32[t], want);
                for (int d = 0; d < 4; ++d)
                    ok &= orow[d] == mla_f32_to_bf16(want[d]);
                ok &= orow[4] == row[4] && orow[5] == row[5];
            }
        }
        CHECK(ok);
    }
    CHECK(memcmp(ob, ob64, sizeof ob) == 0); /* NeoX result */

    /* Dims beyond R are converted: F32 x (not bf16-exact) into bf16 y. */
    float xf[6] = {1, 2, 3, 4, 1.0f + 1.0f / 1024, -3.3f};
    uint16_t yf[6];
    int32_t p0 = 0;
    mla_tensor txf = tensor(xf, MLA_DTYPE_F32, 2, 1, 6, 0),
               tyf = tensor(yf, MLA_DTYPE_BF16, 2, 1, 6, 0);
    mla_tensor tp0 = tensor(&p0, MLA_DTYPE_I32, 1, 1, 0, 0);
    CHECK_STATUS(mla_rope(ctx, &tcos, &tsin, &tp0, &txf, &tyf, MLA_ROPE_INTERLEAVED), MLA_OK);
    CHECK(yf[4] == mla_f32_to_bf16(xf[4]) && yf[5] == mla_f32_to_bf16(xf[5]));
    CHECK(yf[0] == mla_f32_to_bf16(1) && yf[3] == mla_f32_to_bf16(4)); /* position 0: identity */

    /* q_pe as a strided view inside q [T, H, 3 + 4], rotated in place: the
     * nope part stays, the view equals rotating a contiguous copy. */
    enum { NOPE = 3, W = NOPE + 4 };
    float qbuf[T * H * W], pe[T * H * 4], pe_rot[T * H * 4];
    for (int i = 0; i < T * H * W; ++i)
        qbuf[i] = val(500 + i);
    for (int t = 0; t < T * H; ++t)
        for (int d = 0; d < 4; ++d)
            pe[t * 4 + d] = qbuf[t * W + NOPE + d];
    float qsave[T * H * W];
    memcpy(qsave, qbuf, sizeof qbuf);
    mla_tensor tq = tensor(qbuf + NOPE, MLA_DTYPE_F32, 3, T, H, 4);
    tq.stride[0] = H * W;
    tq.stride[1] = W;
    mla_tensor tpe = tensor(pe, MLA_DTYPE_F32, 3, T, H, 4),
               tper = tensor(pe_rot, MLA_DTYPE_F32, 3, T, H, 4);
    CHECK_STATUS(mla_rope(ctx, &tcos, &tsin, &tp64, &tpe, &tper, MLA_ROPE_INTERLEAVED), MLA_OK);
    CHECK_STATUS(mla_rope(ctx, &tcos, &tsin, &tp64, &tq, &tq, MLA_ROPE_INTERLEAVED), MLA_OK);
    int ok = 1;
    for (int t = 0; t < T * H; ++t) {
        for (int d = 0; d < NOPE; ++d)
            ok &= bits_of(qbuf[t * W + d]) == bits_of(qsave[t * W + d]);
        for (int d = 0; d < 4; ++d)
            ok &= bits_of(qbuf[t * W + NOPE + d]) == bits_of(pe_rot[t * 4 + d]);
    }
    CHECK(ok);
}

/* The DeepSeek-V3 table: f_0 = 1 is outside YaRN's ramp (cos[p, 0] = cos p),
 * the top dims have f_i / 40, the ramp blends in between. */
static void test_rope_table(void)
{
    mla_model_config cfg;
    CHECK_STATUS(mla_model_config_preset("DeepSeek-V3", &cfg), MLA_OK);
    const mla_rope_config *rc = &cfg.rope_cfg;
    enum { P = 16, HALF = 32 };
    static float c[P * HALF], s[P * HALF];
    CHECK(rc->dim == 2 * HALF);
    CHECK_STATUS(mla_rope_table_build(rc, P, c, s), MLA_OK);
    int ok0 = 1;
    for (int p = 0; p < P; ++p)
        ok0 &= c[p * HALF] == (float)cos((double)p) && s[p * HALF] == (float)sin((double)p);
    CHECK(ok0);

    /* corr(r) = R ln(4096 / (2 pi r)) / (2 ln 10000): 10.47 for r = 32, 22.5 for r = 1. */
    const double pi = 3.14159265358979323846, R = 64.0;
    double low = floor(R * log(4096.0 / (2 * pi * 32.0)) / (2 * log(10000.0)));
    double high = ceil(R * log(4096.0 / (2 * pi * 1.0)) / (2 * log(10000.0)));
    CHECK(low == 10.0 && high == 23.0);
    int ok_hi = 1, ok_ramp = 1, scaled = 1;
    const double tol = 1.0 / (1 << 22); /* relative: two fp32 ulps */
    for (int i = 0; i < HALF; ++i) {
        double f = pow(10000.0, -(double)(2 * i) / R);
        double ramp = fmin(fmax((i - low) / (high - low), 0.0), 1.0);
        double fy = f / 40.0 * ramp + f * (1.0 - ramp);
        for (int p = 1; p < P; ++p) {
            double cs = c[p * HALF + i], sn = s[p * HALF + i];
            if (i >= 23) { /* ramp 1: the frequency is f_i / 40 */
                ok_hi &= fabs(sn - sin(p * f / 40.0)) <= tol * fabs(sin(p * f / 40.0));
                scaled &= fabs(40.0 * sn - sin(p * f)) <= 1e-3 * fabs(sin(p * f));
            }
            ok_ramp &= fabs(cs - cos(p * fy)) <= tol &&
                       fabs(sn - sin(p * fy)) <= tol * fabs(sin(p * fy)) + 1e-30;
        }
    }
    CHECK(ok_hi);
    CHECK(ok_ramp);
    CHECK(scaled);
}

/* ------------------------------------------------------------ projections */

static void test_linear(void)
{
    /* bf16: y[t, n] = sum_k x[t, k] W[n, k], compared with the double sum. */
    enum { T = 3, K = 5, N = 4 };
    uint16_t xb[T * K], wb[N * K];
    float y[T * N];
    for (int i = 0; i < T * K; ++i)
        xb[i] = mla_f32_to_bf16(val(i));
    for (int i = 0; i < N * K; ++i)
        wb[i] = mla_f32_to_bf16(val(50 + i));
    mla_tensor tx = tensor(xb, MLA_DTYPE_BF16, 2, T, K, 0),
               tw = tensor(wb, MLA_DTYPE_BF16, 2, N, K, 0);
    mla_tensor ty = tensor(y, MLA_DTYPE_F32, 2, T, N, 0);
    CHECK_STATUS(mla_linear(ctx, &tx, &tw, NULL, &ty), MLA_OK);
    int ok = 1;
    for (int t = 0; t < T; ++t)
        for (int n = 0; n < N; ++n) {
            double acc = 0;
            for (int k = 0; k < K; ++k)
                acc += (double)mla_bf16_to_f32(xb[t * K + k]) * mla_bf16_to_f32(wb[n * K + k]);
            ok &= y[t * N + n] == (float)acc;
        }
    CHECK(ok);

    /* One rounding from double: 1 + 2^-8 + 2^-30 is above a bf16 tie, but its
     * fp32 rounding is the tie itself (which would round down to 1). */
    float x3[3] = {1.0f, 1.0f / 256, 1.0f / 1073741824.0f};
    uint16_t w3[3] = {0x3F80, 0x3F80, 0x3F80}, y3;
    mla_tensor tx3 = tensor(x3, MLA_DTYPE_F32, 2, 1, 3, 0),
               tw3 = tensor(w3, MLA_DTYPE_BF16, 2, 1, 3, 0);
    mla_tensor ty3 = tensor(&y3, MLA_DTYPE_BF16, 2, 1, 1, 0);
    CHECK_STATUS(mla_linear(ctx, &tx3, &tw3, NULL, &ty3), MLA_OK);
    CHECK(y3 == 0x3F81); /* 1 + 2^-7 */

    /* fp8 W [130, 200] with 2 x 2 block scales, y bf16. */
    enum { T8 = 2, K8 = 200, N8 = 130 };
    static float x8[T8 * K8];
    static uint8_t w8[N8 * K8];
    static uint16_t y8[T8 * N8];
    float ws[4] = {0.5f, 0.125f, 3.0f, 0.0625f};
    for (int i = 0; i < T8 * K8; ++i)
        x8[i] = val(3000 + i) * 1.001f;
    for (int i = 0; i < N8 * K8; ++i) {
        uint8_t code = (uint8_t)((uint32_t)i * 2654435761u >> 24);
        w8[i] = (code & 0x7F) == 0x7F ? 0x3C : code; /* no NaN codes */
    }
    mla_tensor tx8 = tensor(x8, MLA_DTYPE_F32, 2, T8, K8, 0);
    mla_tensor tw8 = tensor(w8, MLA_DTYPE_FP8_E4M3FN, 2, N8, K8, 0);
    mla_tensor tws = tensor(ws, MLA_DTYPE_F32, 2, 2, 2, 0),
               ty8 = tensor(y8, MLA_DTYPE_BF16, 2, T8, N8, 0);
    CHECK_STATUS(mla_linear(ctx, &tx8, &tw8, &tws, &ty8), MLA_OK);
    ok = 1;
    for (int t = 0; t < T8; ++t)
        for (int n = 0; n < N8; ++n) {
            double acc = 0;
            for (int k = 0; k < K8; ++k)
                acc += (double)x8[t * K8 + k] *
                       ((double)mla_fp8_to_f32(w8[n * K8 + k], MLA_DTYPE_FP8_E4M3FN) *
                        ws[(n / 128) * 2 + k / 128]);
            ok &= y8[t * N8 + n] == bf16_of_double(acc);
        }
    CHECK(ok);
}

/* y [T, H, L] filled through its [H, T, L] view; x [T, H, K] seen as [H, T, K]. */
static void test_batched_gemm(void)
{
    enum { T = 3, H = 2, K = 5, L = 4 };
    float x[T * H * K], y[T * H * L];
    uint16_t wb[H * K * L];
    uint8_t w8[H * K * L];
    for (int i = 0; i < T * H * K; ++i)
        x[i] = val(i);
    for (int i = 0; i < H * K * L; ++i) {
        wb[i] = mla_f32_to_bf16(val(100 + i));
        w8[i] = (uint8_t)(0x30 + i % 64);
    }
    mla_tensor tx = tensor(x, MLA_DTYPE_F32, 3, T, H, K), ty = tensor(y, MLA_DTYPE_F32, 3, T, H, L);
    CHECK_STATUS(mla_tensor_transpose(&tx, 0, 1), MLA_OK);
    CHECK_STATUS(mla_tensor_transpose(&ty, 0, 1), MLA_OK);
    for (int fp8 = 0; fp8 < 2; ++fp8) {
        mla_tensor tw = fp8 ? tensor(w8, MLA_DTYPE_FP8_E4M3FN, 3, H, K, L)
                            : tensor(wb, MLA_DTYPE_BF16, 3, H, K, L);
        const float scale = fp8 ? 0.375f : 1.0f;
        CHECK_STATUS(mla_batched_gemm(ctx, &tx, &tw, scale, &ty), MLA_OK);
        int ok = 1;
        for (int t = 0; t < T; ++t)
            for (int h = 0; h < H; ++h)
                for (int n = 0; n < L; ++n) {
                    double acc = 0;
                    for (int k = 0; k < K; ++k) {
                        int wi = (h * K + k) * L + n;
                        double wv = fp8 ? mla_fp8_to_f32(w8[wi], MLA_DTYPE_FP8_E4M3FN)
                                        : mla_bf16_to_f32(wb[wi]);
                        acc += (double)x[(t * H + h) * K + k] * wv;
                    }
                    ok &= y[(t * H + h) * L + n] == (float)(scale * acc);
                }
        CHECK(ok);
    }
}

/* ----------------------------------------------------------- latent cache */

enum { CL = 128, CR = 16, CD = CL + CR, NBLK = 4, MAXBLK = 2, NTOK = 33 };

/* Two sequences: 20 tokens in blocks (2, 0) and 13 in block 3 for block
 * size 16; 20 in block 1 and 13 in block 3 for block size 32. */
static void sequences(int64_t bs, int32_t *table, int32_t *lens, int64_t *slots)
{
    const int32_t t16[4] = {2, 0, 3, 1}, t32[4] = {1, 0, 3, 2};
    memcpy(table, bs == 16 ? t16 : t32, sizeof t16);
    lens[0] = 20;
    lens[1] = 13;
    int n = 0;
    for (int s = 0; s < 2; ++s)
        for (int j = 0; j < lens[s]; ++j)
            slots[n++] = table[s * MAXBLK + j / bs] * bs + j % bs;
}

/* FP8_SCALED scale of the 128-group g of row: 2^ceil(log2(max(amax / fp8_max, 1e-4))). */
static float fp8s_scale(const mla_cache_desc *d, const float *row, int g)
{
    float amax = 0;
    for (int k = g * 128; k < g * 128 + 128; ++k)
        amax = fmaxf(amax, fabsf(row[k]));
    float fmax = d->dtype == MLA_DTYPE_FP8_E4M3FNUZ ? 224.0f : 448.0f;
    float q = fmaxf(amax / fmax, 1e-4f);
    return (float)exp2(ceil(log2((double)q)));
}

/* The value the gather should return for dim i of row. */
static float cache_round(const mla_cache_desc *d, const float *row, int i)
{
    if (d->layout == MLA_CACHE_FP8_SCALED) {
        if (i >= CL)
            return mla_bf16_to_f32(mla_f32_to_bf16(row[i]));
        float s = fp8s_scale(d, row, i / 128);
        return mla_fp8_to_f32(mla_f32_to_fp8(row[i] / s, d->dtype, MLA_SATURATE), d->dtype) * s;
    }
    if (d->dtype == MLA_DTYPE_BF16)
        return mla_bf16_to_f32(mla_f32_to_bf16(row[i]));
    return mla_fp8_to_f32(mla_f32_to_fp8(row[i] / d->k_scale, d->dtype, MLA_SATURATE), d->dtype) *
           d->k_scale;
}

/* FP8_SCALED bytes of a token: codes, then the fp32 scale (little-endian). */
static int fp8s_bytes_ok(const mla_cache_desc *d, const uint8_t *tok, const float *row)
{
    int ok = 1;
    for (int g = 0; g < CL / 128; ++g) {
        float s = fp8s_scale(d, row, g);
        uint32_t u = bits_of(s);
        for (int b = 0; b < 4; ++b)
            ok &= tok[CL + 4 * g + b] == (uint8_t)(u >> (8 * b));
        for (int k = g * 128; k < g * 128 + 128; ++k)
            ok &= tok[k] == mla_f32_to_fp8(row[k] / s, d->dtype, MLA_SATURATE);
    }
    return ok;
}

static void cache_identity(mla_cache_layout layout, mla_dtype dtype, int64_t bs)
{
    mla_cache_desc d = {layout, dtype, NBLK, bs, CL, CR, 0.5f};
    int64_t bb = 0;
    CHECK_STATUS(mla_cache_block_bytes(&d, &bb), MLA_OK);
    uint8_t *cache = malloc((size_t)(bb * NBLK));
    static float kn[NTOK * CL], kp[NTOK * CR], out[NTOK * CD], row[CD];
    int32_t table[2 * MAXBLK], lens[2];
    int64_t slots[NTOK];
    sequences(bs, table, lens, slots);
    /* bf16-exact inputs for the bf16 cache; for fp8 some saturate (x 300) and
     * every third token is tiny (x 2^-10: FP8_SCALED's 1e-4 floor). */
    for (int i = 0; i < NTOK * CL; ++i)
        kn[i] = dtype == MLA_DTYPE_BF16 ? val(i)
                : (i / CL) % 3 == 0     ? val(i) / 1024
                                        : val(i) * 1.37f * (i % 128 == 5 ? 300.0f : 1.0f);
    if (dtype != MLA_DTYPE_BF16) { /* amax / fp8_max exactly 1: FP8_SCALED's s stays 1 */
        kn[CL + 5] = 1.0f;
        kn[CL + 7] = dtype == MLA_DTYPE_FP8_E4M3FNUZ ? 224.0f : 448.0f;
    }
    for (int i = 0; i < NTOK * CR; ++i)
        kp[i] = dtype == MLA_DTYPE_BF16 ? val(9000 + i) : val(9000 + i) * 1.37f;
    memset(cache, SENTINEL, (size_t)(bb * NBLK));
    mla_tensor tc = tensor(cache, MLA_DTYPE_U8, 2, NBLK, bb, 0);
    mla_tensor tkn = tensor(kn, MLA_DTYPE_F32, 2, NTOK, CL, 0),
               tkp = tensor(kp, MLA_DTYPE_F32, 2, NTOK, CR, 0);
    mla_tensor ts = tensor(slots, MLA_DTYPE_I64, 1, NTOK, 0, 0);
    CHECK_STATUS(mla_cache_write(ctx, &d, &tc, &tkn, &tkp, &ts), MLA_OK);
    mla_tensor tt = tensor(table, MLA_DTYPE_I32, 2, 2, MAXBLK, 0),
               tl = tensor(lens, MLA_DTYPE_I32, 1, 2, 0, 0);
    mla_tensor to = tensor(out, MLA_DTYPE_F32, 2, NTOK, CD, 0);
    CHECK_STATUS(mla_cache_gather(ctx, &d, &tc, &tt, &tl, &to), MLA_OK);
    int ok = 1;
    for (int n = 0; n < NTOK; ++n) {
        memcpy(row, kn + n * CL, CL * sizeof(float));
        memcpy(row + CL, kp + n * CR, CR * sizeof(float));
        for (int i = 0; i < CD; ++i)
            ok &= bits_of(out[n * CD + i]) == bits_of(cache_round(&d, row, i));
        if (layout == MLA_CACHE_FP8_SCALED) /* fp8 * s hides s: check the bytes too */
            ok &= fp8s_bytes_ok(&d, cache + slots[n] / bs * bb + slots[n] % bs * (bb / bs), row);
    }
    if (!ok)
        fprintf(stderr, "  cache identity: %s %s block_size %lld\n", mla_cache_layout_name(layout),
                mla_dtype_name(dtype), (long long)bs);
    CHECK(ok);
    free(cache);
}

/* SHUFFLED offsets hit every element of a block exactly once. */
static void shuffled_bijection(int64_t bs, int64_t L, int64_t R, int64_t elem_bytes)
{
    const int64_t n = bs * (L + R);
    unsigned char *hit = calloc((size_t)n, 1);
    int ok = 1;
    for (int64_t t = 0; t < bs; ++t)
        for (int64_t d = 0; d < L + R; ++d) {
            int64_t e = mla_cl_shuffled_elem(t, d, L, R, bs, mla_cl_shuffle_k(elem_bytes));
            ok &= e >= 0 && e < n && !hit[e];
            if (e >= 0 && e < n)
                hit[e] = 1;
        }
    CHECK(ok);
    free(hit);
}

static void test_cache(void)
{
    cache_identity(MLA_CACHE_NORMAL, MLA_DTYPE_BF16, 16);
    cache_identity(MLA_CACHE_NORMAL, MLA_DTYPE_BF16, 32);
    cache_identity(MLA_CACHE_SHUFFLED, MLA_DTYPE_BF16, 16);
    cache_identity(MLA_CACHE_SHUFFLED, MLA_DTYPE_BF16, 32);
    cache_identity(MLA_CACHE_NORMAL, MLA_DTYPE_FP8_E4M3FN, 16);
    cache_identity(MLA_CACHE_SHUFFLED, MLA_DTYPE_FP8_E4M3FNUZ, 32);
    cache_identity(MLA_CACHE_FP8_SCALED, MLA_DTYPE_FP8_E4M3FN, 16);
    cache_identity(MLA_CACHE_FP8_SCALED, MLA_DTYPE_FP8_E4M3FNUZ, 32);
    shuffled_bijection(16, 128, 16, 2);
    shuffled_bijection(32, 32, 16, 2);
    shuffled_bijection(32, 512, 64, 1);
    shuffled_bijection(64, 32, 16, 1);
    /* t = 17, d = 9 of bf16 L = 32, R = 16, block 32: 512 + 128 + 8 + 1;
     * rope r = 3 of t = 17: 32*32 + 16*16 + 0 + 8 + 3. */
    CHECK(mla_cl_shuffled_elem(17, 9, 32, 16, 32, 8) == 649);
    CHECK(mla_cl_shuffled_elem(17, 35, 32, 16, 32, 8) == 1024 + 256 + 8 + 3);

    /* FlashMLA's token: 512 fp8 + 4 fp32 scales + 64 bf16 = 656 bytes. */
    mla_cache_desc f = {MLA_CACHE_FP8_SCALED, MLA_DTYPE_FP8_E4M3FN, 1, 1, 512, 64, 1.0f};
    int64_t bb = 0;
    CHECK_STATUS(mla_cache_block_bytes(&f, &bb), MLA_OK);
    CHECK(bb == 656 && mla_cl_fp8s_token_bytes(512, 64) == 656);
    f.block_size = 4;
    CHECK_STATUS(mla_cache_block_bytes(&f, &bb), MLA_OK);
    CHECK(bb == 4 * 656);

    /* A SHUFFLED element lands where the formula says: one token at slot 17,
     * bf16 L = 32, R = 16, block 32, value d + 1 at dim d. */
    mla_cache_desc s = {MLA_CACHE_SHUFFLED, MLA_DTYPE_BF16, 1, 32, 32, 16, 1.0f};
    CHECK_STATUS(mla_cache_block_bytes(&s, &bb), MLA_OK);
    uint8_t blk[32 * 48 * 2];
    float kn[32], kp[16];
    for (int i = 0; i < 32; ++i)
        kn[i] = (float)(i + 1);
    for (int i = 0; i < 16; ++i)
        kp[i] = (float)(33 + i);
    int64_t slot = 17;
    memset(blk, SENTINEL, sizeof blk);
    mla_tensor tc = tensor(blk, MLA_DTYPE_U8, 2, 1, bb, 0);
    mla_tensor tkn = tensor(kn, MLA_DTYPE_F32, 2, 1, 32, 0),
               tkp = tensor(kp, MLA_DTYPE_F32, 2, 1, 16, 0);
    mla_tensor ts = tensor(&slot, MLA_DTYPE_I64, 1, 1, 0, 0);
    CHECK_STATUS(mla_cache_write(ctx, &s, &tc, &tkn, &tkp, &ts), MLA_OK);
    uint16_t v9 = (uint16_t)(blk[649 * 2] | blk[649 * 2 + 1] << 8);
    uint16_t r3 = (uint16_t)(blk[1291 * 2] | blk[1291 * 2 + 1] << 8);
    CHECK(v9 == mla_f32_to_bf16(10.0f) && r3 == mla_f32_to_bf16(36.0f));

    /* A negative slot is skipped: only slot 5's bytes change. */
    mla_cache_desc nd = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, 1, 16, 32, 16, 1.0f};
    CHECK_STATUS(mla_cache_block_bytes(&nd, &bb), MLA_OK);
    uint8_t nb[16 * 48 * 2];
    float kn2[64], kp2[32];
    for (int i = 0; i < 64; ++i)
        kn2[i] = 1.0f + (float)i;
    for (int i = 0; i < 32; ++i)
        kp2[i] = -1.0f - (float)i;
    int32_t slots2[2] = {-1, 5};
    memset(nb, SENTINEL, sizeof nb);
    mla_tensor tnb = tensor(nb, MLA_DTYPE_U8, 2, 1, bb, 0);
    mla_tensor tkn2 = tensor(kn2, MLA_DTYPE_F32, 2, 2, 32, 0),
               tkp2 = tensor(kp2, MLA_DTYPE_F32, 2, 2, 16, 0);
    mla_tensor ts2 = tensor(slots2, MLA_DTYPE_I32, 1, 2, 0, 0);
    CHECK_STATUS(mla_cache_write(ctx, &nd, &tnb, &tkn2, &tkp2, &ts2), MLA_OK);
    CHECK(all_bytes(nb, 5 * 96, SENTINEL) && all_bytes(nb + 6 * 96, 10 * 96, SENTINEL));
    CHECK(nb[5 * 96] == (mla_f32_to_bf16(33.0f) & 0xFF) &&
          nb[5 * 96 + 1] == mla_f32_to_bf16(33.0f) >> 8);
}

/* --------------------------------------------- fused RoPE + concat + cache */

static void fused_vs_separate(mla_cache_layout layout, mla_dtype cdt, mla_dtype qdt)
{
    enum { T = 3, TK = 5, H = 2, L = 128, R = 16, P = 64, BS = 16 };
    static float cosb[P * R / 2], sinb[P * R / 2];
    mla_model_config cfg;
    CHECK_STATUS(mla_model_config_preset("test-tiny", &cfg), MLA_OK);
    CHECK_STATUS(mla_rope_table_build(&cfg.rope_cfg, P, cosb, sinb), MLA_OK);
    static uint16_t qn[T * H * L], qp[T * H * R], kn[TK * L], kp[TK * R];
    static float krot[TK * R], kpo[TK * R], qrot[T * H * R];
    static uint8_t qcat[T * H * (L + R) * 2];
    int64_t qpos[T] = {7, 0, 63}, kpos[TK] = {7, 0, 63, 11, 40};
    int64_t slots[TK] = {3, 17, -1, 20, 0};
    for (int i = 0; i < T * H * L; ++i)
        qn[i] = mla_f32_to_bf16(val(i));
    for (int i = 0; i < T * H * R; ++i)
        qp[i] = mla_f32_to_bf16(val(7000 + i));
    for (int i = 0; i < TK * L; ++i)
        kn[i] = mla_f32_to_bf16(val(8000 + i));
    for (int i = 0; i < TK * R; ++i)
        kp[i] = mla_f32_to_bf16(val(9000 + i));
    mla_cache_desc d = {layout, cdt, 2, BS, L, R, 0.25f};
    int64_t bb = 0;
    CHECK_STATUS(mla_cache_block_bytes(&d, &bb), MLA_OK);
    uint8_t *c1 = malloc((size_t)(2 * bb)), *c2 = malloc((size_t)(2 * bb));
    memset(c1, SENTINEL, (size_t)(2 * bb));
    memset(c2, SENTINEL, (size_t)(2 * bb));
    mla_tensor tcos = tensor(cosb, MLA_DTYPE_F32, 2, P, R / 2, 0),
               tsin = tensor(sinb, MLA_DTYPE_F32, 2, P, R / 2, 0);
    mla_tensor tqn = tensor(qn, MLA_DTYPE_BF16, 3, T, H, L),
               tqp = tensor(qp, MLA_DTYPE_BF16, 3, T, H, R);
    mla_tensor tkn = tensor(kn, MLA_DTYPE_BF16, 2, TK, L, 0),
               tkp = tensor(kp, MLA_DTYPE_BF16, 2, TK, R, 0);
    mla_tensor tqpos = tensor(qpos, MLA_DTYPE_I64, 1, T, 0, 0),
               tkpos = tensor(kpos, MLA_DTYPE_I64, 1, TK, 0, 0);
    mla_tensor tslots = tensor(slots, MLA_DTYPE_I64, 1, TK, 0, 0);
    mla_tensor tc1 = tensor(c1, MLA_DTYPE_U8, 2, 2, bb, 0),
               tc2 = tensor(c2, MLA_DTYPE_U8, 2, 2, bb, 0);
    mla_tensor tqcat = tensor(qcat, qdt, 3, T, H, L + R),
               tkpo = tensor(kpo, MLA_DTYPE_F32, 2, TK, R, 0);
    mla_rope_cache_args a = {&tcos,   &tsin, MLA_ROPE_INTERLEAVED,
                             &tqn,    &tqp,  &tqpos,
                             &tkn,    &tkp,  &tkpos,
                             &tslots, &d,    &tc1,
                             &tqcat,  0.5f,  &tkpo};
    CHECK_STATUS(mla_fused_rope_concat_cache(ctx, &a), MLA_OK);

    /* Separately: RoPE into F32 buffers, then the cache writer. */
    mla_tensor tkrot = tensor(krot, MLA_DTYPE_F32, 2, TK, R, 0),
               tqrot = tensor(qrot, MLA_DTYPE_F32, 3, T, H, R);
    CHECK_STATUS(mla_rope(ctx, &tcos, &tsin, &tkpos, &tkp, &tkrot, MLA_ROPE_INTERLEAVED), MLA_OK);
    CHECK_STATUS(mla_rope(ctx, &tcos, &tsin, &tqpos, &tqp, &tqrot, MLA_ROPE_INTERLEAVED), MLA_OK);
    CHECK_STATUS(mla_cache_write(ctx, &d, &tc2, &tkn, &tkrot, &tslots), MLA_OK);
    CHECK(memcmp(c1, c2, (size_t)(2 * bb)) == 0);
    CHECK(memcmp(kpo, krot, sizeof krot) == 0);

    /* Extra key tokens (j >= T) are rotated too: position 11 and 40 differ from
     * their unrotated input. */
    int moved = 0;
    for (int j = T; j < TK; ++j)
        for (int r = 0; r < R; ++r)
            moved += krot[j * R + r] != mla_bf16_to_f32(kp[j * R + r]);
    CHECK(moved > R);

    /* q_cat = [q_nope | rope(q_pe)], each value rounded once from fp32. */
    int ok = 1;
    for (int th = 0; th < T * H; ++th)
        for (int i = 0; i < L + R; ++i) {
            float v = i < L ? mla_bf16_to_f32(qn[th * L + i]) : qrot[th * R + i - L];
            int64_t e = (int64_t)th * (L + R) + i;
            if (qdt == MLA_DTYPE_BF16)
                ok &= (uint16_t)(qcat[2 * e] | qcat[2 * e + 1] << 8) == mla_f32_to_bf16(v);
            else
                ok &= qcat[e] == mla_f32_to_fp8(v / 0.5f, qdt, MLA_SATURATE);
        }
    CHECK(ok);
    free(c1);
    free(c2);
}

static void test_rope_cache(void)
{
    fused_vs_separate(MLA_CACHE_NORMAL, MLA_DTYPE_BF16, MLA_DTYPE_BF16);
    fused_vs_separate(MLA_CACHE_SHUFFLED, MLA_DTYPE_FP8_E4M3FN, MLA_DTYPE_FP8_E4M3FN);
    fused_vs_separate(MLA_CACHE_FP8_SCALED, MLA_DTYPE_FP8_E4M3FNUZ, MLA_DTYPE_BF16);
}

/* ------------------------------------------------------------- bad input */

static void test_bad_input(void)
{
    uint8_t cache[16 * 48 * 2];
    float kn[32], kp[16];
    memset(kn, 0, sizeof kn);
    memset(kp, 0, sizeof kp);
    int64_t slot = 3;
    mla_tensor tkn = tensor(kn, MLA_DTYPE_F32, 2, 1, 32, 0),
               tkp = tensor(kp, MLA_DTYPE_F32, 2, 1, 16, 0);
    mla_tensor ts = tensor(&slot, MLA_DTYPE_I64, 1, 1, 0, 0);

    /* SHUFFLED needs block_size % 16 == 0. */
    mla_cache_desc d = {MLA_CACHE_SHUFFLED, MLA_DTYPE_BF16, 1, 8, 32, 16, 1.0f};
    mla_tensor tc = tensor(cache, MLA_DTYPE_U8, 2, 1, 8 * 48 * 2, 0);
    memset(cache, SENTINEL, sizeof cache);
    CHECK_STATUS(mla_cache_write(ctx, &d, &tc, &tkn, &tkp, &ts), MLA_ERR_INVALID_ARGUMENT);
    CHECK(param_is("cache_desc.block_size"));
    CHECK(all_bytes(cache, sizeof cache, SENTINEL));

    /* A slot beyond num_blocks * block_size. */
    mla_cache_desc n = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, 1, 16, 32, 16, 1.0f};
    tc = tensor(cache, MLA_DTYPE_U8, 2, 1, 16 * 48 * 2, 0);
    slot = 16;
    CHECK_STATUS(mla_cache_write(ctx, &n, &tc, &tkn, &tkp, &ts), MLA_ERR_OUT_OF_RANGE);
    CHECK(param_is("slots"));
    CHECK(all_bytes(cache, sizeof cache, SENTINEL));

    /* A position beyond the table (4 rows). */
    float x[4] = {1, 2, 3, 4}, y[4];
    memset(y, SENTINEL, sizeof y);
    int32_t pos = 4;
    mla_tensor tcos = tensor(tab_cos, MLA_DTYPE_F32, 2, 4, 2, 0),
               tsin = tensor(tab_sin, MLA_DTYPE_F32, 2, 4, 2, 0);
    mla_tensor tx = tensor(x, MLA_DTYPE_F32, 2, 1, 4, 0), ty = tensor(y, MLA_DTYPE_F32, 2, 1, 4, 0);
    mla_tensor tp = tensor(&pos, MLA_DTYPE_I32, 1, 1, 0, 0);
    CHECK_STATUS(mla_rope(ctx, &tcos, &tsin, &tp, &tx, &ty, MLA_ROPE_INTERLEAVED),
                 MLA_ERR_OUT_OF_RANGE);
    CHECK(param_is("positions"));
    CHECK(all_bytes(y, sizeof y, SENTINEL));
}

int main(void)
{
    if (mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ctx) != MLA_OK) {
        fprintf(stderr, "no reference context\n");
        return 1;
    }
    test_rmsnorm();
    test_qk_rmsnorm();
    test_rope();
    test_rope_table();
    test_linear();
    test_batched_gemm();
    test_cache();
    test_rope_cache();
    test_bad_input();
    mla_context_destroy(ctx);
    return TEST_SUMMARY();
}
