/* Sizes that do not fit (issue 18, section 2 and its family): stride-0
 * broadcast views whose extents describe more elements than memory holds,
 * over a small real buffer, as the fuzzer built them. Each call must give a
 * specific status naming the parameter (MLA_ERR_OVERFLOW for sizes), or
 * run correctly where the view is legal and the work small, allocate
 * nothing past what fits, and leave every byte around (and, when refused,
 * of) each output as it was. Runs on the reference and CPU backends; the
 * ASan + UBSan preset makes any wrap, heap overflow or NULL arithmetic a
 * failure. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conformance/npy.h"
#include "mla/mla.h"
#include "tests/test_guard.h"
#include "tests/test_util.h"

#define BIG ((int64_t)1 << 61)

static const char *backend_name;

/* status and parameter as expected */
static void expect(mla_context *ctx, mla_status got, mla_status want, const char *param,
                   const char *what)
{
    const char *p = mla_context_error_param(ctx);
    const int ok = got == want && (!param || strcmp(p, param) == 0);
    CHECK(ok);
    if (!ok)
        fprintf(stderr, "  %s (%s): got %s '%s', expected %s '%s'\n", what, backend_name,
                mla_status_name(got), p, mla_status_name(want), param ? param : "");
}

static float ones[64];
static int64_t zeros64[8];
static int32_t zeros32[8];

/* mla_cache_write: 2^61 + 1 slots (n * 8 bytes wrapped to 8). */
static void cache_write_slots(mla_context *ctx)
{
    const int64_t L = 2, R = 2, n = BIG + 1; /* [n, L] still has fewer than 2^63 elements */
    mla_cache_desc cd = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, 2, 16, L, R, 1.0f};
    int64_t bb = 0;
    CHECK_STATUS(mla_cache_block_bytes(&cd, &bb), MLA_OK);
    guarded gc;
    mla_tensor cache = guard_view(guard_alloc(&gc, (size_t)(2 * bb)), MLA_DTYPE_U8, 2,
                                  (int64_t[]){2, bb}, (int64_t[]){bb, 1});
    mla_tensor kn = guard_view(ones, MLA_DTYPE_F32, 2, (int64_t[]){n, L}, (int64_t[]){0, 1});
    mla_tensor kp = guard_view(ones, MLA_DTYPE_F32, 2, (int64_t[]){n, R}, (int64_t[]){0, 1});
    mla_tensor s64 = guard_view(zeros64, MLA_DTYPE_I64, 1, (int64_t[]){n}, (int64_t[]){0});
    mla_tensor s32 = guard_view(zeros32, MLA_DTYPE_I32, 1, (int64_t[]){n}, (int64_t[]){0});
    expect(ctx, mla_cache_write(ctx, &cd, &cache, &kn, &kp, &s64), MLA_ERR_OVERFLOW, "slots",
           "cache_write I64 slots");
    expect(ctx, mla_cache_write(ctx, &cd, &cache, &kn, &kp, &s32), MLA_ERR_OVERFLOW, "slots",
           "cache_write I32 slots");
    CHECK(guard_untouched(&gc));
    /* the same read in the indexer K cache write */
    mla_indexer_cache_desc id = {2, 1, 1, MLA_DTYPE_FP8_E4M3FN, MLA_INDEXER_LAYOUT_AUTO, 0};
    CHECK_STATUS(mla_indexer_cache_block_bytes(&id, &bb), MLA_OK);
    guarded gi;
    mla_tensor icache = guard_view(guard_alloc(&gi, (size_t)(2 * bb)), MLA_DTYPE_U8, 2,
                                   (int64_t[]){2, bb}, (int64_t[]){bb, 1});
    mla_tensor k = guard_view(ones, MLA_DTYPE_F32, 2, (int64_t[]){n, 1}, (int64_t[]){0, 1});
    expect(ctx, mla_indexer_k_cache_write(ctx, &id, &icache, &k, &s64), MLA_ERR_OVERFLOW, "slots",
           "indexer_k_cache_write slots");
    CHECK(guard_untouched(&gi));
    guard_free(&gc);
    guard_free(&gi);
}

