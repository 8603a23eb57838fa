/* The attention plan (core/attention_plan.h, core/attention_planner.c):
 * split counts against the compute units (a batch that fills the machine
 * is not split; few long sequences are split into chunks of 64 keys, about
 * two items per unit; forced counts leave empty items; sparse splits top-k
 * columns), the work list covering every key once, the split capacity fixed
 * at create and kept by updates; and the device-memory paths of the entry
 * points through a host table that calls its memory "device": the plan
 * stages the index tensors and copies the work list, the run copies and
 * allocates nothing, an update rewrites the same buffers. */
#include "core/attention_plan.h"
#include "core/attention_planner.h"
#include "tests/attention_fixture.h"

enum { PBS = 64, PNB = 16, PMB = 8 }; /* capacity 512 keys per sequence */

typedef struct pfix {
    mla_attention_desc desc;
    uint8_t *cache;
    int32_t table[S * PMB], lens[S], topk[S * 96];
    float q[S * 2 * D], o[S * 2 * L];
    mla_tensor t_cache, t_q, t_table, t_lens, t_topk, t_o;
    mla_attention_args args;
} pfix;

/* S decode rows (next_n 1) over a 64-token-block bf16 cache; no run. */
static void pfix_init(pfix *f, const int32_t *lens)
{
    memset(f, 0, sizeof *f);
    mla_cache_desc cd = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, PNB, PBS, L, R, 1.0f};
    int64_t bb = 0;
    mla_cache_block_bytes(&cd, &bb);
    f->cache = calloc((size_t)(PNB * bb), 1);
    mla_model_config cfg;
    mla_model_config_preset("test-tiny", &cfg);
    mla_attention_desc_default(&cfg, &cd, &f->desc);
    f->desc.q_dtype = MLA_DTYPE_F32;
    for (int s = 0; s < S; ++s) {
        f->lens[s] = lens[s];
        for (int b = 0; b < PMB; ++b)
            f->table[s * PMB + b] = (s * PMB + b) % PNB;
    }
    f->desc.heads = 2;
    f->t_cache = view(f->cache, MLA_DTYPE_U8, 2, (int64_t[]){PNB, bb});
    f->t_q = view(f->q, MLA_DTYPE_F32, 3, (int64_t[]){S, 2, D});
    f->t_table = view(f->table, MLA_DTYPE_I32, 2, (int64_t[]){S, PMB});
    f->t_lens = view(f->lens, MLA_DTYPE_I32, 1, (int64_t[]){S});
    f->t_o = view(f->o, MLA_DTYPE_F32, 3, (int64_t[]){S, 2, L});
    f->args = (mla_attention_args){&f->t_q, &f->t_cache, &f->t_table, &f->t_lens, NULL, NULL,
                                   NULL,    NULL,        &f->t_o,     NULL,       NULL};
}

/* The work list covers keys (or columns) 0 .. len[s]-1 of every sequence
 * once, in order, in chunks of multiples of 64 (the last may be shorter),
 * with empty items only at the end of a forced split; returns the largest
 * split count. */
static int32_t check_work(const mla_attention_plan *p, const int64_t *len)
{
    int64_t w = 0;
    int32_t largest = 0;
    for (int64_t s = 0; s < p->S; ++s) {
        const int32_t n = p->splits_host[s];
        CHECK(n <= p->max_splits);
        CHECK((len[s] == 0) == (n == 0));
        int64_t next = 0;
        for (int32_t i = 0; i < n; ++i, ++w) {
            const mla_attention_work *it = &p->work_host[w];
            CHECK(it->seq == s && it->split == i && it->kv_begin == next);
            CHECK(it->kv_end >= it->kv_begin && it->kv_end <= len[s]);
            if (it->kv_end < len[s])
                CHECK((it->kv_end - it->kv_begin) % 64 == 0 && it->kv_end > it->kv_begin);
            next = it->kv_end;
        }
        CHECK(next == len[s]);
        largest = n > largest ? n : largest;
    }
    CHECK(w == p->num_work && w <= p->work_capacity);
    return largest;
}

