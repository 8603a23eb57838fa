/* 256-bit binary floating point in integer arithmetic (core/rope_bigfloat.h).
 * Integers are big-endian arrays of 32-bit limbs. */
#include <math.h>
#include <string.h>

#include "core/rope_bigfloat.h"

enum { WIDE = 2 * BF_LIMBS + 4 }; /* an aligned sum: 256 + 320 bits and a carry */

static uint32_t limb_at(const uint32_t *w, int n, int j)
{
    return j >= 0 && j < n ? w[j] : 0;
}

/* W * 2^e, W the n-limb integer w, truncated to BF_LIMBS limbs. */
static bigfloat from_wide(const uint32_t *w, int n, int64_t e, int neg)
{
    bigfloat r;
    memset(&r, 0, sizeof r);
    int first = 0;
    while (first < n && !w[first])
        ++first;
    if (first == n)
        return r;
    int lz = 0;
    while (!(w[first] << lz & 0x80000000u))
        ++lz;
    for (int k = 0; k < BF_LIMBS; ++k) {
        const uint32_t hi = limb_at(w, n, first + k), lo = limb_at(w, n, first + k + 1);
        r.m[k] = lz ? hi << lz | lo >> (32 - lz) : hi;
    }
    r.e = e + 32 * (int64_t)(n - first - BF_LIMBS) - lz;
    r.neg = neg;
    return r;
}

bigfloat mla_bf_from_int(int64_t v)
{
    const uint64_t a = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    const uint32_t w[2] = {(uint32_t)(a >> 32), (uint32_t)a};
    return from_wide(w, 2, 0, v < 0);
}

bigfloat mla_bf_from_double(double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    const int biased = (int)(bits >> 52 & 0x7ff);
    uint64_t mant = bits & ((1ull << 52) - 1);
    if (biased)
        mant |= 1ull << 52;
    const uint32_t w[2] = {(uint32_t)(mant >> 32), (uint32_t)mant};
    return from_wide(w, 2, (biased ? biased : 1) - 1075, (int)(bits >> 63));
}

int mla_bf_is_zero(bigfloat a)
{
    return !a.m[0];
}

int64_t mla_bf_top(bigfloat a)
{
    return a.e + 32 * BF_LIMBS - 1;
}

bigfloat mla_bf_abs(bigfloat a)
{
    a.neg = 0;
    return a;
}

bigfloat mla_bf_neg(bigfloat a)
{
    a.neg = !a.neg && !mla_bf_is_zero(a);
    return a;
}

bigfloat mla_bf_ldexp(bigfloat a, int64_t k)
{
    if (!mla_bf_is_zero(a))
        a.e += k;
    return a;
}

/* w (n limbs, zero on entry) = M * 2^shift, which fits. */
static void place(uint32_t *w, int n, const uint32_t *m, int64_t shift)
{
    const int limbs = (int)(shift / 32), bits = (int)(shift % 32);
    for (int k = BF_LIMBS - 1; k >= 0; --k) {
        const int j = n - 1 - limbs - (BF_LIMBS - 1 - k); /* where m[k] lands unshifted */
        const uint64_t v = (uint64_t)m[k] << bits;
        w[j] |= (uint32_t)v;
        w[j - 1] |= (uint32_t)(v >> 32);
    }
}

/* x -= y (n limbs, x >= y); x += y. */
static void sub_n(uint32_t *x, const uint32_t *y, int n)
{
    uint64_t borrow = 0;
    for (int k = n - 1; k >= 0; --k) {
        const uint64_t d = (uint64_t)x[k] - y[k] - borrow;
        x[k] = (uint32_t)d;
        borrow = d >> 63;
    }
}

static void add_n(uint32_t *x, const uint32_t *y, int n)
{
    uint64_t carry = 0;
    for (int k = n - 1; k >= 0; --k) {
        const uint64_t s = (uint64_t)x[k] + y[k] + carry;
        x[k] = (uint32_t)s;
        carry = s >> 32;
    }
}

static int cmp_n(const uint32_t *x, const uint32_t *y, int n)
{
    for (int k = 0; k < n; ++k)
        if (x[k] != y[k])
            return x[k] < y[k] ? -1 : 1;
    return 0;
}