/* mla_topk on logits [1, 2^61 + 1] (the scratch was sized by the row). */
static void topk_broadcast_row(mla_context *ctx)
{
    const int64_t N = BIG + 1;
    mla_tensor logits = guard_view(ones, MLA_DTYPE_F32, 2, (int64_t[]){2, N}, (int64_t[]){0, 0});
    int32_t lens_v[2] = {5, 0};
    mla_tensor lens = guard_view(lens_v, MLA_DTYPE_I32, 1, (int64_t[]){2}, (int64_t[]){1});
    guarded gi;
    int32_t *idx = guard_alloc(&gi, 2 * 3 * 4);
    mla_tensor indices = guard_view(idx, MLA_DTYPE_I32, 2, (int64_t[]){2, 3}, (int64_t[]){3, 1});
    expect(ctx, mla_topk(ctx, &logits, &lens, 3, &indices), MLA_OK, NULL, "topk broadcast row");
    /* equal values: ties to the lower index; an empty row is all -1 */
    CHECK(idx[0] == 0 && idx[1] == 1 && idx[2] == 2);
    CHECK(idx[3] == -1 && idx[4] == -1 && idx[5] == -1);
    CHECK(guard_intact(&gi));
    guard_free(&gi);
}

/* mla_cache_gather with block_size INT64_MAX - 5 over 0 blocks: the block
 * id check used (len + block_size - 1) and was skipped. */
static void gather_huge_block(mla_context *ctx)
{
    mla_cache_desc cd = {MLA_CACHE_NORMAL, MLA_DTYPE_FP8_E4M3FN, 0, INT64_MAX - 5, 1, 0, 1.0f};
    int64_t bb = 0;
    CHECK_STATUS(mla_cache_block_bytes(&cd, &bb), MLA_OK);
    mla_tensor cache = guard_view(NULL, MLA_DTYPE_U8, 2, (int64_t[]){0, bb}, (int64_t[]){bb, 1});
    int32_t table_v[1] = {0}, lens_v[1] = {1};
    mla_tensor table = guard_view(table_v, MLA_DTYPE_I32, 2, (int64_t[]){1, 1}, (int64_t[]){1, 1});
    mla_tensor lens = guard_view(lens_v, MLA_DTYPE_I32, 1, (int64_t[]){1}, (int64_t[]){1});
    guarded go;
    mla_tensor out =
        guard_view(guard_alloc(&go, 4), MLA_DTYPE_F32, 2, (int64_t[]){1, 1}, (int64_t[]){1, 1});
    expect(ctx, mla_cache_gather(ctx, &cd, &cache, &table, &lens, &out), MLA_ERR_OUT_OF_RANGE,
           "block_table", "cache_gather block_size INT64_MAX - 5");
    CHECK(guard_untouched(&go));
    /* a table of 2^62 columns: its capacity passes int64, so it bounds nothing */
    mla_tensor wide =
        guard_view(table_v, MLA_DTYPE_I32, 2, (int64_t[]){1, (int64_t)1 << 62}, (int64_t[]){0, 0});
    cd.block_size = 16;
    CHECK_STATUS(mla_cache_block_bytes(&cd, &bb), MLA_OK);
    cache.shape[1] = cache.stride[0] = bb;
    expect(ctx, mla_cache_gather(ctx, &cd, &cache, &wide, &lens, &out), MLA_ERR_OVERFLOW,
           "block_table", "cache_gather 2^62-column table");
    CHECK(guard_untouched(&go));
    guard_free(&go);
}

/* mla_rope with cos/sin [1, 2^62]: R = 2 * 2^62 wrapped to INT64_MIN. */
static void rope_huge_table(mla_context *ctx)
{
    mla_tensor cs =
        guard_view(ones, MLA_DTYPE_F32, 2, (int64_t[]){1, (int64_t)1 << 62}, (int64_t[]){0, 0});
    int32_t pos_v[2] = {0, 0};
    mla_tensor pos = guard_view(pos_v, MLA_DTYPE_I32, 1, (int64_t[]){2}, (int64_t[]){1});
    mla_tensor x = guard_view(ones, MLA_DTYPE_F32, 2, (int64_t[]){2, 8}, (int64_t[]){8, 1});
    guarded gy;
    mla_tensor y = guard_view(guard_alloc(&gy, 2 * 8 * 4), MLA_DTYPE_F32, 2, (int64_t[]){2, 8},
                              (int64_t[]){8, 1});
    expect(ctx, mla_rope(ctx, &cs, &cs, &pos, &x, &y, MLA_ROPE_NEOX), MLA_ERR_OVERFLOW,
           "cos.shape[1]", "rope cos [1, 2^62]");
    /* 2^61 pairs: R = 2^62 fits, and is larger than the row */
    cs.shape[1] = BIG;
    expect(ctx, mla_rope(ctx, &cs, &cs, &pos, &x, &y, MLA_ROPE_NEOX), MLA_ERR_SHAPE, "x.shape",
           "rope cos [1, 2^61]");
    CHECK(guard_untouched(&gy));
    /* 2^61 + 1 rows of 8: more elements than int64 counts */
    mla_tensor xb = guard_view(ones, MLA_DTYPE_F32, 2, (int64_t[]){BIG + 1, 8}, (int64_t[]){0, 1});
    mla_tensor yb =
        guard_view(guard_data(&gy), MLA_DTYPE_F32, 2, (int64_t[]){BIG + 1, 8}, (int64_t[]){8, 1});
    cs.shape[1] = 4;
    expect(ctx, mla_rope(ctx, &cs, &cs, &pos, &xb, &yb, MLA_ROPE_NEOX), MLA_ERR_OVERFLOW, "x.shape",
           "rope 2^61 + 1 rows");
    CHECK(guard_untouched(&gy));
    guard_free(&gy);
}

