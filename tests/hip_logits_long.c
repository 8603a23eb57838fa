/* A device check of the HIP paged logits on long contexts (not registered with
 * CTest: it wants a GPU, or the CPU emulation's libmla.a). Three sequences of
 * 5000, 2507 and 1233 keys (many key stages per warp, several chunks per row,
 * every row ending in -inf), Hi 64 and 40, block sizes 64, 48, 7 and 1 (the
 * shift and the division paths of the address math), both layouts and fp8
 * flavours, next_n 1 and 2, and NaN codes placed in a key and in one head of
 * one row's q: the HIP context's logits against the reference context's,
 * NaN for NaN, -inf for -inf, values within 1e-5 of the row's largest
 * magnitude (a wrong key, head or scale is off by far more; the
 * conformance suite holds the tight bound on short rows).
 *
 *   build/gpu (any HIP build dir): L=$(ninja -t commands apps/mla | tail -n 1 |
 *     sed 's#.* -o apps/mla ##; s# && :$##')
 *   cc -O2 -std=c11 -DMLA_STATIC_DEFINE -I../../include -I../.. \
 *     ../../tests/hip_logits_long.c -o hip_logits_long $L -lm && ./hip_logits_long
 *
 * Exit status 0 when every case agrees. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mla/mla.h"
#include "mla/mla_indexer.h"

enum { B = 3, D = 128 };

static mla_context *hip, *ref;
static uint32_t seed = 12345;

static uint32_t rnd(void)
{
    seed = seed * 1664525u + 1013904223u;
    return seed >> 8;
}

/* A finite fp8 code of the flavour. */
static uint8_t code(int fnuz)
{
    for (;;) {
        const uint8_t c = (uint8_t)rnd();
        if (fnuz ? c != 0x80 : (c & 0x7F) != 0x7F)
            return c;
    }
}