/* The exact sum, then one truncation. b more than 320 bits below a's top is
 * dropped (a change below a's last bit). */
bigfloat mla_bf_add(bigfloat a, bigfloat b)
{
    if (mla_bf_is_zero(b))
        return a;
    if (mla_bf_is_zero(a))
        return b;
    if (a.e < b.e) {
        const bigfloat t = a;
        a = b;
        b = t;
    }
    const int64_t d = a.e - b.e;
    if (d > 32 * (WIDE - BF_LIMBS - 2))
        return a;
    uint32_t x[WIDE] = {0}, y[WIDE] = {0};
    place(x, WIDE, a.m, d);
    place(y, WIDE, b.m, 0);
    if (a.neg == b.neg) {
        add_n(x, y, WIDE);
        return from_wide(x, WIDE, b.e, a.neg);
    }
    const int c = cmp_n(x, y, WIDE);
    if (c == 0)
        return mla_bf_from_int(0);
    if (c > 0) {
        sub_n(x, y, WIDE);
        return from_wide(x, WIDE, b.e, a.neg);
    }
    sub_n(y, x, WIDE);
    return from_wide(y, WIDE, b.e, b.neg);
}

bigfloat mla_bf_sub(bigfloat a, bigfloat b)
{
    return mla_bf_add(a, mla_bf_neg(b));
}

bigfloat mla_bf_mul(bigfloat a, bigfloat b)
{
    uint32_t p[2 * BF_LIMBS] = {0};
    for (int i = BF_LIMBS - 1; i >= 0; --i) {
        uint64_t carry = 0;
        for (int j = BF_LIMBS - 1; j >= 0; --j) {
            const uint64_t t = (uint64_t)a.m[i] * b.m[j] + p[i + j + 1] + carry;
            p[i + j + 1] = (uint32_t)t;
            carry = t >> 32;
        }
        p[i] = (uint32_t)carry;
    }
    return from_wide(p, 2 * BF_LIMBS, a.e + b.e, a.neg ^ b.neg);
}

/* Q = floor(Ma * 2^257 / Mb) by restoring division, one quotient bit per
 * step (Ma / Mb is in (1/2, 2), so Q has 257 or 258 bits). */
bigfloat mla_bf_div(bigfloat a, bigfloat b)
{
    enum { N = BF_LIMBS + 1, QBITS = 257 };
    if (mla_bf_is_zero(a))
        return a;
    uint32_t r[N] = {0}, d[N] = {0}, q[N] = {0};
    memcpy(r + 1, a.m, sizeof a.m);
    memcpy(d + 1, b.m, sizeof b.m);
    for (int k = QBITS; k >= 0; --k) {
        if (cmp_n(r, d, N) >= 0) {
            sub_n(r, d, N);
            q[N - 1 - k / 32] |= 1u << (k % 32);
        }
        for (int j = 0; j < N; ++j) /* r <<= 1; r < 2 * Mb < 2^257 fits */
            r[j] = r[j] << 1 | (j + 1 < N ? r[j + 1] >> 31 : 0);
    }
    return from_wide(q, N, a.e - b.e - QBITS, a.neg ^ b.neg);
}

bigfloat mla_bf_div_u(bigfloat a, uint32_t d)
{
    uint32_t q[BF_LIMBS + 1];
    uint64_t rem = 0;
    for (int k = 0; k <= BF_LIMBS; ++k) { /* M * 2^32 / d, so no leading bits are lost */
        const uint64_t cur = rem << 32 | (k < BF_LIMBS ? a.m[k] : 0);
        q[k] = (uint32_t)(cur / d);
        rem = cur % d;
    }
    return from_wide(q, BF_LIMBS + 1, a.e - 32, a.neg);
}

int mla_bf_cmp(bigfloat a, bigfloat b)
{
    const bigfloat d = mla_bf_sub(a, b);
    return mla_bf_is_zero(d) ? 0 : d.neg ? -1 : 1;
}

