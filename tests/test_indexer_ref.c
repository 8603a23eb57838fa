/* The reference DSA indexer kernels (MLA.md section 6) through the public API
 * on a reference context, against answers computed here independently: the
 * K cache write against mla_fp8_group_quant (group = head_dim, rules DIV and
 * UE8M0: the rule of the golden indexer_k_* vectors), write -> gather
 * identity in both layouts, the layout rule and its offsets, paged logits
 * against a direct float64 computation, top-k order, LayerNorm, Hadamard and
 * the head weights. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ref/indexer_layout.h"
#include "mla/mla.h"
#include "tests/test_ref_host.h"
#include "tests/test_util.h"

enum { SENTINEL = 0xAB, D = 128 };

static mla_context *ctx;

static int param_is(const char *name)
{
    return strcmp(mla_context_error_param(ctx), name) == 0;
}

static mla_indexer_cache_desc desc_of(int64_t blocks, int64_t bs, mla_dtype fp8,
                                      mla_indexer_layout layout, int ue8m0)
{
    mla_indexer_cache_desc d = {blocks, bs, D, fp8, layout, ue8m0};
    return d;
}

/* A cache of desc's blocks filled with SENTINEL; *mem to free. */
static mla_tensor cache_of(const mla_indexer_cache_desc *d, uint8_t **mem)
{
    int64_t bb = 0;
    mla_indexer_cache_block_bytes(d, &bb);
    *mem = malloc((size_t)(d->num_blocks * bb));
    memset(*mem, SENTINEL, (size_t)(d->num_blocks * bb));
    return tensor(*mem, MLA_DTYPE_U8, 2, d->num_blocks, bb, 0);
}

/* MLA.md's value offsets, written out again here (not the library's). */
static int64_t spec_value_byte(mla_indexer_layout layout, int64_t t, int64_t d)
{
    if (layout == MLA_INDEXER_NORMAL)
        return t * D + d;
    return (t / 16) * 16 * D + (d / 16) * 16 * 16 + (t % 16) * 16 + d % 16;
}

static float scale_at(const uint8_t *blk, int64_t bs, int64_t t)
{
    const uint8_t *p = blk + bs * D + 4 * t;
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float s;
    memcpy(&s, &u, sizeof s);
    return s;
}

/* ------------------------------------------------------ K cache write */

enum { QT = 6 };

/* Rows with every kind of amax: all zero (the 1e-4 floor), tiny (below the
 * floor), ordinary, large (saturation-free but big scales), an amax that is
 * 448 * 2^-3 (a power-of-two quotient ue8m0 keeps), mixed signs with one spike. */
static void quant_rows(float *k)
{
    for (int i = 0; i < D; ++i) {
        k[0 * D + i] = 0.0f;
        k[1 * D + i] = val(i) * 1e-6f;
        k[2 * D + i] = val(100 + i);
        k[3 * D + i] = val(200 + i) * 1000.0f;
        k[4 * D + i] = i == 7 ? -56.0f : val(300 + i);
        k[5 * D + i] = i == 90 ? 300.0f : val(400 + i) / 8;
    }
}

/* Writes the QT rows (k as F32 or BF16) to slots {5, -1, 0, 17, 30, 3} of a
 * cache of 32 / bs + 1 blocks and checks every written token's bytes, at MLA.md's
 * offsets, against mla_fp8_group_quant of the same rows (group 128). */
static void check_write(mla_dtype fp8, int ue8m0, mla_indexer_layout layout, int64_t bs,
                        mla_dtype kdt)
{
    static float kf[QT * D], sc[QT];
    static uint16_t kb[QT * D];
    static uint8_t codes[QT * D];
    quant_rows(kf);
    for (int i = 0; i < QT * D; ++i)
        kb[i] = mla_f32_to_bf16(kf[i]);
    mla_tensor tk = tensor(kdt == MLA_DTYPE_F32 ? (void *)kf : (void *)kb, kdt, 2, QT, D, 0);
    mla_tensor tc = tensor(codes, fp8, 2, QT, D, 0), ts = tensor(sc, MLA_DTYPE_F32, 2, QT, 1, 0);
    const mla_fp8_scale_rule rule = ue8m0 ? MLA_FP8_SCALE_UE8M0 : MLA_FP8_SCALE_DIV;
    CHECK_STATUS(mla_fp8_group_quant(ctx, &tk, &tc, &ts, D, rule), MLA_OK);

    const int64_t blocks = 32 / bs + 1;
    mla_indexer_cache_desc d = desc_of(blocks, bs, fp8, layout, ue8m0);
    uint8_t *mem;
    mla_tensor cache = cache_of(&d, &mem);
    int64_t slots[QT] = {5, -1, 0, 17, 30, 3};
    mla_tensor tsl = tensor(slots, MLA_DTYPE_I64, 1, QT, 0, 0);
    CHECK_STATUS(mla_indexer_k_cache_write(ctx, &d, &cache, &tk, &tsl), MLA_OK);
    const mla_indexer_layout lay = layout ? layout : mla_indexer_layout_for(bs);
    const int64_t bb = cache.stride[0];
    unsigned char *mine = calloc((size_t)(blocks * bb), 1); /* bytes a token owns */
    int ok = 1;
    for (int t = 0; t < QT; ++t) {
        if (slots[t] < 0)
            continue;
        const int64_t base = (slots[t] / bs) * bb, tok = slots[t] % bs;
        for (int i = 0; i < D; ++i) {
            ok &= mem[base + spec_value_byte(lay, tok, i)] == codes[t * D + i];
            mine[base + spec_value_byte(lay, tok, i)] = 1;
        }
        ok &= bits_of(scale_at(mem + base, bs, tok)) == bits_of(sc[t]);
        memset(mine + base + bs * D + 4 * tok, 1, 4);
    }
    CHECK(ok);
    int untouched = 1; /* slot -1 and the slots nobody wrote */
    for (int64_t i = 0; i < blocks * bb; ++i)
        untouched &= mine[i] || mem[i] == SENTINEL;
    CHECK(untouched);
    free(mine);
    free(mem);
}

