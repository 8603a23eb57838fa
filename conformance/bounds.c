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

/* The MXFP4 production rule's scale byte for a block maximum a (spec
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