bigfloat mla_bf_floor(bigfloat a)
{
    if (mla_bf_is_zero(a) || a.e >= 0)
        return a;
    if (a.e <= -32 * BF_LIMBS) /* 0 < |a| < 1 */
        return mla_bf_from_int(a.neg ? -1 : 0);
    bigfloat t = a;
    int lost = 0;
    for (int64_t bit = 0; bit < -a.e; ++bit) {
        uint32_t *l = &t.m[BF_LIMBS - 1 - bit / 32];
        const uint32_t mask = 1u << (bit % 32);
        lost |= (*l & mask) != 0;
        *l &= ~mask;
    }
    return a.neg && lost ? mla_bf_sub(t, mla_bf_from_int(1)) : t;
}

bigfloat mla_bf_ceil(bigfloat a)
{
    return mla_bf_neg(mla_bf_floor(mla_bf_neg(a)));
}

/* Below the last bit that matters next to `sum`. */
static int negligible(bigfloat term, bigfloat sum)
{
    return mla_bf_is_zero(term) || mla_bf_top(term) < mla_bf_top(sum) - 32 * BF_LIMBS - 4;
}

/* exp(y) = exp(y / 2^s)^(2^s), |y / 2^s| < 2^-8, the Taylor series there. */
bigfloat mla_bf_exp(bigfloat y)
{
    const int64_t s = mla_bf_is_zero(y) || mla_bf_top(y) < -9 ? 0 : mla_bf_top(y) + 9;
    const bigfloat t = mla_bf_ldexp(y, -s);
    bigfloat sum = mla_bf_from_int(1), term = sum;
    for (uint32_t k = 1;; ++k) {
        term = mla_bf_div_u(mla_bf_mul(term, t), k);
        if (negligible(term, sum))
            break;
        sum = mla_bf_add(sum, term);
    }
    for (int64_t k = 0; k < s; ++k)
        sum = mla_bf_mul(sum, sum);
    return sum;
}

/* atanh(z) = z + z^3/3 + z^5/5 + ..., |z| <= 1/3. */
static bigfloat atanh_series(bigfloat z)
{
    const bigfloat z2 = mla_bf_mul(z, z);
    bigfloat sum = z, power = z;
    for (uint32_t k = 3;; k += 2) {
        power = mla_bf_mul(power, z2);
        const bigfloat term = mla_bf_div_u(power, k);
        if (negligible(term, sum))
            break;
        sum = mla_bf_add(sum, term);
    }
    return sum;
}

/* ln a = k ln 2 + 2 atanh((m - 1) / (m + 1)), a = m 2^k, m in [0.707, 1.415):
 * no cancellation between the two terms, |z| < 0.18. */
bigfloat mla_bf_ln(bigfloat a)
{
    const bigfloat one = mla_bf_from_int(1);
    int64_t k = mla_bf_top(a);
    bigfloat m = mla_bf_ldexp(a, -k);
    if (m.m[0] >= 0xB504F334u) { /* m >= sqrt 2 */
        m = mla_bf_ldexp(m, -1);
        ++k;
    }
    const bigfloat z = mla_bf_div(mla_bf_sub(m, one), mla_bf_add(m, one));
    const bigfloat ln2 = mla_bf_ldexp(atanh_series(mla_bf_div_u(one, 3)), 1);
    return mla_bf_add(mla_bf_mul(mla_bf_from_int(k), ln2), mla_bf_ldexp(atanh_series(z), 1));
}

/* atan(1/n) = sum_j (-1)^j / ((2j + 1) n^(2j+1)). */
static bigfloat atan_inv(uint32_t n)
{
    bigfloat power = mla_bf_div_u(mla_bf_from_int(1), n), sum = power;
    for (uint32_t k = 3;; k += 2) {
        power = mla_bf_div_u(power, n * n);
        const bigfloat term = mla_bf_div_u(power, k);
        if (negligible(term, sum))
            break;
        sum = k % 4 == 3 ? mla_bf_sub(sum, term) : mla_bf_add(sum, term);
    }
    return sum;
}

/* Machin: pi = 16 atan(1/5) - 4 atan(1/239). */
bigfloat mla_bf_pi(void)
{
    return mla_bf_sub(mla_bf_ldexp(atan_inv(5), 4), mla_bf_ldexp(atan_inv(239), 2));
}

