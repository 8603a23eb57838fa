/* Error bounds of the ops that are not bit-defined (RMSNorm, the GEMMs),
 * derived from their arithmetic. The cases compute each bound per output
 * value from their own inputs (CONF_BOUND_TOL): the comparator then allows
 *
 *     |got - want| <= tol[k] + 1 ulp of the output dtype at max(|got|, |want|)
 *
 * where tol[k] is the arithmetic error of an fp32 implementation plus that of
 * the float64 reference, and the ulp is the two final roundings to the output
 * dtype (half an ulp each: the backend rounds its fp32 value, the reference
 * rounds its float64 value). u = 2^-24 is the fp32 unit roundoff, and
 * gamma_n = n u / (1 - n u) bounds n successive roundings (Higham, ch. 3). */
#include <math.h>
#include <string.h>

#include "conformance/conf.h"

#define U32 0x1p-24 /* fp32 unit roundoff */
#define U64 0x1p-53 /* float64 unit roundoff */

static double gamma_n(double n, double u) { return n * u / (1.0 - n * u); }

/* GEMM, y = s * sum_k x_k w_k over K terms (linear: s = 1 and w_k = code *
 * block scale; batched: w_k = bf16 or fp8 code, s = w_scale), S = |s| *
 * sum_k |x_k| |w_k| computed by the case in float64 from its inputs.
 *
 * An fp32 kernel may sum in any order and blocking (split-K partials added
 * in fp32, FMA or not): the dot-product bound |fl(x.w) - x.w| <= gamma_K S
 * holds for every order. Three more roundings may sit on each term's path:
 * the weight's dequantization (code * block scale in fp32), the block scale
 * applied to a partial sum instead, and the final product by w_scale; so
 * gamma_{K+3} S. The reference sums in float64 (k ascending, exact products):
 * gamma64_{K+1} S. Fp32 underflow adds at most 2^-150 per operation; the
 * generated inputs avoid it, the (K + 3) 2^-149 term covers it anyway. */
double conf_gemm_tol(int64_t K, double S)
{
    const double n = (double)K + 3.0;
    return gamma_n(n, U32) * S + gamma_n((double)K + 1.0, U64) * S + n * 0x1p-149;
}

/* RMSNorm, y = x w / sqrt(mean(x^2) + eps), relative to |y|.
 *
 * fp32 kernel, any order: v = fl(fl(sum x_k^2) / D + eps) has relative error
 * at most g = gamma_{D+3} (a sum of D rounded squares is within gamma_D of the
 * exact sum, as all terms are positive; the mean takes up to two roundings
 * (division, or a product with fl(1/D)); the eps addition one). Then
 * rsqrt(v) is off by at most g / (2 (1 - g)) relative (d v^-1/2 / v^-1/2 =
 * -dv / 2v), the rsqrt itself by 2 fp32 ulps (4u: 1/sqrtf, a hardware rsq or
 * SLEEF's 1-ulp rsqrt all stay inside), and the two products (x r, then w)
 * by u each; 1u more absorbs the second-order cross terms (for D < 2^13 they
 * sum to far less than u). rho = g / (2 (1 - g)) + 7u.
 * The float64 reference has (D + 8) 2^-53 of its own; the case's exact y is
 * computed in float64 as well, hence three times that. */
double conf_norm_rel(int64_t D)
{
    const double g = gamma_n((double)D + 3.0, U32);
    return g / (2.0 * (1.0 - g)) + 7.0 * U32 + 3.0 * ((double)D + 8.0) * U64;
}

/* y = x * rsqrt(mean(x^2) + eps) * w for every row of x (args ix, iw of p),
 * in float64; y has T * D values. */
void conf_rmsnorm_exact(const conf_problem *p, int ix, int iw, double eps, double *y)
{
    const conf_arg *x = &p->arg[ix], *w = &p->arg[iw];
    const int64_t T = x->t.shape[0], D = x->t.shape[1];
    for (int64_t t = 0; t < T; ++t) {
        double ss = 0.0;
        for (int64_t d = 0; d < D; ++d) {
            double v = conf_in_value(x, t * D + d);
            ss += v * v;
        }
        const double r = 1.0 / sqrt(ss / (double)D + eps);
        for (int64_t d = 0; d < D; ++d)
            y[t * D + d] = conf_in_value(x, t * D + d) * r * conf_in_value(w, d);
    }
}