/* k as a transposed view and slots every other element write the bytes of
 * contiguous inputs. */
static void check_strided_write(void)
{
    static float kf[QT * D], kt[D * QT];
    quant_rows(kf);
    for (int t = 0; t < QT; ++t)
        for (int i = 0; i < D; ++i)
            kt[i * QT + t] = kf[t * D + i];
    int32_t slots[QT] = {9, 2, -1, 31, 16, 0}, spread[2 * QT];
    for (int t = 0; t < QT; ++t) {
        spread[2 * t] = slots[t];
        spread[2 * t + 1] = 1000; /* out of range: must not be read */
    }
    mla_indexer_cache_desc d = desc_of(2, 16, MLA_DTYPE_FP8_E4M3FN, MLA_INDEXER_LAYOUT_AUTO, 1);
    uint8_t *m1, *m2;
    mla_tensor c1 = cache_of(&d, &m1), c2 = cache_of(&d, &m2);
    mla_tensor tk = tensor(kf, MLA_DTYPE_F32, 2, QT, D, 0);
    mla_tensor ts = tensor(slots, MLA_DTYPE_I32, 1, QT, 0, 0);
    CHECK_STATUS(mla_indexer_k_cache_write(ctx, &d, &c1, &tk, &ts), MLA_OK);
    mla_tensor tkt = tensor(kt, MLA_DTYPE_F32, 2, QT, D, 0);
    tkt.stride[0] = 1;
    tkt.stride[1] = QT;
    mla_tensor tss = tensor(spread, MLA_DTYPE_I32, 1, QT, 0, 0);
    tss.stride[0] = 2;
    CHECK_STATUS(mla_indexer_k_cache_write(ctx, &d, &c2, &tkt, &tss), MLA_OK);
    CHECK(memcmp(m1, m2, (size_t)(2 * c1.stride[0])) == 0);
    free(m1);
    free(m2);
}

static void test_k_cache_write(void)
{
    const mla_dtype fp8s[2] = {MLA_DTYPE_FP8_E4M3FN, MLA_DTYPE_FP8_E4M3FNUZ};
    for (int f = 0; f < 2; ++f)
        for (int u = 0; u < 2; ++u) {
            check_write(fp8s[f], u, MLA_INDEXER_LAYOUT_AUTO, 1, MLA_DTYPE_F32);
            check_write(fp8s[f], u, MLA_INDEXER_LAYOUT_AUTO, 16, MLA_DTYPE_F32);
            check_write(fp8s[f], u, MLA_INDEXER_NORMAL, 16, MLA_DTYPE_BF16);
        }
    check_strided_write();

    /* Hand-checked scales: amax 56 = 448 / 8: DIV and UE8M0 both 0.125; an
     * all-zero row: 1e-4f / 448 (DIV) and 2^-22 (UE8M0: 1e-4/448 ~ 2^-21.97). */
    float k[2 * D], s_out[2];
    uint8_t mem[2 * (D + 4)];
    for (int i = 0; i < D; ++i) {
        k[i] = i == 3 ? 56.0f : 1.0f;
        k[D + i] = 0.0f;
    }
    int32_t slots[2] = {0, 1};
    mla_tensor tk = tensor(k, MLA_DTYPE_F32, 2, 2, D, 0),
               tsl = tensor(slots, MLA_DTYPE_I32, 1, 2, 0, 0);
    for (int u = 0; u < 2; ++u) {
        mla_indexer_cache_desc d = desc_of(1, 2, MLA_DTYPE_FP8_E4M3FN, MLA_INDEXER_NORMAL, u);
        mla_tensor tc = tensor(mem, MLA_DTYPE_U8, 2, 1, 2 * (D + 4), 0);
        CHECK_STATUS(mla_indexer_k_cache_write(ctx, &d, &tc, &tk, &tsl), MLA_OK);
        s_out[0] = scale_at(mem, 2, 0);
        s_out[1] = scale_at(mem, 2, 1);
        CHECK(s_out[0] == 0.125f);
        CHECK(mem[3] == mla_f32_to_fp8(448.0f, MLA_DTYPE_FP8_E4M3FN, MLA_SATURATE));
        CHECK(mem[0] == mla_f32_to_fp8(8.0f, MLA_DTYPE_FP8_E4M3FN, MLA_SATURATE));
        CHECK(s_out[1] == (u ? ldexpf(1.0f, -22) : 1e-4f / 448.0f));
        CHECK(mem[D] == 0);
    }
}