/* Sizes derived at the entry: 2 * a packed extent, ceil(N / 128), the
 * descriptors' per-token bytes. */
static void entry_sizes(mla_context *ctx)
{
    guarded gy;
    void *yd = guard_alloc(&gy, 64);
    uint8_t codes[4] = {0x21, 0x43, 0x65, 0x87};
    mla_tensor x =
        guard_view(codes, MLA_DTYPE_FP4X2, 1, (int64_t[]){(int64_t)1 << 62}, (int64_t[]){0});
    mla_tensor y = guard_view(yd, MLA_DTYPE_F32, 1, (int64_t[]){8}, (int64_t[]){1});
    expect(ctx, mla_convert(ctx, &x, &y, MLA_SATURATE), MLA_ERR_OVERFLOW, "x.shape",
           "convert fp4x2 [2^62] to f32");
    CHECK(guard_untouched(&gy));

    /* fp8 linear with N = INT64_MAX rows of W: ceil(N / 128) without N + 127 */
    mla_tensor xl = guard_view(ones, MLA_DTYPE_F32, 2, (int64_t[]){1, 1}, (int64_t[]){1, 1});
    mla_tensor w =
        guard_view(codes, MLA_DTYPE_FP8_E4M3FN, 2, (int64_t[]){INT64_MAX, 1}, (int64_t[]){0, 1});
    mla_tensor ws =
        guard_view(ones, MLA_DTYPE_F32, 2, (int64_t[]){INT64_MAX / 128 + 1, 1}, (int64_t[]){0, 0});
    mla_tensor yl = guard_view(yd, MLA_DTYPE_F32, 2, (int64_t[]){1, INT64_MAX}, (int64_t[]){1, 1});
    expect(ctx, mla_linear(ctx, &xl, &w, &ws, &yl), MLA_ERR_OVERFLOW, "y.stride",
           "linear fp8 N = INT64_MAX");
    CHECK(guard_untouched(&gy));

    int64_t bb = 0;
    mla_cache_desc cd = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, 1, 1, INT64_MAX - 1, 2, 1.0f};
    CHECK_STATUS(mla_cache_block_bytes(&cd, &bb), MLA_ERR_OVERFLOW);
    cd.layout = MLA_CACHE_FP8_SCALED, cd.dtype = MLA_DTYPE_FP8_E4M3FN;
    cd.kv_lora = INT64_MAX / 128 * 128;
    CHECK_STATUS(mla_cache_block_bytes(&cd, &bb), MLA_ERR_OVERFLOW);
    mla_indexer_cache_desc id = {1, 1, INT64_MAX, MLA_DTYPE_FP8_E4M3FN, MLA_INDEXER_NORMAL, 0};
    CHECK_STATUS(mla_indexer_cache_block_bytes(&id, &bb), MLA_ERR_OVERFLOW);
    guard_free(&gy);
}