/* The MXFP4 production rule's scale byte for a block maximum a (MLA.md
 * section 5): amax rounded up at the mantissa, then floor(log2) - 2. */
int conf_mxfp4_scale_byte(float a)
{
    if (!(a > 0.0f))
        return 0;
    uint32_t bits;
    memcpy(&bits, &a, 4);
    bits = (bits + 0x200000u) & 0xFF800000u;
    int e = (int)((bits >> 23) & 0xFF) - 127 - 2; /* floor(log2(a_r)) - 2 */
    if ((bits >> 23) == 0) /* subnormal: below the clamp anyway */
        e = -127;
    return (e < -127 ? -127 : e > 127 ? 127 : e) + 127;
}

/* Attention (mla_attention_run), one (row, head) with n visible keys, exact
 * scores s_t, magnitudes sigma_t = scale * sum_d |q_d k_d| (D dims), value
 * rows v_t, an optional sink. The reference evaluates in float64
 *
 *     m = max(s_t, sink),  p_t = e^(s_t - m),  Z = sum_t p_t (+ e^(sink - m)),
 *     o = sum_t p_t v_t / Z,  lse = m + ln Z,  pi_t = p_t / Z,
 *
 * and the bound allows the fastest legitimate fp32 kernel:
 *
 * 1. Exponent arguments. Lambda = max(sigma_t, |sink|) + ln(n + 2) bounds
 *    |s_t|, |m|, |lse| and every split's partial lse. The score's fp32 dot
 *    product in any order, with q's and k's dequantization (code * scale),
 *    the softmax scale and a log2(e) folded in (the constant's rounding and
 *    its product): gamma_{D+6} sigma_t. Forming the argument (m times the
 *    folded constant, the subtraction, an FMA or not): 4 u Lambda.
 * 2. exp / exp2 (SLEEF, expf, exp2f, ex2.approx): 4 ulps, eps_e = 8u.
 * 3. Online softmax: each term is rescaled by e^(m_old - m_new) whenever the
 *    running maximum grows, at most n times, each time eps_e for the exp,
 *    3 u Lambda for its argument and u for the product: n (eps_e + u + 3u Lambda).
 * 4. The split combine: partials stored in fp32 (u), lse_i = m_i + ln Z_i
 *    (a log of eps_l = 8u relative to ln Z_i <= ln(n + 2), a sum u Lambda),
 *    e^(lse_i - lse) (eps_e, argument 4 u Lambda): eps_e + 6u Lambda +
 *    2 eps_l ln(n + 2) + u.
 *    Together the weight of term t carries a relative error rho_t =
 *    e^(eta_t) - 1 with eta_t the sum of 1-4 (the sink's: 1-4 without the
 *    dot product, its logit is exact).
 * 5. P rounded to bf16 before P @ V (FlashMLA) and the fp32 accumulation of
 *    P @ V over n keys, any order, with a value's dequantization:
 *    kappa = 2^-8 + gamma_{n+2} (1 + 2^-8), on the numerator only (the row
 *    sum Z uses the unrounded P). bf16 has 8 significant bits, so RNE is
 *    off by up to 2^-8 relative (0.26468 -> 0.265625 is 0.36%; 2^-9 would
 *    be the bound of a 9-bit format).
 * 6. Z: n + 1 positive terms summed in fp32: relative
 *    zeta = (sum_t pi_t rho_t + pi_sink rho_sink)(1 + gamma_{n+1}) + gamma_{n+1}.
 * Then, with W_i = sum_t pi_t |v_ti| and |o_i| <= W_i,
 *
 *     |o~_i - o_i| <= (sum_t pi_t |v_ti| (rho_t + kappa (1 + rho_t)) + |o_i| zeta) / (1 - zeta)
 *
 * plus n 2^-125 max_t |v_ti| for probabilities below fp32's normal range
 * (flushed to zero on GPUs; Z >= 1), plus the float64 reference's own
 * error, 2 gamma64_{D+n+8} (1 + Lambda) W_i. And
 *
 *     |lse~ - lse| <= -ln(1 - zeta) + 2 eps_l ln(n + 2) + 4u Lambda + gamma64_{D+n+8} (1 + Lambda)
 *
 * (ln of Z's relative error, the log itself, the final m + ln Z and a
 * log2 -> ln conversion). The comparator adds one ulp of the output dtype
 * (the backend's and the reference's final roundings). Every term scales
 * with the row's own magnitudes: a kernel that drops or adds a key, reads a
 * wrong layout or ignores the causal mask is off by about pi_t |v_t - o|,
 * far above.
 *
 * Computed keys and values (the expanded form): a score off by its inputs'
 * error ds_t (score_err) multiplies its weight by at most e^(ds_t), which
 * joins eta_t; a value off by dv_ti (v_err) adds pi_t dv_ti through the
 * same weight and the P @ V rounding. */