/* ---------------------------------------------- layouts, write -> gather */

static void test_layout_rule(void)
{
    CHECK(mla_indexer_layout_for(1) == MLA_INDEXER_NORMAL);
    CHECK(mla_indexer_layout_for(16) == MLA_INDEXER_SHUFFLE);
    CHECK(mla_indexer_layout_for(64) == MLA_INDEXER_SHUFFLE);

    /* SHUFFLE offsets: a bijection onto [0, bs * D) within a block, equal to
     * MLA.md's formula; scales after the values. */
    const int64_t sizes[2] = {16, 64};
    for (int s = 0; s < 2; ++s) {
        const int64_t bs = sizes[s];
        unsigned char *seen = calloc((size_t)(bs * D), 1);
        int ok = 1;
        for (int64_t t = 0; t < bs; ++t)
            for (int64_t d = 0; d < D; ++d) {
                const int64_t o = mla_il_value_byte(MLA_IL_SHUFFLE, t, d, D);
                ok &= o >= 0 && o < bs * D && !seen[o] &&
                      o == spec_value_byte(MLA_INDEXER_SHUFFLE, t, d);
                if (o >= 0 && o < bs * D)
                    seen[o] = 1;
                ok &= mla_il_value_byte(MLA_IL_NORMAL, t, d, D) == t * D + d;
            }
        CHECK(ok);
        CHECK(mla_il_scale_byte(3, bs, D) == bs * D + 12);
        CHECK(mla_il_block_bytes(bs, D) == bs * (D + 4));
        free(seen);
    }

    /* Forcing SHUFFLE on block_size 8 is refused, and nothing is written. */
    float k[D];
    for (int i = 0; i < D; ++i)
        k[i] = val(i);
    int32_t slot = 0;
    mla_indexer_cache_desc d = desc_of(1, 8, MLA_DTYPE_FP8_E4M3FN, MLA_INDEXER_SHUFFLE, 0);
    uint8_t mem[8 * (D + 4)];
    memset(mem, SENTINEL, sizeof mem);
    mla_tensor tc = tensor(mem, MLA_DTYPE_U8, 2, 1, 8 * (D + 4), 0);
    mla_tensor tk = tensor(k, MLA_DTYPE_F32, 2, 1, D, 0),
               ts = tensor(&slot, MLA_DTYPE_I32, 1, 1, 0, 0);
    CHECK_STATUS(mla_indexer_k_cache_write(ctx, &d, &tc, &tk, &ts), MLA_ERR_INVALID_ARGUMENT);
    CHECK(param_is("cache_desc.block_size"));
    int untouched = 1;
    for (size_t i = 0; i < sizeof mem; ++i)
        untouched &= mem[i] == SENTINEL;
    CHECK(untouched);
    d.layout = MLA_INDEXER_LAYOUT_AUTO; /* AUTO: SHUFFLE, still not a multiple of 16 */
    CHECK_STATUS(mla_indexer_k_cache_write(ctx, &d, &tc, &tk, &ts), MLA_ERR_INVALID_ARGUMENT);
    CHECK(param_is("cache_desc.block_size"));
}

enum { GS = 3, GT = 5 + 37 + 70 }; /* three sequences of 5, 37 and 70 tokens */

/* Token j of sequence s is written to block table[s][j / bs], j % bs; the
 * gather of the three sequences returns the codes and scales of
 * mla_fp8_group_quant row for row. */