/* Index tensors of 2^61 entries and more in the indexer and attention. */
static void index_counts(mla_context *ctx)
{
    mla_indexer_cache_desc id = {1, 16, 16, MLA_DTYPE_FP8_E4M3FN, MLA_INDEXER_LAYOUT_AUTO, 0};
    int64_t bb = 0;
    CHECK_STATUS(mla_indexer_cache_block_bytes(&id, &bb), MLA_OK);
    static uint8_t cache_v[16 * 20];
    mla_tensor cache = guard_view(cache_v, MLA_DTYPE_U8, 2, (int64_t[]){1, bb}, (int64_t[]){bb, 1});
    int32_t cu_v[2] = {0, 1};
    mla_tensor cu = guard_view(cu_v, MLA_DTYPE_I32, 1, (int64_t[]){2}, (int64_t[]){1});
    mla_tensor table =
        guard_view(zeros32, MLA_DTYPE_I32, 2, (int64_t[]){1, INT64_MAX}, (int64_t[]){0, 0});
    guarded gk, gs;
    mla_tensor kf = guard_view(guard_alloc(&gk, 16), MLA_DTYPE_FP8_E4M3FN, 2, (int64_t[]){1, 16},
                               (int64_t[]){16, 1});
    mla_tensor ks =
        guard_view(guard_alloc(&gs, 4), MLA_DTYPE_F32, 1, (int64_t[]){1}, (int64_t[]){1});
    expect(ctx, mla_indexer_k_gather(ctx, &id, &cache, &table, &cu, &kf, &ks), MLA_ERR_OVERFLOW,
           "block_table", "indexer_k_gather INT64_MAX-column table");
    /* a length past the table's capacity is cu_seq_lens' fault */
    table.shape[1] = 1;
    cu_v[1] = 17;
    kf.shape[0] = ks.shape[0] = 17;
    expect(ctx, mla_indexer_k_gather(ctx, &id, &cache, &table, &cu, &kf, &ks), MLA_ERR_OUT_OF_RANGE,
           "cu_seq_lens", "indexer_k_gather length past the table");
    cu_v[0] = 3, cu_v[1] = 3;
    expect(ctx, mla_indexer_k_gather(ctx, &id, &cache, &table, &cu, &kf, &ks), MLA_ERR_OUT_OF_RANGE,
           "cu_seq_lens", "indexer_k_gather cu_seq_lens[0] != 0");
    CHECK(guard_untouched(&gk) && guard_untouched(&gs));
    guard_free(&gk);
    guard_free(&gs);

    /* the logits' rows B * next_n */
    mla_tensor cl =
        guard_view(zeros32, MLA_DTYPE_I32, 1, (int64_t[]){(int64_t)1 << 62}, (int64_t[]){0});
    mla_tensor q =
        guard_view(cache_v, MLA_DTYPE_FP8_E4M3FN, 3, (int64_t[]){1, 1, 16}, (int64_t[]){16, 16, 1});
    mla_tensor w = guard_view(ones, MLA_DTYPE_F32, 2, (int64_t[]){1, 1}, (int64_t[]){1, 1});
    guarded gl;
    mla_tensor lg =
        guard_view(guard_alloc(&gl, 16), MLA_DTYPE_F32, 2, (int64_t[]){1, 4}, (int64_t[]){4, 1});
    expect(ctx, mla_indexer_logits(ctx, &id, &cache, &q, &w, &table, &cl, 4, &lg), MLA_ERR_OVERFLOW,
           "context_lens.shape[0]", "indexer_logits 2^62 x 4 rows");
    CHECK(guard_untouched(&gl));
    guard_free(&gl);

    /* attention: 2^61 sequences (the work list S * splits), 2^62 x next_n rows */
    mla_model_config cfg;
    CHECK_STATUS(mla_model_config_preset("test-tiny", &cfg), MLA_OK);
    mla_cache_desc cd = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, 1, 16, cfg.kv_lora, cfg.rope, 1.0f};
    CHECK_STATUS(mla_cache_block_bytes(&cd, &bb), MLA_OK);
    mla_attention_desc desc;
    CHECK_STATUS(mla_attention_desc_default(&cfg, &cd, &desc), MLA_OK);
    static uint8_t acache[16 * 144 * 2];
    mla_tensor at_cache =
        guard_view(acache, MLA_DTYPE_U8, 2, (int64_t[]){1, bb}, (int64_t[]){bb, 1});
    const int64_t H = cfg.heads, L = cfg.kv_lora, D = cfg.kv_lora + cfg.rope;
    mla_tensor aq =
        guard_view(NULL, MLA_DTYPE_BF16, 3, (int64_t[]){0, H, D}, (int64_t[]){H * D, D, 1});
    mla_tensor ao =
        guard_view(NULL, MLA_DTYPE_F32, 3, (int64_t[]){0, H, L}, (int64_t[]){H * L, L, 1});
    mla_tensor lens = guard_view(zeros32, MLA_DTYPE_I32, 1, (int64_t[]){BIG}, (int64_t[]){0});
    mla_tensor tab = guard_view(zeros32, MLA_DTYPE_I32, 2, (int64_t[]){BIG, 1}, (int64_t[]){0, 0});
    mla_tensor cuq = guard_view(zeros32, MLA_DTYPE_I32, 1, (int64_t[]){BIG + 1}, (int64_t[]){0});
    mla_attention_args args = {&aq,  &at_cache, &tab, &lens, &cuq, NULL,
                               NULL, NULL,      &ao,  NULL,  NULL};
    mla_attention_plan *plan = NULL;
    expect(ctx, mla_attention_plan_create(ctx, &desc, &args, &plan), MLA_ERR_OVERFLOW,
           "context_lens.shape[0]", "attention plan of 2^61 sequences");
    CHECK(plan == NULL);
    lens.shape[0] = tab.shape[0] = (int64_t)1 << 62;
    args.cu_q_lens = NULL;
    desc.next_n = 4;
    expect(ctx, mla_attention_plan_create(ctx, &desc, &args, &plan), MLA_ERR_OVERFLOW,
           "context_lens.shape[0]", "attention 2^62 sequences of next_n 4");
    CHECK(plan == NULL);
}