/* A score's own input error (score_err), added to its exponent argument's. */
static double ds(const conf_attn_row *w, int64_t t) { return w->score_err ? w->score_err[t] : 0.0; }

void conf_attention_tol(const conf_attn_row *w, double *tol_o, double *tol_lse)
{
    const int64_t n = w->n, L = w->L;
    if (n == 0) {
        for (int64_t i = 0; i < L; ++i)
            tol_o[i] = 0.0;
        *tol_lse = 0.0;
        return;
    }
    double m = w->has_sink ? w->sink : -INFINITY, lam = w->has_sink ? fabs(w->sink) : 0.0;
    for (int64_t t = 0; t < n; ++t) {
        m = fmax(m, w->score[t]);
        lam = fmax(lam, w->mag[t]);
    }
    lam += log((double)n + 2.0);
    const double u = U32, ee = 8.0 * u, el = 8.0 * u, ln_n = log((double)n + 2.0);
    const double shared = 4.0 * u * lam + ee + (double)n * (ee + u + 3.0 * u * lam) +
                          (ee + 6.0 * u * lam + 2.0 * el * ln_n + u);
    double Z = w->has_sink ? exp(w->sink - m) : 0.0;
    for (int64_t t = 0; t < n; ++t)
        Z += exp(w->score[t] - m);
    const double g_dot = gamma_n((double)w->D + 6.0, u), g_sum = gamma_n((double)n + 1.0, u);
    double zeta = w->has_sink ? exp(w->sink - m) / Z * expm1(shared) : 0.0;
    for (int64_t t = 0; t < n; ++t)
        zeta += exp(w->score[t] - m) / Z * expm1(g_dot * w->mag[t] + ds(w, t) + shared);
    zeta = zeta * (1.0 + g_sum) + g_sum;
    const double kappa = 0x1p-8 + gamma_n((double)n + 2.0, u) * (1.0 + 0x1p-8);
    const double ref = gamma_n((double)(w->D + n + 8), U64) * (1.0 + lam);
    for (int64_t i = 0; i < L; ++i) {
        double num = 0.0, W = 0.0, o = 0.0, vmax = 0.0;
        for (int64_t t = 0; t < n; ++t) {
            const double pi = exp(w->score[t] - m) / Z, v = w->v[t][i];
            const double rho = expm1(g_dot * w->mag[t] + ds(w, t) + shared);
            num += pi * fabs(v) * (rho + kappa * (1.0 + rho));
            if (w->v_err) /* a value off by dv: pi dv, through the same weight and P V */
                num += pi * w->v_err[t][i] * (1.0 + rho) * (1.0 + kappa);
            W += pi * fabs(v);
            o += pi * v;
            vmax = fmax(vmax, fabs(v));
        }
        tol_o[i] = (num + fabs(o) * zeta) / (1.0 - zeta) + (double)n * 0x1p-125 * vmax +
                   2.0 * ref * W;
    }
    *tol_lse = -log1p(-zeta) + 2.0 * el * ln_n + 4.0 * u * lam + ref;
}