static void check_gather(int64_t bs, mla_indexer_layout layout, mla_dtype fp8)
{
    static float k[GT * D], sc_ref[GT], sc[GT];
    static uint8_t codes_ref[GT * D], codes[GT * D];
    const int32_t cu[GS + 1] = {0, 5, 42, 112};
    for (int i = 0; i < GT * D; ++i)
        k[i] = val(7 * i + 3) * (float)(1 + (i / D) % 5);
    mla_tensor tk = tensor(k, MLA_DTYPE_F32, 2, GT, D, 0);
    mla_tensor tcr = tensor(codes_ref, fp8, 2, GT, D, 0),
               tsr = tensor(sc_ref, MLA_DTYPE_F32, 2, GT, 1, 0);
    CHECK_STATUS(mla_fp8_group_quant(ctx, &tk, &tcr, &tsr, D, MLA_FP8_SCALE_UE8M0), MLA_OK);

    /* Blocks handed out in reverse order, so logical and physical differ. */
    int64_t max_blocks = (70 + bs - 1) / bs, blocks = 0;
    int32_t *table = calloc((size_t)(GS * max_blocks), sizeof *table);
    for (int s = 0; s < GS; ++s)
        blocks += (cu[s + 1] - cu[s] + bs - 1) / bs;
    int64_t next = blocks - 1, slots[GT];
    for (int s = 0; s < GS; ++s)
        for (int64_t j = 0; j < cu[s + 1] - cu[s]; ++j) {
            if (j % bs == 0)
                table[s * max_blocks + j / bs] = (int32_t)next--;
            slots[cu[s] + j] = table[s * max_blocks + j / bs] * bs + j % bs;
        }
    mla_indexer_cache_desc d = desc_of(blocks, bs, fp8, layout, 1);
    uint8_t *mem;
    mla_tensor cache = cache_of(&d, &mem);
    mla_tensor tsl = tensor(slots, MLA_DTYPE_I64, 1, GT, 0, 0);
    CHECK_STATUS(mla_indexer_k_cache_write(ctx, &d, &cache, &tk, &tsl), MLA_OK);
    mla_tensor tt = tensor(table, MLA_DTYPE_I32, 2, GS, max_blocks, 0);
    mla_tensor tcu = tensor((void *)cu, MLA_DTYPE_I32, 1, GS + 1, 0, 0);
    mla_tensor tc = tensor(codes, fp8, 2, GT, D, 0), ts = tensor(sc, MLA_DTYPE_F32, 1, GT, 0, 0);
    CHECK_STATUS(mla_indexer_k_gather(ctx, &d, &cache, &tt, &tcu, &tc, &ts), MLA_OK);
    CHECK(memcmp(codes, codes_ref, sizeof codes) == 0);
    CHECK(memcmp(sc, sc_ref, sizeof sc) == 0);

    /* Reading a SHUFFLE cache as NORMAL (seed 002) gives other bytes. */
    if (d.layout == MLA_INDEXER_SHUFFLE || (d.layout == MLA_INDEXER_LAYOUT_AUTO && bs > 1)) {
        mla_indexer_cache_desc wrong = d;
        wrong.layout = MLA_INDEXER_NORMAL;
        CHECK_STATUS(mla_indexer_k_gather(ctx, &wrong, &cache, &tt, &tcu, &tc, &ts), MLA_OK);
        CHECK(memcmp(codes, codes_ref, sizeof codes) != 0);
    }
    free(mem);
    free(table);
}

static void test_gather(void)
{
    check_gather(1, MLA_INDEXER_LAYOUT_AUTO, MLA_DTYPE_FP8_E4M3FN);
    check_gather(1, MLA_INDEXER_NORMAL, MLA_DTYPE_FP8_E4M3FNUZ);
    const int64_t sizes[2] = {16, 64};
    for (int s = 0; s < 2; ++s) {
        check_gather(sizes[s], MLA_INDEXER_LAYOUT_AUTO, MLA_DTYPE_FP8_E4M3FN);
        check_gather(sizes[s], MLA_INDEXER_SHUFFLE, MLA_DTYPE_FP8_E4M3FNUZ);
        check_gather(sizes[s], MLA_INDEXER_NORMAL, MLA_DTYPE_FP8_E4M3FN);
    }
}

/* ---------------------------------------------------------------- logits */

enum { LB = 2, HI = 4, NMAX = 48, LBS = 16, LMB = 3, LT = 37 + 20 };

static double relu(double v)
{
    return v < 0.0 ? 0.0 : v;
}

/* Sequences of 37 and 20 tokens in a 16-token-block cache, next_n query
 * rows each; the logits of the NORMAL and SHUFFLE caches both equal a direct
 * float64 computation from mla_fp8_group_quant's codes and scales (DIV rule)
 * bit for bit, with -inf from each row's causal bound to the end. */