#define CK(x)                                                                                      \
    do {                                                                                           \
        mla_status st_ = (x);                                                                      \
        if (st_ != MLA_OK) {                                                                       \
            printf("  %s: %s (%s)\n", #x, mla_status_name(st_), mla_context_error_detail(c));     \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

typedef struct {
    const uint8_t *cache, *q;
    const float *w;
    const int32_t *table, *lens;
    size_t cache_bytes;
    int64_t blocks, block_bytes, mb, R, Hi, maxl;
    int32_t next_n;
    mla_indexer_cache_desc desc;
} problem;

static int upload(mla_context *c, const void *h, size_t bytes, void **d)
{
    CK(mla_malloc(c, bytes, d));
    CK(mla_memcpy(c, *d, h, bytes, MLA_COPY_HOST_TO_CONTEXT));
    return 0;
}

/* The logits of p on context c into out (host, R x maxl). */
static int logits_on(mla_context *c, const problem *p, float *out)
{
    void *dc = NULL, *dq = NULL, *dw = NULL, *dt = NULL, *dl = NULL, *dout = NULL;
    const size_t qb = (size_t)(p->R * p->Hi * D), wb = (size_t)(p->R * p->Hi) * 4,
                 tb = (size_t)(B * p->mb) * 4, ob = (size_t)(p->R * p->maxl) * 4;
    if (upload(c, p->cache, p->cache_bytes, &dc) || upload(c, p->q, qb, &dq) ||
        upload(c, p->w, wb, &dw) || upload(c, p->table, tb, &dt) ||
        upload(c, p->lens, B * 4, &dl))
        return 1;
    CK(mla_malloc(c, ob, &dout));
    const mla_memory m = mla_context_memory(c);
    const int64_t sc[2] = {p->blocks, p->block_bytes}, sq[3] = {p->R, p->Hi, D},
                  sw[2] = {p->R, p->Hi}, st[2] = {B, p->mb}, sl[1] = {B}, so[2] = {p->R, p->maxl};
    mla_tensor tc, tq, tw, tt, tl, to;
    CK(mla_tensor_init(&tc, dc, MLA_DTYPE_U8, m, 2, sc));
    CK(mla_tensor_init(&tq, dq, p->desc.dtype, m, 3, sq));
    CK(mla_tensor_init(&tw, dw, MLA_DTYPE_F32, m, 2, sw));
    CK(mla_tensor_init(&tt, dt, MLA_DTYPE_I32, m, 2, st));
    CK(mla_tensor_init(&tl, dl, MLA_DTYPE_I32, m, 1, sl));
    CK(mla_tensor_init(&to, dout, MLA_DTYPE_F32, m, 2, so));
    CK(mla_indexer_logits(c, &p->desc, &tc, &tq, &tw, &tt, &tl, p->next_n, &to));
    CK(mla_memcpy(c, out, dout, ob, MLA_COPY_CONTEXT_TO_HOST));
    void *all[6] = {dc, dq, dw, dt, dl, dout};
    for (int i = 0; i < 6; ++i)
        mla_free(c, all[i]);
    return 0;
}

static int run(int bs, mla_indexer_layout layout, int fnuz, int next_n, int Hi, int nan_q,
               int nan_k)
{
    const int lens[B] = {5000, 2507, 1233};
    problem p;
    memset(&p, 0, sizeof p);
    p.next_n = next_n;
    p.Hi = Hi;
    p.R = B * next_n;
    p.maxl = 5003 + next_n;
    p.mb = (p.maxl + bs - 1) / bs;
    p.blocks = B * p.mb + 1;
    p.desc = (mla_indexer_cache_desc){
        p.blocks, bs, D, fnuz ? MLA_DTYPE_FP8_E4M3FNUZ : MLA_DTYPE_FP8_E4M3FN, layout, 0};
    mla_indexer_cache_block_bytes(&p.desc, &p.block_bytes);
    p.cache_bytes = (size_t)(p.blocks * p.block_bytes);
    uint8_t *cache = malloc(p.cache_bytes), *q = malloc((size_t)(p.R * Hi * D));
    float *w = malloc((size_t)(p.R * Hi) * 4);
    int32_t *table = malloc((size_t)(B * p.mb) * 4), cl[B];
    float *out[2] = {malloc((size_t)(p.R * p.maxl) * 4), malloc((size_t)(p.R * p.maxl) * 4)};
    if (!cache || !q || !w || !table || !out[0] || !out[1])
        return 1;
    for (int64_t b = 0; b < p.blocks; ++b) {
        uint8_t *blk = cache + b * p.block_bytes;
        for (int i = 0; i < bs * D; ++i)
            blk[i] = code(fnuz);
        for (int t = 0; t < bs; ++t) {
            const float s = (float)(rnd() % 1000 + 1) / 4096.0f;
            memcpy(blk + bs * D + 4 * t, &s, 4);
        }
    }
    for (int64_t i = 0; i < p.R * Hi * D; ++i)
        q[i] = code(fnuz);
    for (int64_t i = 0; i < p.R * Hi; ++i)
        w[i] = (float)((int)(rnd() % 2001) - 1000) / 512.0f;
    for (int64_t i = 0; i < B * p.mb; ++i) /* scattered */
        table[i] = (int32_t)((i * 11 + 3) % p.blocks);
    for (int b = 0; b < B; ++b)
        cl[b] = lens[b] + next_n - 1;
    if (nan_k) /* a NaN code in some key of sequence 0's block holding position 3000 */
        cache[(int64_t)table[3000 / bs] * p.block_bytes + (3000 % bs) * D + 5] =
            fnuz ? 0x80 : 0xFF;
    if (nan_q) /* in one head of row 1 */
        q[(1 * Hi + Hi / 2) * D + 17] = fnuz ? 0x80 : 0x7F;
    p.cache = cache;
    p.q = q;
    p.w = w;
    p.table = table;
    p.lens = cl;
    int fail = logits_on(hip, &p, out[0]) || logits_on(ref, &p, out[1]);
    int64_t bad = 0, nans = 0;
    for (int64_t r = 0; !fail && r < p.R; ++r) {
        double top = 0.0;
        for (int64_t n = 0; n < p.maxl; ++n) {
            const float v = out[1][r * p.maxl + n];
            top = isfinite(v) && fabs(v) > top ? fabs(v) : top;
        }
        for (int64_t n = 0; n < p.maxl; ++n) {
            const float a = out[0][r * p.maxl + n], e = out[1][r * p.maxl + n];
            const int ok = (isnan(a) && isnan(e)) || (isinf(e) && a == e) ||
                           (isfinite(a) && isfinite(e) && fabs(a - e) <= 1e-5 * top);
            nans += isnan(e);
            if (!ok && bad++ < 5)
                printf("  row %lld key %lld: hip %.9g, reference %.9g\n", (long long)r,
                       (long long)n, a, e);
        }
    }
    printf("bs %2d %s %-8s next_n %d Hi %d nan_q %d nan_k %d: %s (%lld wrong, %lld NaN)\n", bs,
           layout == MLA_INDEXER_SHUFFLE ? "SHUFFLE" : "NORMAL ", fnuz ? "e4m3fnuz" : "e4m3fn",
           next_n, Hi, nan_q, nan_k, fail ? "FAILED" : bad ? "WRONG" : "ok", (long long)bad,
           (long long)nans);
    free(cache);
    free(q);
    free(w);
    free(table);
    free(out[0]);
    free(out[1]);
    return fail || bad;
}

int main(void)
{
    if (mla_context_create(MLA_BACKEND_HIP, NULL, &hip) != MLA_OK ||
        mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ref) != MLA_OK) {
        printf("no HIP context\n");
        return 1;
    }
    printf("%s\n", mla_context_device_name(hip));
    int f = 0;
    f |= run(64, MLA_INDEXER_SHUFFLE, 0, 1, 64, 0, 1);
    f |= run(64, MLA_INDEXER_NORMAL, 0, 2, 64, 1, 0);
    f |= run(64, MLA_INDEXER_SHUFFLE, 1, 1, 64, 1, 1);
    f |= run(64, MLA_INDEXER_SHUFFLE, 0, 1, 40, 0, 0);
    f |= run(48, MLA_INDEXER_SHUFFLE, 0, 2, 64, 0, 1);
    f |= run(7, MLA_INDEXER_NORMAL, 0, 1, 64, 0, 0);
    f |= run(1, MLA_INDEXER_NORMAL, 0, 1, 64, 0, 1);
    printf(f ? "FAILED\n" : "all ok\n");
    mla_context_destroy(hip);
    mla_context_destroy(ref);
    return f;
}