/* Entries num_work .. work_capacity-1 carry the unused marker (kernels
 * launched for the capacity skip them), in the host and the device copy. */
static void check_unused(const mla_attention_plan *p)
{
    CHECK(p->num_work <= p->work_capacity);
    for (int64_t w = p->num_work; w < p->work_capacity; ++w) {
        CHECK(p->work_host[w].seq == MLA_ATTN_WORK_UNUSED);
        CHECK(p->work_dev[w].seq == MLA_ATTN_WORK_UNUSED);
    }
    for (int64_t w = 0; w < p->num_work; ++w)
        CHECK(p->work_host[w].seq >= 0 && p->work_host[w].seq < p->S);
}

static void test_planner(mla_context *ctx)
{
    const int32_t lens[S] = {300, 0, 100}, short_lens[S] = {70, 0, 10};
    const int64_t len[S] = {300, 0, 100}, short_len[S] = {70, 0, 10};
    pfix f;
    pfix_init(&f, lens);
    mla_attention_plan *p = NULL;

    /* the host's shortest chunk (MLA_HOST_MIN_CHUNK keys) splits neither */
    CHECK(ctx->min_split_keys == MLA_HOST_MIN_CHUNK && MLA_HOST_MIN_CHUNK >= 300);
    ctx->compute_units = 8;
    CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, &f.args, &p), MLA_OK);
    CHECK(check_work(p, len) == 1 && p->max_splits == 1 && p->part_o_offset == -1);
    mla_attention_plan_destroy(p);

    /* the rest at a GPU's 64 keys, where these lengths split */
    ctx->min_split_keys = MLA_ATTN_CHUNK;

    /* 8 units, 2 busy sequences: split 300 keys into 5 chunks of 64, 100 into 2 */
    ctx->compute_units = 8;
    CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, &f.args, &p), MLA_OK);
    CHECK(check_work(p, len) == 5);
    CHECK(p->splits_host[0] == 5 && p->splits_host[2] == 2 && p->max_splits == 5);
    CHECK(mla_attention_plan_splits(p) == 5);
    CHECK(p->part_o_offset >= 0 && p->part_lse_offset > p->part_o_offset &&
          p->part_o_offset % 256 == 0 && p->part_lse_offset % 256 == 0);
    CHECK(p->workspace_bytes >= p->part_lse_offset + p->T * 2 * 5 * 4);
    mla_attention_plan_destroy(p);

    /* as many units as busy sequences: nothing split, no partial buffers */
    ctx->compute_units = 2;
    CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, &f.args, &p), MLA_OK);
    CHECK(check_work(p, len) == 1 && p->max_splits == 1 && p->part_o_offset == -1);
    CHECK(mla_attention_plan_workspace_bytes(p) == 0);
    mla_attention_plan_destroy(p);

    /* 128 heads: two row tiles of 64 (query row, head) pairs per decode
     * row, so the 2 busy sequences are 4 records, which fill 4 units
     * without a split; on 8 units the 8 records' worth is shared by length
     * (floor(16 len_s / 800): 6 and 2 items; 300 keys make at most 5) */
    {
        float *q128 = calloc((size_t)S * 128 * D, sizeof *q128),
              *o128 = calloc((size_t)S * 128 * L, sizeof *o128);
        mla_tensor tq = view(q128, MLA_DTYPE_F32, 3, (int64_t[]){S, 128, D}),
                   to = view(o128, MLA_DTYPE_F32, 3, (int64_t[]){S, 128, L});
        mla_attention_args a128 = f.args;
        a128.q = &tq;
        a128.o = &to;
        f.desc.heads = 128;
        ctx->compute_units = 4;
        CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, &a128, &p), MLA_OK);
        CHECK(check_work(p, len) == 1 && p->max_splits == 1 && p->part_o_offset == -1);
        mla_attention_plan_destroy(p);
        ctx->compute_units = 8;
        CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, &a128, &p), MLA_OK);
        CHECK(check_work(p, len) == 5 && p->splits_host[0] == 5 && p->splits_host[2] == 2);
        mla_attention_plan_destroy(p);
        f.desc.heads = 2;
        ctx->compute_units = 2;
        free(q128);
        free(o128);
    }

    /* forced 4: chunks of 128 and 64, empty items at the end */
    f.desc.num_splits = 4;
    CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, &f.args, &p), MLA_OK);
    CHECK(check_work(p, len) == 4);
    CHECK(p->work_host[1].kv_begin == 128 && p->work_host[3].kv_begin == 300 &&
          p->work_host[3].kv_end == 300);
    CHECK(p->work_host[6].kv_begin == 100 && p->work_host[7].kv_end == 100);
    mla_attention_plan_destroy(p);

    /* sparse: 96 top-k columns per row, split 64 + 32 */
    f.desc.num_splits = 0;
    f.desc.topk = 96;
    memset(f.topk, 0xFF, sizeof f.topk);
    f.t_topk = view(f.topk, MLA_DTYPE_I32, 2, (int64_t[]){S, 96});
    f.args.topk_indices = &f.t_topk;
    ctx->compute_units = 8;
    CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, &f.args, &p), MLA_OK);
    const int64_t cols[S] = {96, 0, 96};
    CHECK(check_work(p, cols) == 2);
    mla_attention_plan_destroy(p);
    f.desc.topk = 0;
    f.args.topk_indices = NULL;

    /* the capacity is fixed at create: an update to longer lengths keeps 2 */
    memcpy(f.lens, short_lens, sizeof short_lens);
    CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, &f.args, &p), MLA_OK);
    CHECK(check_work(p, short_len) == 2 && p->max_splits == 2);
    const int64_t wb = p->workspace_bytes;
    memcpy(f.lens, lens, sizeof lens);
    CHECK_STATUS(mla_attention_plan_update(ctx, p, &f.args), MLA_OK);
    CHECK(check_work(p, len) == 2 && p->max_splits == 2 && p->workspace_bytes == wb);
    check_unused(p);
    /* what create planned stays the launch size; an update that shrinks
     * the work marks the entries it no longer uses */
    CHECK(p->work_at_create == 3 && p->q_len_at_create == 1);
    const int32_t one[S] = {0, 0, 10};
    const int64_t one_len[S] = {0, 0, 10};
    memcpy(f.lens, one, sizeof one);
    CHECK_STATUS(mla_attention_plan_update(ctx, p, &f.args), MLA_OK);
    CHECK(check_work(p, one_len) == 1 && p->num_work == 1 && p->work_at_create == 3);
    check_unused(p);
    mla_attention_plan_destroy(p);

    /* after create too, forced splits (capacity S * 4) */
    f.desc.num_splits = 4;
    memcpy(f.lens, lens, sizeof lens);
    CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, &f.args, &p), MLA_OK);
    CHECK(p->num_work == 8 && p->work_capacity == 12);
    check_unused(p);
    mla_attention_plan_destroy(p);
    f.desc.num_splits = 0;
    ctx->min_split_keys = MLA_HOST_MIN_CHUNK;
    free(f.cache);
}