/* Empty operands: K = 0 GEMMs read no operand (data NULL), and write
 * fl(+0 * w_scale) like the reference. */
static void empty_sums(mla_context *ctx, mla_context *ref)
{
    mla_tensor x = guard_view(NULL, MLA_DTYPE_BF16, 3, (int64_t[]){2, 3, 0}, (int64_t[]){0, 0, 1});
    mla_tensor w = guard_view(NULL, MLA_DTYPE_BF16, 3, (int64_t[]){2, 0, 5}, (int64_t[]){0, 5, 1});
    for (int neg = 0; neg < 2; ++neg) {
        guarded g[2];
        for (int i = 0; i < 2; ++i) {
            mla_tensor y = guard_view(guard_alloc(&g[i], 2 * 3 * 5 * 4), MLA_DTYPE_F32, 3,
                                      (int64_t[]){2, 3, 5}, (int64_t[]){15, 5, 1});
            expect(i ? ref : ctx, mla_batched_gemm(i ? ref : ctx, &x, &w, neg ? -1.0f : 1.0f, &y),
                   MLA_OK, NULL, "batched_gemm K = 0");
            CHECK(guard_intact(&g[i]));
        }
        const float *a = guard_data(&g[0]), *b = guard_data(&g[1]);
        CHECK(memcmp(a, b, 2 * 3 * 5 * 4) == 0 && a[0] == 0.0f && !signbit(a[0]) == !neg);
        guard_free(&g[0]);
        guard_free(&g[1]);
    }
}

/* The CPU's scratch for a broadcast reduction dim K = 2^61 (x and W
 * stride 0): M K floats do not fit. (The reference keeps no scratch: its
 * loop of 2^62 products is merely long.) */
static void cpu_broadcast_k(mla_context *ctx)
{
    const int64_t K = BIG;
    uint16_t one = 0x3F80;
    guarded gy;
    mla_tensor x = guard_view(&one, MLA_DTYPE_BF16, 3, (int64_t[]){1, 2, K}, (int64_t[]){0, 0, 0});
    mla_tensor w = guard_view(&one, MLA_DTYPE_BF16, 3, (int64_t[]){1, K, 3}, (int64_t[]){0, 0, 0});
    mla_tensor y = guard_view(guard_alloc(&gy, 2 * 3 * 4), MLA_DTYPE_F32, 3, (int64_t[]){1, 2, 3},
                              (int64_t[]){6, 3, 1});
    expect(ctx, mla_batched_gemm(ctx, &x, &w, 1.0f, &y), MLA_ERR_OVERFLOW, "x",
           "cpu batched_gemm K = 2^61");
    mla_tensor x2 = guard_view(&one, MLA_DTYPE_BF16, 2, (int64_t[]){2, K}, (int64_t[]){0, 0});
    mla_tensor w2 = guard_view(&one, MLA_DTYPE_BF16, 2, (int64_t[]){3, K}, (int64_t[]){0, 0});
    mla_tensor y2 =
        guard_view(guard_data(&gy), MLA_DTYPE_F32, 2, (int64_t[]){2, 3}, (int64_t[]){3, 1});
    expect(ctx, mla_linear(ctx, &x2, &w2, NULL, &y2), MLA_ERR_OVERFLOW, "x", "cpu linear K = 2^61");
    CHECK(guard_untouched(&gy));
    guard_free(&gy);
}