static void check_logits(mla_dtype fp8, int32_t next_n)
{
    const int32_t lens[LB] = {37, 20}, first[LB] = {0, 37};
    const int32_t table[LB * LMB] = {5, 2, 7, 0, 6, 3};
    const int64_t R = LB * next_n;
    static float k[LT * D], sc[LT], w[LB * 2 * HI], want[LB * 2 * NMAX], got[2][LB * 2 * NMAX];
    static uint8_t kc[LT * D], q[LB * 2 * HI * D];
    for (int i = 0; i < LT * D; ++i)
        k[i] = val(5 * i + 1) * (float)(1 + (i / D) % 3);
    for (int i = 0; i < R * HI * D; ++i)
        q[i] = mla_f32_to_fp8(val(11 * i + 2) * 4.0f, fp8, MLA_SATURATE);
    for (int i = 0; i < R * HI; ++i)
        w[i] = val(13 * i + 5) + 0.01f * (float)i;
    mla_tensor tk = tensor(k, MLA_DTYPE_F32, 2, LT, D, 0);
    mla_tensor tkc = tensor(kc, fp8, 2, LT, D, 0), tsc = tensor(sc, MLA_DTYPE_F32, 2, LT, 1, 0);
    CHECK_STATUS(mla_fp8_group_quant(ctx, &tk, &tkc, &tsc, D, MLA_FP8_SCALE_DIV), MLA_OK);

    int negative_dots = 0;
    for (int64_t r = 0; r < R; ++r) {
        const int64_t b = r / next_n, j = r % next_n, bound = lens[b] - next_n + j + 1;
        for (int64_t n = 0; n < NMAX; ++n) {
            if (n >= bound) {
                want[r * NMAX + n] = -INFINITY;
                continue;
            }
            double sum = 0.0;
            for (int h = 0; h < HI; ++h) {
                double dot = 0.0;
                for (int i = 0; i < D; ++i)
                    dot += (double)mla_fp8_to_f32(q[(r * HI + h) * D + i], fp8) *
                           mla_fp8_to_f32(kc[(first[b] + n) * D + i], fp8);
                negative_dots += dot < 0.0;
                sum += (double)w[r * HI + h] * relu(dot);
            }
            want[r * NMAX + n] = (float)((double)sc[first[b] + n] * sum);
        }
    }
    CHECK(negative_dots > 0); /* relu is exercised */

    int64_t slots[LT];
    for (int b = 0; b < LB; ++b)
        for (int j = 0; j < lens[b]; ++j)
            slots[first[b] + j] = table[b * LMB + j / LBS] * LBS + j % LBS;
    mla_tensor tsl = tensor(slots, MLA_DTYPE_I64, 1, LT, 0, 0);
    mla_tensor tq = tensor(q, fp8, 3, R, HI, D), tw = tensor(w, MLA_DTYPE_F32, 2, R, HI, 0);
    mla_tensor tt = tensor((void *)table, MLA_DTYPE_I32, 2, LB, LMB, 0);
    mla_tensor tl = tensor((void *)lens, MLA_DTYPE_I32, 1, LB, 0, 0);
    const mla_indexer_layout layouts[2] = {MLA_INDEXER_NORMAL, MLA_INDEXER_LAYOUT_AUTO};
    for (int l = 0; l < 2; ++l) {
        mla_indexer_cache_desc d = desc_of(8, LBS, fp8, layouts[l], 0);
        uint8_t *mem;
        mla_tensor cache = cache_of(&d, &mem);
        CHECK_STATUS(mla_indexer_k_cache_write(ctx, &d, &cache, &tk, &tsl), MLA_OK);
        mla_tensor tlg = tensor(got[l], MLA_DTYPE_F32, 2, R, NMAX, 0);
        CHECK_STATUS(mla_indexer_logits(ctx, &d, &cache, &tq, &tw, &tt, &tl, next_n, &tlg), MLA_OK);
        int ok = 1;
        for (int64_t i = 0; i < R * NMAX; ++i)
            ok &= bits_of(got[l][i]) == bits_of(want[i]);
        CHECK(ok);
        free(mem);
    }
    CHECK(memcmp(got[0], got[1], (size_t)(R * NMAX) * sizeof(float)) == 0);
}

static void test_logits(void)
{
    check_logits(MLA_DTYPE_FP8_E4M3FN, 1);
    check_logits(MLA_DTYPE_FP8_E4M3FN, 2);
    check_logits(MLA_DTYPE_FP8_E4M3FNUZ, 1);
    check_logits(MLA_DTYPE_FP8_E4M3FNUZ, 2);
}

/* ----------------------------------------------------------------- top-k */

/* The naive answer: k times the largest not yet taken (the first index among
 * equals; NaN below everything, first index among NaNs), then the taken in
 * index order, -1 past them. */
static void naive_topk(const float *row, int len, int k, int32_t *out)
{
    unsigned char taken[512] = {0};
    for (int c = 0; c < k; ++c) {
        int best = -1;
        for (int n = 0; n < len; ++n) {
            if (taken[n])
                continue;
            if (best < 0 || (isnan(row[best]) && !isnan(row[n])) ||
                (!isnan(row[n]) && row[n] > row[best]))
                best = n;
        }
        if (best >= 0)
            taken[best] = 1;
    }
    int c = 0;
    for (int n = 0; n < len; ++n)
        if (taken[n])
            out[c++] = n;
    while (c < k)
        out[c++] = -1;
}