/* ---------------------------------------------- device-memory paths */

static int allocs, copies;

static mla_status counting_alloc(mla_context *ctx, size_t bytes, void **out)
{
    ++allocs;
    return mla_host_alloc(ctx, bytes, out);
}

static mla_status counting_copy(mla_context *ctx, void *dst, const void *src, size_t bytes,
                                mla_copy_kind kind)
{
    ++copies;
    return mla_host_copy(ctx, dst, src, bytes, kind);
}

static void relabel(mla_tensor *t) { t->memory = MLA_MEMORY_DEVICE; }

static void test_device_paths(mla_context *host)
{
    mla_backend_ops t = mla_reference_ops;
    t.memory = MLA_MEMORY_DEVICE; /* host memory under another name */
    t.mem_alloc = counting_alloc;
    t.mem_copy = counting_copy;
    mla_context *dev = NULL;
    CHECK_STATUS(mla_context_create_with_ops(&t, NULL, &dev), MLA_OK);
    const int32_t lens[S] = {37, 0, 9}, lens2[S] = {20, 3, 40}, cu[S + 1] = {0, 2, 4, 6};
    fixture f;
    fx_init(&f, host, 3, lens, cu);
    f.desc.num_splits = 4;
    CHECK_STATUS(plan_and_run(host, &f), MLA_OK);
    static float o_host[TMAX * HMAX * L];
    memcpy(o_host, f.o, sizeof o_host);
    mla_tensor *ts[] = {&f.t_q, &f.t_cache, &f.t_table, &f.t_lens, &f.t_cu, &f.t_o, &f.t_lse};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; ++i)
        relabel(ts[i]);

    mla_attention_plan *p = NULL;
    allocs = copies = 0;
    CHECK_STATUS(mla_attention_plan_create(dev, &f.desc, &f.args, &p), MLA_OK);
    CHECK(copies >= 4 && allocs == 3); /* index tensors read back; three twins, filled */
    CHECK(p->work_dev != p->work_host && p->cu_q_dev != p->cu_q_host);
    CHECK(memcmp(p->work_dev, p->work_host, (size_t)p->num_work * sizeof *p->work_host) == 0);
    check_unused(p);
    const int64_t wb = mla_attention_plan_workspace_bytes(p);
    void *ws = NULL;
    mla_malloc(dev, (size_t)wb, &ws);
    mla_tensor tws = view(ws, MLA_DTYPE_U8, 1, (int64_t[]){wb});
    relabel(&tws);
    f.args.workspace = &tws;
    memset(f.o, 0, sizeof f.o);
    allocs = copies = 0;
    CHECK_STATUS(mla_attention_run(dev, p, &f.args), MLA_OK);
    CHECK(allocs == 0 && copies == 0); /* no allocation, no index read */
    CHECK(memcmp(f.o, o_host, (size_t)(f.T * f.H * L) * sizeof(float)) == 0);

    /* update: the same device buffers, rewritten */
    mla_attention_work *work_dev = p->work_dev;
    memcpy(f.lens, lens2, sizeof lens2);
    CHECK_STATUS(mla_attention_plan_update(dev, p, &f.args), MLA_OK);
    CHECK(p->work_dev == work_dev);
    CHECK(memcmp(p->work_dev, p->work_host, (size_t)p->num_work * sizeof *p->work_host) == 0);
    CHECK(p->work_host[0].kv_end == 20);
    check_unused(p);
    CHECK_STATUS(mla_attention_run(dev, p, &f.args), MLA_OK);
    /* an update that shrinks the work (one busy sequence): the device copy
     * marks the entries it no longer uses */
    const int32_t lens3[S] = {5, 0, 0};
    memcpy(f.lens, lens3, sizeof lens3);
    const int64_t before = p->num_work;
    CHECK_STATUS(mla_attention_plan_update(dev, p, &f.args), MLA_OK);
    CHECK(p->num_work < before && p->work_dev == work_dev);
    check_unused(p);
    CHECK_STATUS(mla_attention_run(dev, p, &f.args), MLA_OK);
    f.args.workspace = NULL;
    mla_free(dev, ws);
    mla_attention_plan_destroy(p);
    fx_free(&f);
    mla_context_destroy(dev);
}

int main(void)
{
    mla_context *ref = NULL;
    CHECK_STATUS(mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ref), MLA_OK);
    test_planner(ref);
    test_device_paths(ref);
    mla_context_destroy(ref);
    return TEST_SUMMARY();
}