/* The layer workspace query names what it refuses. */
static void layer_workspace_query(mla_context *ctx)
{
    mla_model_config cfg;
    CHECK_STATUS(mla_model_config_preset("test-tiny", &cfg), MLA_OK);
    mla_plan *plan = NULL;
    CHECK_STATUS(mla_plan_create(&cfg, NULL, &plan), MLA_OK);
    mla_cache_desc cd = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, 4, 16, cfg.kv_lora, cfg.rope, 1.0f};
    mla_layer_options opt;
    mla_layer_options_default(&cfg, &cd, &opt);
    int64_t bytes = -7;
    expect(ctx, mla_layer_workspace_bytes(ctx, plan, &opt, -1, 1, 64, &bytes), MLA_ERR_SHAPE, "T",
           "layer workspace T = -1");
    expect(ctx, mla_layer_workspace_bytes(ctx, plan, &opt, 4, -1, 64, &bytes), MLA_ERR_SHAPE, "S",
           "layer workspace S = -1");
    expect(ctx, mla_layer_workspace_bytes(ctx, plan, &opt, 4, 1, -1, &bytes), MLA_ERR_SHAPE,
           "max_context", "layer workspace max_context = -1");
    expect(ctx, mla_layer_workspace_bytes(ctx, plan, &opt, (int64_t)1 << 30, 1, 64, &bytes),
           MLA_ERR_OVERFLOW, "T", "layer workspace T = 2^30");
    expect(ctx, mla_layer_workspace_bytes(ctx, plan, &opt, 4, 1, INT64_MAX, &bytes),
           MLA_ERR_OVERFLOW, "max_context", "layer workspace max_context = INT64_MAX");
    opt.act = MLA_DTYPE_F16;
    expect(ctx, mla_layer_workspace_bytes(ctx, plan, &opt, 4, 1, 64, &bytes), MLA_ERR_DTYPE,
           "opt.act", "layer workspace act F16");
    CHECK(bytes == -7);
    opt.act = MLA_DTYPE_BF16;
    expect(ctx, mla_layer_workspace_bytes(ctx, plan, &opt, 4, 1, 64, &bytes), MLA_OK, NULL,
           "layer workspace");
    CHECK(bytes > 0);
    CHECK_STATUS(mla_prepare_workspace_bytes(plan, -1, MLA_DTYPE_BF16, &bytes), MLA_ERR_SHAPE);
    mla_model_config icfg;
    CHECK_STATUS(mla_model_config_preset("test-tiny-indexer", &icfg), MLA_OK);
    CHECK_STATUS(mla_indexer_workspace_bytes(&icfg, -1, &bytes), MLA_ERR_SHAPE);
    /* widths past int64 are the config's: refused when planned */
    mla_plan *big = NULL;
    cfg.v = INT64_MAX / 4;
    CHECK_STATUS(mla_plan_create(&cfg, NULL, &big), MLA_ERR_OVERFLOW);
    CHECK(big == NULL);
    mla_plan_destroy(plan);
}

/* An empty .npy: no pointer arithmetic on the NULL data. */
static void empty_npy(void)
{
    const char *path = "test_overflow_empty.npy";
    CHECK_STATUS(mla_npy_save(path, MLA_NPY_F4, 2, (int64_t[]){0, 3}, NULL, NULL, 0), MLA_OK);
    mla_npy a;
    CHECK_STATUS(mla_npy_load(path, &a, NULL, 0), MLA_OK);
    CHECK(a.numel == 0 && a.nbytes == 0 && a.data == NULL);
    mla_npy_free(&a);
    remove(path);
}

int main(void)
{
    for (int i = 0; i < 64; ++i)
        ones[i] = 1.0f;
    mla_context *ref = NULL;
    CHECK_STATUS(mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ref), MLA_OK);
    const mla_backend backends[2] = {MLA_BACKEND_REFERENCE, MLA_BACKEND_CPU};
    for (int b = 0; b < 2; ++b) {
        mla_context *ctx = NULL;
        CHECK_STATUS(mla_context_create(backends[b], NULL, &ctx), MLA_OK);
        if (!ctx)
            continue;
        backend_name = b ? "cpu" : "reference";
        cache_write_slots(ctx);
        topk_broadcast_row(ctx);
        gather_huge_block(ctx);
        rope_huge_table(ctx);
        entry_sizes(ctx);
        index_counts(ctx);
        empty_sums(ctx, ref);
        if (b == 1)
            cpu_broadcast_k(ctx);
        layer_workspace_query(ctx);
        mla_context_destroy(ctx);
    }
    mla_context_destroy(ref);
    empty_npy();
    return TEST_SUMMARY();
}