static void test_topk(void)
{
    enum { N = 8 };
    const float lg[4 * N] = {
        1,     3,    3,         2,   3,   -INFINITY, NAN, 0,    /* len 8 */
        -0.0f, 0.0f, 5,         9,   9,   9,         9,   9,    /* len 3: 9s are past it */
        4,     4,    4,         4,   4,   4,         4,   4,    /* len 0 */
        NAN,   NAN,  -INFINITY, NAN, NAN, NAN,       NAN, NAN}; /* len 8 */
    const int32_t lens[4] = {8, 3, 0, 8};
    const int32_t want8[4 * N] = {0,  1,  2,  3,  4,  5,  6,  7,  0, 1, 2, -1, -1, -1, -1, -1,
                                  -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 2, 3,  4,  5,  6,  7};
    /* k = 2: the first two 3s; 5 and +0 over -0 (ties: the lower index);
     * -inf and the first NaN (NaN below every number) */
    const int32_t want2[4 * 2] = {1, 2, 0, 2, -1, -1, 0, 2};
    int32_t idx[4 * N];
    mla_tensor tlg = tensor((void *)lg, MLA_DTYPE_F32, 2, 4, N, 0);
    mla_tensor tl = tensor((void *)lens, MLA_DTYPE_I32, 1, 4, 0, 0);
    mla_tensor ti = tensor(idx, MLA_DTYPE_I32, 2, 4, N, 0);
    CHECK_STATUS(mla_topk(ctx, &tlg, &tl, N, &ti), MLA_OK);
    CHECK(memcmp(idx, want8, sizeof idx) == 0);
    int32_t idx2[4 * 2];
    mla_tensor ti2 = tensor(idx2, MLA_DTYPE_I32, 2, 4, 2, 0);
    CHECK_STATUS(mla_topk(ctx, &tlg, &tl, 2, &ti2), MLA_OK);
    CHECK(memcmp(idx2, want2, sizeof idx2) == 0);

    /* k past the row is refused; indices untouched. */
    int32_t idx9[4 * 9];
    memset(idx9, SENTINEL, sizeof idx9);
    mla_tensor ti9 = tensor(idx9, MLA_DTYPE_I32, 2, 4, 9, 0);
    CHECK_STATUS(mla_topk(ctx, &tlg, &tl, 9, &ti9), MLA_ERR_INVALID_ARGUMENT);
    CHECK(param_is("k"));
    CHECK(((const uint8_t *)idx9)[0] == SENTINEL &&
          ((const uint8_t *)idx9)[sizeof idx9 - 1] == SENTINEL);

    /* Many ties (256 levels in 400 values, some NaN and -inf) against the
     * naive selection. */
    enum { RN = 400, RK = 150 };
    static float row[2 * RN];
    static int32_t got[2 * RK], naive[2 * RK];
    const int32_t rlens[2] = {RN, 97};
    for (int i = 0; i < 2 * RN; ++i)
        row[i] = i % 37 == 0 ? NAN : (i % 41 == 0 ? -INFINITY : val(i));
    for (int r = 0; r < 2; ++r)
        naive_topk(row + r * RN, rlens[r], RK, naive + r * RK);
    mla_tensor tr = tensor(row, MLA_DTYPE_F32, 2, 2, RN, 0);
    mla_tensor trl = tensor((void *)rlens, MLA_DTYPE_I32, 1, 2, 0, 0);
    mla_tensor tg = tensor(got, MLA_DTYPE_I32, 2, 2, RK, 0);
    CHECK_STATUS(mla_topk(ctx, &tr, &trl, RK, &tg), MLA_OK);
    CHECK(memcmp(got, naive, sizeof got) == 0);
}

/* ------------------------------------------------------------- LayerNorm */