/* The Taylor series: sin x = x - x^3/3! + ..., cos x = 1 - x^2/2! + ... */
void mla_bf_sincos(bigfloat x, bigfloat *s, bigfloat *c)
{
    const bigfloat x2 = mla_bf_mul(x, x);
    bigfloat term = x, sum = x;
    for (uint32_t k = 2; !mla_bf_is_zero(x); k += 2) {
        term = mla_bf_neg(mla_bf_div_u(mla_bf_mul(term, x2), k * (k + 1)));
        if (negligible(term, sum))
            break;
        sum = mla_bf_add(sum, term);
    }
    *s = sum;
    term = sum = mla_bf_from_int(1);
    for (uint32_t k = 1; !mla_bf_is_zero(x); k += 2) {
        term = mla_bf_neg(mla_bf_div_u(mla_bf_mul(term, x2), k * (k + 1)));
        if (negligible(term, sum))
            break;
        sum = mla_bf_add(sum, term);
    }
    *c = sum;
}

uint64_t mla_bf_bits64(bigfloat a, int64_t lo)
{
    uint64_t v = 0;
    for (int b = 63; b >= 0; --b) {
        const int64_t bit = lo + b;
        const int in = bit >= 0 && bit < 32 * BF_LIMBS;
        v = v << 1 | (in ? a.m[BF_LIMBS - 1 - bit / 32] >> (bit % 32) & 1 : 0);
    }
    return v;
}

double mla_bf_to_double(bigfloat a)
{
    if (mla_bf_is_zero(a))
        return 0.0;
    const int64_t e = a.e + 32 * BF_LIMBS - 53;
    const double m = (double)mla_bf_bits64(a, 32 * BF_LIMBS - 53); /* the top 53 bits */
    const double v = e > 2000 ? INFINITY : e < -2000 ? 0.0 : ldexp(m, (int)e);
    return a.neg ? -v : v;
}

uint32_t mla_bf_f32_round(int neg, uint64_t m, int sticky, int64_t e)
{
    if (!m)
        return 0;
    const uint32_t sign = neg ? 0x80000000u : 0;
    const int64_t t = e + 63;                       /* 2^t <= value < 2^(t+1) */
    const int64_t q = t - 23 > -149 ? t - 23 : -149; /* the fp32 quantum's exponent there */
    if (q + 150 >= 255)
        return sign | 0x7f800000u;
    const int64_t drop = q - e; /* bits of m below the quantum, >= 40 */
    if (drop > 64)
        return sign;
    const uint64_t n = drop == 64 ? 0 : m >> drop;
    const uint64_t rest = drop == 64 ? m : m & ((1ull << drop) - 1), half = 1ull << (drop - 1);
    const int up = rest > half || (rest == half && (sticky || (n & 1)));
    /* n + up fp32 quanta: the biased exponent field q + 150 (1 for subnormals,
     * whose n < 2^23) plus the mantissa; a carry into 2^24 bumps the exponent. */
    const uint64_t bits = ((uint64_t)(q + 150) << 23) + n + up - (1u << 23);
    return sign | (bits >= 0x7f800000u ? 0x7f800000u : (uint32_t)bits);
}

uint32_t mla_bf_to_f32_bits(bigfloat a)
{
    int sticky = 0;
    for (int k = 2; k < BF_LIMBS; ++k)
        sticky |= a.m[k] != 0;
    return mla_bf_f32_round(a.neg, (uint64_t)a.m[0] << 32 | a.m[1], sticky, a.e + 32 * BF_LIMBS - 64);
}

uint32_t mla_bf_double_to_f32_bits(double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    const int biased = (int)(bits >> 52 & 0x7ff);
    if (!biased) /* 0 (+0 either way) or below 2^-1022 (a zero of v's sign) */
        return v != 0 && bits >> 63 ? 0x80000000u : 0;
    const uint64_t m = ((bits & ((1ull << 52) - 1)) | 1ull << 52) << 11;
    return mla_bf_f32_round((int)(bits >> 63), m, 0, biased - 1075 - 11);
}