static void test_layernorm(void)
{
    /* x = (1, 3): mean 2, variance 1, eps 0: y = (-1, 1) * w + b exactly. */
    float x[2] = {1, 3}, w[2] = {2, 0.5f}, b[2] = {0.25f, -1}, y[2];
    mla_tensor tx = tensor(x, MLA_DTYPE_F32, 2, 1, 2, 0), ty = tensor(y, MLA_DTYPE_F32, 2, 1, 2, 0);
    mla_tensor tw = tensor(w, MLA_DTYPE_F32, 1, 2, 0, 0), tb = tensor(b, MLA_DTYPE_F32, 1, 2, 0, 0);
    CHECK_STATUS(mla_layernorm(ctx, &tx, &tw, &tb, 0.0f, &ty), MLA_OK);
    CHECK(y[0] == -1.75f && y[1] == -0.5f);

    /* x = (1, 2, 3, 4), eps 0.5: mean 2.5, population variance 1.25. A
     * constant row gives b. */
    float x4[8] = {1, 2, 3, 4, 5, 5, 5, 5}, w4[4] = {1, 1, 1, 1}, b4[4] = {0, 0.5f, 0, -3}, y4[8];
    mla_tensor tx4 = tensor(x4, MLA_DTYPE_F32, 2, 2, 4, 0),
               ty4 = tensor(y4, MLA_DTYPE_F32, 2, 2, 4, 0);
    mla_tensor tw4 = tensor(w4, MLA_DTYPE_F32, 1, 4, 0, 0),
               tb4 = tensor(b4, MLA_DTYPE_F32, 1, 4, 0, 0);
    CHECK_STATUS(mla_layernorm(ctx, &tx4, &tw4, &tb4, 0.5f, &ty4), MLA_OK);
    int ok = 1;
    for (int d = 0; d < 4; ++d) {
        ok &= y4[d] == (float)((x4[d] - 2.5) / sqrt(1.75) + b4[d]);
        ok &= y4[4 + d] == b4[d];
    }
    CHECK(ok);

    /* A row far from 0 (10^4 + small): float64 two-pass statistics give a
     * normalized row of mean 0 and variance 1 (eps 0, w 1, b 0). */
    enum { LD = 128 };
    static float xf[LD], yf[LD], ones[LD], zeros[LD];
    for (int i = 0; i < LD; ++i) {
        xf[i] = 10000.0f + val(i) / 16;
        ones[i] = 1;
        zeros[i] = 0;
    }
    mla_tensor txf = tensor(xf, MLA_DTYPE_F32, 2, 1, LD, 0),
               tyf = tensor(yf, MLA_DTYPE_F32, 2, 1, LD, 0);
    mla_tensor to = tensor(ones, MLA_DTYPE_F32, 1, LD, 0, 0),
               tz = tensor(zeros, MLA_DTYPE_F32, 1, LD, 0, 0);
    CHECK_STATUS(mla_layernorm(ctx, &txf, &to, &tz, 0.0f, &tyf), MLA_OK);
    double mean = 0, var = 0;
    for (int i = 0; i < LD; ++i)
        mean += yf[i] / (double)LD;
    for (int i = 0; i < LD; ++i)
        var += (yf[i] - mean) * (yf[i] - mean) / LD;
    CHECK(fabs(mean) < 1e-6 && fabs(var - 1.0) < 1e-6);

    /* bf16 in place gives the bits of out of place. */
    enum { T = 3, BD = 16 };
    uint16_t xb[T * BD], ob[T * BD];
    float wb[BD], bb[BD];
    for (int i = 0; i < T * BD; ++i)
        xb[i] = mla_f32_to_bf16(val(50 + i));
    for (int i = 0; i < BD; ++i) {
        wb[i] = val(500 + i);
        bb[i] = val(600 + i) / 4;
    }
    mla_tensor txb = tensor(xb, MLA_DTYPE_BF16, 2, T, BD, 0),
               tob = tensor(ob, MLA_DTYPE_BF16, 2, T, BD, 0);
    mla_tensor twb = tensor(wb, MLA_DTYPE_F32, 1, BD, 0, 0),
               tbb = tensor(bb, MLA_DTYPE_F32, 1, BD, 0, 0);
    CHECK_STATUS(mla_layernorm(ctx, &txb, &twb, &tbb, 1e-6f, &tob), MLA_OK);
    CHECK_STATUS(mla_layernorm(ctx, &txb, &twb, &tbb, 1e-6f, &txb), MLA_OK);
    CHECK(memcmp(xb, ob, sizeof xb) == 0);
}

/* -------------------------------------------------------------- Hadamard */

static void test_hadamard(void)
{
    /* D = 1: the identity. D = 2: (a + b, a - b) / sqrt(2). */
    float x1[2] = {3, -7}, y1[2];
    mla_tensor t1 = tensor(x1, MLA_DTYPE_F32, 2, 2, 1, 0),
               u1 = tensor(y1, MLA_DTYPE_F32, 2, 2, 1, 0);
    CHECK_STATUS(mla_hadamard(ctx, &t1, &u1), MLA_OK);
    CHECK(y1[0] == 3 && y1[1] == -7);
    float x2[2] = {3, 1}, y2[2];
    mla_tensor t2 = tensor(x2, MLA_DTYPE_F32, 2, 1, 2, 0),
               u2 = tensor(y2, MLA_DTYPE_F32, 2, 1, 2, 0);
    CHECK_STATUS(mla_hadamard(ctx, &t2, &u2), MLA_OK);
    CHECK(y2[0] == (float)(4 / sqrt(2.0)) && y2[1] == (float)(2 / sqrt(2.0)));

    /* D = 4, [T=2, H=2, 4]: unit rows give rows of Sylvester's H_4 / 2
     * (row 1 = (1, -1, 1, -1), row 3 = (1, -1, -1, 1)); ones give (2, 0, 0, 0). */
    float x4[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1}, y4[16];
    const float want4[16] = {0.5f, 0.5f,  0.5f,  0.5f, 0.5f, -0.5f, 0.5f, -0.5f,
                             0.5f, -0.5f, -0.5f, 0.5f, 2,    0,     0,    0};
    mla_tensor t4 = tensor(x4, MLA_DTYPE_F32, 3, 2, 2, 4),
               u4 = tensor(y4, MLA_DTYPE_F32, 3, 2, 2, 4);
    CHECK_STATUS(mla_hadamard(ctx, &t4, &u4), MLA_OK);
    CHECK(memcmp(y4, want4, sizeof y4) == 0);

    /* D = 128: H / sqrt(D) is orthogonal and its own inverse: twice (in
     * place) gives x back within rounding, and the norm is kept. */
    enum { T = 3, HD = 128 };
    static float x[T * HD], y[T * HD];
    for (int i = 0; i < T * HD; ++i)
        x[i] = val(3 * i + 1) + (float)i / 1024;
    memcpy(y, x, sizeof x);
    mla_tensor ty = tensor(y, MLA_DTYPE_F32, 2, T, HD, 0);
    CHECK_STATUS(mla_hadamard(ctx, &ty, &ty), MLA_OK);
    double nx = 0, ny = 0, maxerr = 0;
    for (int i = 0; i < T * HD; ++i) {
        nx += (double)x[i] * x[i];
        ny += (double)y[i] * y[i];
    }
    CHECK(fabs(nx - ny) < 1e-5 * nx);
    CHECK_STATUS(mla_hadamard(ctx, &ty, &ty), MLA_OK);
    for (int i = 0; i < T * HD; ++i)
        maxerr = fmax(maxerr, fabs((double)y[i] - x[i]));
    CHECK(maxerr < 1e-6);

    /* bf16 in place gives the bits of out of place. */
    uint16_t xb[T * HD], ob[T * HD];
    for (int i = 0; i < T * HD; ++i)
        xb[i] = mla_f32_to_bf16(x[i]);
    mla_tensor txb = tensor(xb, MLA_DTYPE_BF16, 2, T, HD, 0),
               tob = tensor(ob, MLA_DTYPE_BF16, 2, T, HD, 0);
    CHECK_STATUS(mla_hadamard(ctx, &txb, &tob), MLA_OK);
    CHECK_STATUS(mla_hadamard(ctx, &txb, &txb), MLA_OK);
    CHECK(memcmp(xb, ob, sizeof xb) == 0);
}

/* ---------------------------------------------------------- head weights */

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* w_out = fl(fl(fl(w * s_q) * fl(128^-0.5)) * fl(Hi^-0.5)), bit for bit:
 * Hi = 64 (F32 w; 64^-0.5 = 0.125) and Hi = 3 (BF16 w). The order is
 * visible: some entries differ from w * fl(s_q * fl(c128 * c_h)). */
static void check_head_weights(int64_t hi, uint32_t c_h_bits, mla_dtype wdt)
{
    enum { T = 4, MAXH = 64 };
    static float wf[T * MAXH], s[T * MAXH], out[T * MAXH];
    static uint16_t wb[T * MAXH];
    const float c128 = float_of(0x3DB504F3u), c_h = float_of(c_h_bits);
    for (int i = 0; i < T * hi; ++i) {
        wf[i] = val(9 * i + 4) * 1.37f;
        wb[i] = mla_f32_to_bf16(wf[i]);
        if (wdt == MLA_DTYPE_BF16)
            wf[i] = mla_bf16_to_f32(wb[i]);
        s[i] = i % 3 == 0 ? ldexpf(1.0f, -(i % 9)) : 0.01f * (float)(i + 1);
    }
    mla_tensor tw = tensor(wdt == MLA_DTYPE_F32 ? (void *)wf : (void *)wb, wdt, 2, T, hi, 0);
    mla_tensor ts = tensor(s, MLA_DTYPE_F32, 2, T, hi, 0),
               to = tensor(out, MLA_DTYPE_F32, 2, T, hi, 0);
    CHECK_STATUS(mla_indexer_head_weights(ctx, &tw, &ts, &to), MLA_OK);
    int ok = 1, order_visible = 0;
    for (int i = 0; i < T * hi; ++i) {
        volatile float p = wf[i] * s[i];
        p = p * c128;
        p = p * c_h;
        volatile float c = c128 * c_h;
        c = s[i] * c;
        volatile float other = wf[i] * c;
        ok &= bits_of(out[i]) == bits_of(p);
        order_visible |= bits_of(other) != bits_of(p);
    }
    CHECK(ok);
    CHECK(order_visible);
}

static void test_head_weights(void)
{
    check_head_weights(64, 0x3E000000u, MLA_DTYPE_F32);
    check_head_weights(3, 0x3F13CD3Au, MLA_DTYPE_BF16);
}

int main(void)
{
    if (mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ctx) != MLA_OK) {
        fprintf(stderr, "no reference context\n");
        return 1;
    }
    test_k_cache_write();
    test_layout_rule();
    test_gather();
    test_logits();
    test_topk();
    test_layernorm();
    test_hadamard();
    test_head_weights();
    mla_context_destroy(ctx);
    return TEST_SUMMARY();
}
