/* Every op of `mla op`, round-tripped through .npy files: the test calls
 * the C API with the dump switch on (mla_context_set_dump), on the
 * reference backend and then on the CPU backend, checks that the dumped
 * outputs are the bytes the call returned, then runs `mla op --replay` on
 * both backends: on the dumping one the same bits; on the other each output
 * by the replay's rule (bit-defined ops the same bits, caches by their
 * written slots, the rest against an oracle within the conformance bound),
 * exit 0. Each dumped output altered beyond any bound (an exponent bit of
 * its first value; a cache byte) must then make the other backend's replay
 * exit 1, and one unit in the last place of a bounded float output must
 * not. Strided views go through --stride. argv[1]: the mla executable. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/npy.h"
#include "mla/mla.h"
#include "tests/dump_tamper.h"
#include "tests/test_util.h"

static const char *mla_exe;
static char dump_dir[64];
static const char *backend, *other; /* the dumping backend, the other one */
static int altering;                /* the altered dumps' checks: on the first pass */
static mla_context *ctx;
static int ops_seen;

static void *owned[512];
static int nowned;

static void *hmem(size_t bytes)
{
    void *p = calloc(1, bytes + 16);
    if (nowned < 512)
        owned[nowned++] = p;
    return p;
}

/* A contiguous host tensor; data NULL: zeroed. */
static mla_tensor ten(mla_dtype dt, int32_t nd, const int64_t *shape, const void *data)
{
    mla_tensor t;
    mla_tensor_init(&t, NULL, dt, MLA_MEMORY_HOST, nd, shape);
    const size_t b = (size_t)mla_tensor_numel(&t) * mla_dtype_size(dt);
    t.data = hmem(b);
    if (data)
        memcpy(t.data, data, b);
    return t;
}

static uint32_t rng = 12345u;

static float frand(void)
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((double)(rng >> 8) / 8388608.0 - 1.0);
}

/* Random values in [-1, 1) in a float dtype (f32, bf16), or random bytes. */
static mla_tensor rnd(mla_dtype dt, int32_t nd, const int64_t *shape)
{
    mla_tensor t = ten(dt, nd, shape, NULL);
    const int64_t n = mla_tensor_numel(&t);
    for (int64_t i = 0; i < n; ++i) {
        const float v = frand();
        if (dt == MLA_DTYPE_F32)
            ((float *)t.data)[i] = v;
        else if (dt == MLA_DTYPE_BF16)
            ((uint16_t *)t.data)[i] = mla_f32_to_bf16(v);
        else
            ((uint8_t *)t.data)[i] = (uint8_t)(rng >> 13);
    }
    return t;
}

static mla_tensor idx32(int64_t n, const int32_t *v) { return ten(MLA_DTYPE_I32, 1, &n, v); }

static mla_tensor idx64(int64_t n, const int64_t *v) { return ten(MLA_DTYPE_I64, 1, &n, v); }

/* The folder of the call just made (from mla_context_dump_status). */
static const char *last_dump(void)
{
    static char path[1300];
    const char *s = mla_context_dump_status(ctx);
    snprintf(path, sizeof path, "%s", !strncmp(s, "wrote ", 6) ? s + 6 : "");
    return path;
}

/* The dumped out.NAME.npy holds exactly the logical elements of t. */
static int dumped_as(const char *dir, const char *name, const mla_tensor *t)
{
    char path[1400], err[300];
    snprintf(path, sizeof path, "%s/out.%s.npy", dir, name);
    mla_npy a;
    if (mla_npy_load(path, &a, err, sizeof err) != MLA_OK) {
        fprintf(stderr, "%s: %s\n", path, err);
        return 0;
    }
    const size_t es = mla_dtype_size(t->dtype);
    int ok = a.numel == mla_tensor_numel(t) && a.nbytes == (size_t)a.numel * es;
    int64_t idx[MLA_MAX_DIMS] = {0};
    for (int64_t i = 0; ok && i < a.numel; ++i) {
        int64_t off = 0;
        for (int32_t d = 0; d < t->ndim; ++d)
            off += idx[d] * t->stride[d];
        ok = !memcmp((char *)a.data + i * (int64_t)es, (char *)t->data + off * (int64_t)es, es);
        for (int32_t d = t->ndim - 1; d >= 0 && ++idx[d] == t->shape[d]; --d)
            idx[d] = 0;
    }
    mla_npy_free(&a);
    if (!ok)
        fprintf(stderr, "%s differs from the call's output\n", path);
    return ok;
}

/* mla op --replay DIR --backend B's exit code; its output in DIR/replay.B.log,
 * printed when the code is not the expected one. */
static int replay_rc(const char *dir, const char *on, int expect)
{
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "'%s' op --replay '%s' --backend %s > '%s/replay.%s.log' 2>&1",
             mla_exe, dir, on, dir, on);
    const int rc = sh(cmd);
    if (rc != expect) {
        fprintf(stderr, "replay exited %d, not %d: %s\n", rc, expect, cmd);
        snprintf(cmd, sizeof cmd, "cat '%s/replay.%s.log' >&2", dir, on);
        if (system(cmd) != 0)
            fprintf(stderr, "(no log)\n");
    }
    return rc;
}

static int run_replay(const char *dir, const char *on) { return replay_rc(dir, on, 0) == 0; }

/* A copy of the dump with byte `at` of `file`'s data XORed with mask
 * replays on the other backend with exit code expect. */
static int altered_replays(const char *dir, const char *file, long at, int mask, int expect)
{
    char copy[1400], cmd[3000];
    snprintf(copy, sizeof copy, "%s.altered", dir);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", copy, dir, copy);
    if (sh(cmd) != 0 || tamper_bits(copy, file, at, mask) != 0)
        return 0;
    const int rc = replay_rc(copy, other, expect);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", copy);
    return rc == expect && sh(cmd) == 0;
}

static int altered_output(const char *dir, const char *name, long at, int mask, int expect)
{
    char file[80];
    snprintf(file, sizeof file, "out.%s.npy", name);
    return altered_replays(dir, file, at, mask, expect);
}

/* The ops whose outputs are judged by a bound, not by their bits: one ulp
 * of a float output must pass (the search's indices follow its logits: not
 * altered alone). */
static int bounded(const char *op)
{
    static const char *const ops[] = {
        "rmsnorm",   "qk_rmsnorm", "linear",         "batched_gemm", "gemm_a16wfp4",
        "gemm_a4w4", "layernorm",  "hadamard",       "attention",    "indexer_logits",
        "prepare",   "layer",      "indexer_prepare"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; ++i)
        if (!strcmp(op, ops[i]))
            return 1;
    return 0;
}

static int is_float(mla_dtype d)
{
    return d == MLA_DTYPE_F32 || d == MLA_DTYPE_BF16 || d == MLA_DTYPE_F16;
}

/* After a call: it succeeded, was dumped with its outputs, and replays. */
static void check_call(const char *op, mla_status st, const char *const *names,
                       const mla_tensor *const *outs, int nout)
{
    const char *dir = last_dump();
    if (st != MLA_OK)
        fprintf(stderr, "%s: %s (%s: %s)\n", op, mla_status_name(st), mla_context_error_param(ctx),
                mla_context_error_detail(ctx));
    CHECK(st == MLA_OK);
    CHECK(strstr(dir, op) != NULL);
    if (st != MLA_OK || !*dir)
        return;
    ++ops_seen;
    for (int i = 0; i < nout; ++i)
        CHECK(dumped_as(dir, names[i], outs[i]));
    CHECK(run_replay(dir, backend));
    CHECK(run_replay(dir, other));
    int ulp_tried = 0;
    for (int i = 0; altering && i < nout; ++i) {
        /* the high byte of the first element: an exponent bit, or a code's */
        const long hi = (long)mla_dtype_size(outs[i]->dtype) - 1;
        CHECK(altered_output(dir, names[i], hi, 0x40, 1));
        if (bounded(op) && is_float(outs[i]->dtype) && !ulp_tried++)
            CHECK(altered_output(dir, names[i], 0, 0x01, 0));
    }
}

#define UNPAREN(...) __VA_ARGS__
/* A call, the names of its outputs as `mla op` names them, and the outputs. */
#define CALL(op, expr, names, outs)                                                                \
    do {                                                                                           \
        const char *const n_[] = {UNPAREN names};                                                  \
        const mla_tensor *const o_[] = {UNPAREN outs};                                             \
        const mla_status st_ = (expr);                                                             \
        check_call(op, st_, n_, o_, (int)(sizeof n_ / sizeof n_[0]));                              \
    } while (0)

static void test_formats(void)
{
    mla_tensor x = rnd(MLA_DTYPE_F32, 2, (int64_t[]){4, 64});
    mla_tensor y = ten(MLA_DTYPE_BF16, 2, (int64_t[]){4, 64}, NULL);
    CALL("convert", mla_convert(ctx, &x, &y, MLA_SATURATE), ("y"), (&y));
    mla_tensor codes = ten(MLA_DTYPE_FP4X2, 2, (int64_t[]){4, 32}, NULL);
    mla_tensor sc = ten(MLA_DTYPE_E8M0, 2, (int64_t[]){4, 2}, NULL);
    {
        CALL("mxfp4_quant",
             mla_mxfp4_quant(ctx, &x, &codes, &sc, MLA_SCALE_ROW_MAJOR, MLA_MXFP4_PRODUCTION),
             ("codes", "scales"), (&codes, &sc));
    }
    mla_tensor yd = ten(MLA_DTYPE_F32, 2, (int64_t[]){4, 64}, NULL);
    {
        CALL("mxfp4_dequant", mla_mxfp4_dequant(ctx, &codes, &sc, MLA_SCALE_ROW_MAJOR, &yd), ("y"),
             (&yd));
    }
    /* transposed f32 scales [4, 2] (strides 1, 4): a strided output */
    mla_tensor c8 = ten(MLA_DTYPE_FP8_E4M3FN, 2, (int64_t[]){4, 64}, NULL);
    mla_tensor s8 = ten(MLA_DTYPE_F32, 2, (int64_t[]){4, 2}, NULL);
    mla_tensor_transpose(&s8, 0, 1);
    s8.shape[0] = 4, s8.shape[1] = 2, s8.stride[0] = 1, s8.stride[1] = 4;
    {
        CALL("fp8_group_quant", mla_fp8_group_quant(ctx, &x, &c8, &s8, 32, MLA_FP8_SCALE_AITER),
             ("codes", "scales"), (&c8, &s8));
    }
    {
        CALL("fp8_group_dequant", mla_fp8_group_dequant(ctx, &c8, &s8, 32, &yd), ("y"), (&yd));
    }
    mla_tensor x3 = rnd(MLA_DTYPE_BF16, 3, (int64_t[]){2, 2, 64});
    mla_tensor fc = ten(MLA_DTYPE_FP4X2, 2, (int64_t[]){2, 64}, NULL);
    mla_tensor fs = ten(MLA_DTYPE_E8M0, 2, (int64_t[]){2, 4}, NULL);
    {
        CALL("flatten_mxfp4_quant",
             mla_fused_flatten_mxfp4_quant(ctx, &x3, &fc, &fs, MLA_MXFP4_PRODUCTION),
             ("codes", "scales"), (&fc, &fs));
    }
    mla_tensor f8 = ten(MLA_DTYPE_FP8_E4M3FN, 2, (int64_t[]){2, 128}, NULL);
    mla_tensor f8s = ten(MLA_DTYPE_F32, 2, (int64_t[]){2, 1}, NULL);
    {
        CALL("flatten_fp8_quant", mla_fused_flatten_fp8_group_quant(ctx, &x3, &f8, &f8s),
             ("codes", "scales"), (&f8, &f8s));
    }
}

static void test_gemms_norms(void)
{
    mla_tensor x = rnd(MLA_DTYPE_BF16, 2, (int64_t[]){3, 64});
    mla_tensor w = rnd(MLA_DTYPE_BF16, 1, (int64_t[]){64});
    mla_tensor y = ten(MLA_DTYPE_F32, 2, (int64_t[]){3, 64}, NULL);
    {
        CALL("rmsnorm", mla_rmsnorm(ctx, &x, &w, 1e-6f, &y), ("y"), (&y));
    }
    mla_tensor kv = rnd(MLA_DTYPE_BF16, 2, (int64_t[]){3, 32});
    mla_tensor kw = rnd(MLA_DTYPE_BF16, 1, (int64_t[]){32});
    mla_tensor qo = ten(MLA_DTYPE_BF16, 2, (int64_t[]){3, 64}, NULL);
    mla_tensor ko = ten(MLA_DTYPE_BF16, 2, (int64_t[]){3, 32}, NULL);
    {
        CALL("qk_rmsnorm",
             mla_fused_qk_rmsnorm(ctx, &x, &w, 1e-6f, &kv, &kw, 1e-5f, &qo, NULL, &ko),
             ("q_out", "kv_out"), (&qo, &ko));
        /* q_out quantized: fp8 codes in groups of 128 and their scales */
        mla_tensor q8 = rnd(MLA_DTYPE_BF16, 2, (int64_t[]){3, 128});
        mla_tensor w8 = rnd(MLA_DTYPE_BF16, 1, (int64_t[]){128});
        mla_tensor qc = ten(MLA_DTYPE_FP8_E4M3FN, 2, (int64_t[]){3, 128}, NULL);
        mla_tensor qs = ten(MLA_DTYPE_F32, 2, (int64_t[]){3, 1}, NULL);
        CALL("qk_rmsnorm",
             mla_fused_qk_rmsnorm(ctx, &q8, &w8, 1e-6f, &kv, &kw, 1e-5f, &qc, &qs, &ko),
             ("q_out", "kv_out", "q_scales"), (&qc, &ko, &qs));
    }
    mla_tensor lw = rnd(MLA_DTYPE_BF16, 2, (int64_t[]){32, 64});
    mla_tensor ly = ten(MLA_DTYPE_F32, 2, (int64_t[]){3, 32}, NULL);
    {
        CALL("linear", mla_linear(ctx, &x, &lw, NULL, &ly), ("y"), (&ly));
    }
    mla_tensor w8 = rnd(MLA_DTYPE_FP8_E4M3FN, 2, (int64_t[]){32, 64});
    for (int64_t i = 0; i < 32 * 64; ++i) /* finite codes */
        ((uint8_t *)w8.data)[i] &= 0x77;
    const float one = 0.01f;
    mla_tensor ws = ten(MLA_DTYPE_F32, 2, (int64_t[]){1, 1}, &one);
    {
        CALL("linear", mla_linear(ctx, &x, &w8, &ws, &ly), ("y"), (&ly));
    }
    /* x [2, 3, 16] as a strided [H, T, d] view of a [T, H, d] buffer */
    mla_tensor bx = rnd(MLA_DTYPE_F32, 3, (int64_t[]){3, 2, 16});
    mla_tensor_transpose(&bx, 0, 1);
    mla_tensor bw = rnd(MLA_DTYPE_BF16, 3, (int64_t[]){2, 16, 8});
    mla_tensor by = ten(MLA_DTYPE_F32, 3, (int64_t[]){2, 3, 8}, NULL);
    {
        CALL("batched_gemm", mla_batched_gemm(ctx, &bx, &bw, 1.0f, &by), ("y"), (&by));
    }
    mla_tensor nx = rnd(MLA_DTYPE_F32, 2, (int64_t[]){2, 32});
    mla_tensor nw = rnd(MLA_DTYPE_F32, 1, (int64_t[]){32}),
               nb = rnd(MLA_DTYPE_F32, 1, (int64_t[]){32});
    mla_tensor ny = ten(MLA_DTYPE_F32, 2, (int64_t[]){2, 32}, NULL);
    {
        CALL("layernorm", mla_layernorm(ctx, &nx, &nw, &nb, 1e-6f, &ny), ("y"), (&ny));
        CALL("hadamard", mla_hadamard(ctx, &nx, &ny), ("y"), (&ny));
    }
    /* MXFP4 GEMMs: operands made by the library's own quantizer */
    mla_tensor a = rnd(MLA_DTYPE_F32, 2, (int64_t[]){8, 64});
    mla_tensor wc = ten(MLA_DTYPE_FP4X2, 3, (int64_t[]){1, 8, 32}, NULL);
    mla_tensor wsc = ten(MLA_DTYPE_E8M0, 3, (int64_t[]){1, 8, 2}, NULL);
    mla_tensor wc2 = wc, wsc2 = wsc;
    wc2.ndim = wsc2.ndim = 2;
    wc2.shape[0] = 8, wc2.shape[1] = 32, wc2.stride[0] = 32, wc2.stride[1] = 1;
    wsc2.shape[0] = 8, wsc2.shape[1] = 2, wsc2.stride[0] = 2, wsc2.stride[1] = 1;
    mla_context_set_dump(ctx, NULL, NULL, 0); /* the operands are not the test */
    mla_mxfp4_quant(ctx, &a, &wc2, &wsc2, MLA_SCALE_ROW_MAJOR, MLA_MXFP4_PRODUCTION);
    mla_tensor ax = rnd(MLA_DTYPE_F32, 3, (int64_t[]){1, 2, 64});
    mla_tensor xc = ten(MLA_DTYPE_FP4X2, 3, (int64_t[]){1, 2, 32}, NULL);
    mla_tensor xs = ten(MLA_DTYPE_E8M0, 3, (int64_t[]){1, 2, 2}, NULL);
    mla_tensor ax2 = ax, xc2 = xc, xs2 = xs;
    ax2.ndim = xc2.ndim = xs2.ndim = 2;
    ax2.shape[0] = 2, ax2.shape[1] = 64, ax2.stride[0] = 64, ax2.stride[1] = 1;
    xc2.shape[0] = 2, xc2.shape[1] = 32, xc2.stride[0] = 32, xc2.stride[1] = 1;
    xs2.shape[0] = 2, xs2.shape[1] = 2, xs2.stride[0] = 2, xs2.stride[1] = 1;
    mla_mxfp4_quant(ctx, &ax2, &xc2, &xs2, MLA_SCALE_ROW_MAJOR, MLA_MXFP4_PRODUCTION);
    mla_context_set_dump(ctx, "*", dump_dir, 1000);
    const mla_mxfp4_operand wo = {wc, wsc, MLA_SCALE_ROW_MAJOR}, xo = {xc, xs, MLA_SCALE_ROW_MAJOR};
    mla_tensor gy = ten(MLA_DTYPE_F32, 3, (int64_t[]){1, 2, 8}, NULL);
    {
        CALL("gemm_a16wfp4", mla_batched_gemm_a16wfp4(ctx, &ax, &wo, 1, MLA_MXFP4_PRODUCTION, &gy),
             ("y"), (&gy));
        CALL("gemm_a4w4", mla_batched_gemm_a4w4(ctx, &xo, &wo, &gy), ("y"), (&gy));
    }
}

/* The RoPE table of test-tiny's settings, 32 rows. */
static void rope_table(mla_tensor *cos, mla_tensor *sin)
{
    mla_model_config c;
    mla_model_config_preset("test-tiny", &c);
    *cos = ten(MLA_DTYPE_F32, 2, (int64_t[]){32, 8}, NULL);
    *sin = ten(MLA_DTYPE_F32, 2, (int64_t[]){32, 8}, NULL);
    mla_rope_table_build(&c.rope_cfg, 32, cos->data, sin->data);
}

static void test_cache_attention(void)
{
    mla_tensor cos, sin;
    rope_table(&cos, &sin);
    const int64_t qpos[3] = {3, 9, 17};
    mla_tensor pos = idx64(3, qpos);
    /* x as the rope part of a wider q: [3, 2, 16] inside [3, 2, 48] */
    mla_tensor wide = rnd(MLA_DTYPE_F32, 3, (int64_t[]){3, 2, 48}), x = wide;
    x.shape[2] = 16;
    x.data = (float *)wide.data + 32;
    mla_tensor y = ten(MLA_DTYPE_F32, 3, (int64_t[]){3, 2, 16}, NULL);
    {
        CALL("rope", mla_rope(ctx, &cos, &sin, &pos, &x, &y, MLA_ROPE_INTERLEAVED), ("y"), (&y));
    }
    mla_cache_desc cd = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, 2, 16, 32, 16, 1.0f};
    int64_t bb = 0;
    mla_cache_block_bytes(&cd, &bb);
    mla_tensor cache = ten(MLA_DTYPE_U8, 2, (int64_t[]){2, bb}, NULL);
    /* every slot of both sequences written: 20 tokens of sequence 0 (blocks
     * 1, 0), 12 of sequence 1 in block... the same blocks, read by position */
    int64_t sl[32];
    for (int i = 0; i < 32; ++i)
        sl[i] = i;
    mla_tensor slots = idx64(32, sl);
    mla_tensor kn = rnd(MLA_DTYPE_BF16, 2, (int64_t[]){32, 32});
    mla_tensor kp = rnd(MLA_DTYPE_BF16, 2, (int64_t[]){32, 16});
    {
        CALL("cache_write", mla_cache_write(ctx, &cd, &cache, &kn, &kp, &slots), ("cache"),
             (&cache));
        /* a strided cache (blocks 64 bytes apart) holding bytes of its own: two tokens
         * written, every other byte (the last block's tail too) must come back */
        mla_tensor padded = ten(MLA_DTYPE_U8, 2, (int64_t[]){2, bb + 64}, NULL);
        memset(padded.data, 0x3C, (size_t)(2 * (bb + 64)));
        padded.shape[1] = bb;
        mla_tensor two = idx64(2, (int64_t[]){4, 27}), kn2 = kn, kp2 = kp;
        kn2.shape[0] = kp2.shape[0] = 2;
        CALL("cache_write", mla_cache_write(ctx, &cd, &padded, &kn2, &kp2, &two), ("cache"),
             (&padded));
    }
    const int32_t bt1[2] = {1, 0};
    mla_tensor bt = ten(MLA_DTYPE_I32, 2, (int64_t[]){1, 2}, bt1);
    mla_tensor lens = idx32(1, (int32_t[]){20});
    mla_tensor g = ten(MLA_DTYPE_F32, 2, (int64_t[]){20, 48}, NULL);
    {
        CALL("cache_gather", mla_cache_gather(ctx, &cd, &cache, &bt, &lens, &g), ("out"), (&g));
    }
    /* fused RoPE + concat + cache write of 2 tokens */
    mla_tensor qn = rnd(MLA_DTYPE_BF16, 3, (int64_t[]){2, 2, 32});
    mla_tensor qp = rnd(MLA_DTYPE_BF16, 3, (int64_t[]){2, 2, 16});
    mla_tensor p2 = idx64(2, (int64_t[]){20, 11});
    mla_tensor s2 = idx64(2, (int64_t[]){4, 27});
    mla_tensor kn2 = rnd(MLA_DTYPE_BF16, 2, (int64_t[]){2, 32});
    mla_tensor kp2 = rnd(MLA_DTYPE_BF16, 2, (int64_t[]){2, 16});
    mla_tensor qcat = ten(MLA_DTYPE_BF16, 3, (int64_t[]){2, 2, 48}, NULL);
    mla_rope_cache_args ra = {
        &cos, &sin, MLA_ROPE_INTERLEAVED, &qn, &qp, &p2, &kn2, &kp2, &p2, &s2, &cd, &cache, &qcat,
        1.0f, NULL};
    {
        CALL("rope_cache", mla_fused_rope_concat_cache(ctx, &ra), ("cache", "q_cat"),
             (&cache, &qcat));
    }
    /* the attention over that cache: decode, MTP (next_n 2), a chunked
     * prefill (cu_q_lens), sparse top-k, and RoPE inside it (cache out) */
    mla_model_config c;
    mla_model_config_preset("test-tiny", &c);
    c.heads = 2;
    c.kv_lora = 32;
    const int32_t bt2[4] = {1, 0, 0, 1};
    mla_tensor bt_2 = ten(MLA_DTYPE_I32, 2, (int64_t[]){2, 2}, bt2);
    mla_tensor lens2 = idx32(2, (int32_t[]){21, 12});
    mla_tensor q4 = rnd(MLA_DTYPE_BF16, 3, (int64_t[]){4, 2, 48});
    mla_tensor cu = idx32(3, (int32_t[]){0, 3, 4});
    mla_tensor topk =
        ten(MLA_DTYPE_I32, 2, (int64_t[]){2, 4}, (int32_t[]){0, 5, 20, -1, 3, 1, 11, 7});
    mla_tensor kn1 = rnd(MLA_DTYPE_BF16, 2, (int64_t[]){2, 32});
    mla_tensor kp1 = rnd(MLA_DTYPE_BF16, 2, (int64_t[]){2, 16});
    mla_tensor kpos = idx64(2, (int64_t[]){20, 11}), kslots = idx64(2, (int64_t[]){4, 27});
    mla_attention_rope rope = {&cos, &sin, MLA_ROPE_INTERLEAVED, &kpos, &kn1, &kp1, &kpos, &kslots};
    mla_tensor sinks = ten(MLA_DTYPE_F32, 1, (int64_t[]){2}, (float[]){0.5f, -1.25f});
    for (int k = 0; k < 6; ++k) {
        mla_attention_desc desc;
        CHECK_STATUS(mla_attention_desc_default(&c, &cd, &desc), MLA_OK);
        const int mtp = k == 1, prefill = k == 2, sparse = k == 3, inside = k == 4, sink = k == 5;
        const int64_t T = mtp || prefill ? 4 : 2;
        desc.next_n = mtp ? 2 : 1;
        desc.topk = sparse ? 4 : 0;
        mla_tensor q = q4;
        q.shape[0] = T;
        mla_tensor o = ten(MLA_DTYPE_F32, 3, (int64_t[]){T, 2, 32}, NULL);
        mla_tensor lse = ten(MLA_DTYPE_F32, 2, (int64_t[]){T, 2}, NULL);
        mla_attention_args aa = {&q,
                                 &cache,
                                 &bt_2,
                                 &lens2,
                                 prefill ? &cu : NULL,
                                 sparse ? &topk : NULL,
                                 sink ? &sinks : NULL,
                                 inside ? &rope : NULL,
                                 &o,
                                 &lse,
                                 NULL};
        mla_attention_plan *plan = NULL;
        CHECK_STATUS(mla_attention_plan_create(ctx, &desc, &aa, &plan), MLA_OK);
        if (!plan) {
            fprintf(stderr, "attention plan %d: %s: %s\n", k, mla_context_error_param(ctx),
                    mla_context_error_detail(ctx));
            continue;
        }
        const int64_t wb = mla_attention_plan_workspace_bytes(plan);
        void *wsp = NULL;
        mla_malloc(ctx, (size_t)(wb ? wb : 1), &wsp);
        mla_tensor ws;
        mla_tensor_init(&ws, wsp, MLA_DTYPE_U8, MLA_MEMORY_HOST, 1, &wb);
        aa.workspace = &ws;
        if (inside)
            CALL("attention", mla_attention_run(ctx, plan, &aa), ("o", "lse", "cache"),
                 (&o, &lse, &cache));
        else
            CALL("attention", mla_attention_run(ctx, plan, &aa), ("o", "lse"), (&o, &lse));
        mla_attention_plan_destroy(plan);
        mla_free(ctx, wsp);
    }
}

static void test_indexer(void)
{
    mla_indexer_cache_desc d = {2, 16, 128, MLA_DTYPE_FP8_E4M3FN, MLA_INDEXER_LAYOUT_AUTO, 1};
    int64_t bb = 0;
    mla_indexer_cache_block_bytes(&d, &bb);
    mla_tensor cache = ten(MLA_DTYPE_U8, 2, (int64_t[]){2, bb}, NULL);
    int64_t sl[32];
    for (int i = 0; i < 32; ++i)
        sl[i] = i;
    mla_tensor slots = idx64(32, sl), k = rnd(MLA_DTYPE_F32, 2, (int64_t[]){32, 128});
    {
        CALL("indexer_k_cache_write", mla_indexer_k_cache_write(ctx, &d, &cache, &k, &slots),
             ("cache"), (&cache));
    }
    mla_tensor bt = ten(MLA_DTYPE_I32, 2, (int64_t[]){1, 2}, (int32_t[]){1, 0});
    mla_tensor cu = idx32(2, (int32_t[]){0, 20});
    mla_tensor kf = ten(MLA_DTYPE_FP8_E4M3FN, 2, (int64_t[]){20, 128}, NULL);
    mla_tensor ks = ten(MLA_DTYPE_F32, 1, (int64_t[]){20}, NULL);
    {
        CALL("indexer_k_gather", mla_indexer_k_gather(ctx, &d, &cache, &bt, &cu, &kf, &ks),
             ("k_fp8", "k_scale"), (&kf, &ks));
    }
    mla_tensor q = rnd(MLA_DTYPE_FP8_E4M3FN, 3, (int64_t[]){1, 2, 128});
    for (int64_t i = 0; i < 256; ++i)
        ((uint8_t *)q.data)[i] &= 0xB7; /* finite codes of either sign */
    mla_tensor w = rnd(MLA_DTYPE_F32, 2, (int64_t[]){1, 2});
    mla_tensor lens = idx32(1, (int32_t[]){20});
    mla_tensor logits = ten(MLA_DTYPE_F32, 2, (int64_t[]){1, 20}, NULL);
    {
        CALL("indexer_logits", mla_indexer_logits(ctx, &d, &cache, &q, &w, &bt, &lens, 1, &logits),
             ("logits"), (&logits));
    }
    mla_tensor l2 = rnd(MLA_DTYPE_F32, 2, (int64_t[]){2, 10});
    mla_tensor len2 = idx32(2, (int32_t[]){10, 6});
    mla_tensor ix = ten(MLA_DTYPE_I32, 2, (int64_t[]){2, 4}, NULL);
    {
        CALL("topk", mla_topk(ctx, &l2, &len2, 4, &ix), ("indices"), (&ix));
    }
    mla_tensor hw = rnd(MLA_DTYPE_F32, 2, (int64_t[]){2, 2}),
               sq = rnd(MLA_DTYPE_F32, 2, (int64_t[]){2, 2});
    mla_tensor hwo = ten(MLA_DTYPE_F32, 2, (int64_t[]){2, 2}, NULL);
    {
        CALL("indexer_head_weights", mla_indexer_head_weights(ctx, &hw, &sq, &hwo), ("w_out"),
             (&hwo));
    }
    mla_indexer_plan *plan = NULL;
    CHECK_STATUS(mla_indexer_plan_create(ctx, &d, &bt, &lens, 1, &plan), MLA_OK);
    mla_tensor ix8 = ten(MLA_DTYPE_I32, 2, (int64_t[]){1, 8}, NULL);
    {
        CALL("indexer_search", mla_indexer_search(ctx, plan, &cache, &q, &w, &logits, 8, &ix8),
             ("logits", "indices"), (&logits, &ix8));
    }
    mla_indexer_plan_destroy(plan);
}

/* A layer test's cache and attention form. */
typedef struct layer_variant {
    mla_cache_layout layout;
    mla_dtype dtype;
    mla_layer_form form;
} layer_variant;

/* mla_prepare, the indexer's prepare and the layer forward of a generated
 * checkpoint's layer 0: a prefill of T tokens into blocks 1, 2, ... (T
 * past the indexer's top-k: a real selection). */
static void test_layer(const char *preset, const mla_layer_weight_formats *fm, int64_t T,
                       layer_variant v)
{
    mla_model_config cfg;
    mla_model_config_preset(preset, &cfg);
    cfg.max_pos = 128;
    char ckdir[256];
    snprintf(ckdir, sizeof ckdir, "%s/ck-%s", dump_dir, preset);
    mla_context_set_dump(ctx, NULL, NULL, 0);
    mla_generate_options go;
    mla_generate_options_default(&go);
    go.formats = fm;
    CHECK_STATUS(mla_checkpoint_generate(ctx, ckdir, &cfg, &go), MLA_OK);
    mla_checkpoint *ck = NULL;
    mla_layer_weights_ex w;
    mla_layer_load_options lo;
    mla_layer_load_options_default(&lo);
    lo.kv_b_fp8 = MLA_KV_B_FP8_TO_TENSOR;
    CHECK_STATUS(mla_checkpoint_open(ctx, ckdir, &ck), MLA_OK);
    CHECK_STATUS(mla_layer_weights_load_checkpoint(ctx, ck, 0, &lo, &w), MLA_OK);
    mla_checkpoint_close(ck);
    mla_context_set_dump(ctx, "*", dump_dir, 1000);
    const mla_model_config *c = &w.config;
    mla_tensor cos = ten(MLA_DTYPE_F32, 2, (int64_t[]){128, c->rope / 2}, NULL);
    mla_tensor sin = ten(MLA_DTYPE_F32, 2, (int64_t[]){128, c->rope / 2}, NULL);
    mla_rope_table_build(&c->rope_cfg, 128, cos.data, sin.data);
    const int64_t nb = (T + 15) / 16 + 1; /* block 0 is nobody's */
    mla_cache_desc cd = {v.layout, v.dtype, nb, 16, c->kv_lora, c->rope, 1.0f};
    int64_t bb = 0, ibb = 0;
    mla_cache_block_bytes(&cd, &bb);
    mla_tensor cache = ten(MLA_DTYPE_U8, 2, (int64_t[]){nb, bb}, NULL);
    mla_plan *plan = NULL;
    mla_plan_options po;
    mla_plan_options_default(mla_context_target(ctx), &po);
    po.weight_dtype = w.base.o_proj.w.dtype;
    po.cache_layout = v.layout;
    po.cache_dtype = v.dtype;
    CHECK_STATUS(mla_plan_create(c, &po, &plan), MLA_OK);
    mla_tensor x = rnd(MLA_DTYPE_BF16, 2, (int64_t[]){T, c->hidden});
    mla_tensor pos = ten(MLA_DTYPE_I64, 1, &T, NULL), slots = ten(MLA_DTYPE_I64, 1, &T, NULL);
    int32_t blocks[16];
    for (int64_t t = 0; t < T; ++t)
        ((int64_t *)pos.data)[t] = t, ((int64_t *)slots.data)[t] = 16 + t;
    for (int64_t i = 0; i < nb - 1; ++i)
        blocks[i] = (int32_t)(i + 1);
    if (!c->index_heads && w.formats.kv_b_proj == MLA_WEIGHT_BF16) { /* mla_prepare's absorb */
        int64_t wb = 0;
        mla_prepare_workspace_bytes(plan, T, MLA_DTYPE_BF16, &wb);
        mla_tensor ws = ten(MLA_DTYPE_U8, 1, &wb, NULL);
        mla_tensor qcat =
            ten(MLA_DTYPE_BF16, 3, (int64_t[]){T, c->heads, c->kv_lora + c->rope}, NULL);
        CALL("prepare",
             mla_prepare(ctx, plan, &w.base, &x, &pos, &slots, &cos, &sin, &cd, &cache, &qcat, &ws),
             ("q_cat", "cache"), (&qcat, &cache));
        /* a written element (slot 16's first) far off */
        CHECK(!altering ||
              altered_output(last_dump(), "cache", bb + (v.dtype == MLA_DTYPE_BF16), 0x40, 1));
    }
    if (c->index_heads) { /* the indexer's own prepare, its weights dumped as inputs */
        const int64_t Hi = c->index_heads, Di = c->index_head_dim;
        mla_tensor ql = rnd(MLA_DTYPE_BF16, 2, (int64_t[]){T, c->q_lora});
        mla_tensor qf = ten(MLA_DTYPE_FP8_E4M3FN, 3, (int64_t[]){T, Hi, Di}, NULL);
        mla_tensor wo = ten(MLA_DTYPE_F32, 2, (int64_t[]){T, Hi}, NULL);
        mla_tensor k = ten(MLA_DTYPE_BF16, 2, (int64_t[]){T, Di}, NULL);
        int64_t ib = 0;
        mla_indexer_workspace_bytes(c, T, &ib);
        mla_tensor iws = ten(MLA_DTYPE_U8, 1, &ib, NULL);
        mla_indexer_options io = {MLA_ROPE_NEOX, 1, MLA_DTYPE_FP8_E4M3FN};
        CALL("indexer_prepare",
             mla_indexer_prepare(ctx, c, &w.indexer, &io, &ql, &x, &pos, &cos, &sin, &qf, &wo, &k,
                                 &iws),
             ("q_fp8", "w_out", "k"), (&qf, &wo, &k));
    }
    mla_layer_options opt;
    mla_layer_options_default(c, &cd, &opt);
    opt.form = v.form;
    mla_tensor icache = {0};
    if (c->index_heads) {
        mla_indexer_cache_block_bytes(&opt.index_cache, &ibb);
        icache = ten(MLA_DTYPE_U8, 2, (int64_t[]){nb, ibb}, NULL);
    }
    int64_t wb = 0;
    /* a bound on the contexts; the sparse logits rows hold index_topk */
    const int64_t max_ctx = c->index_heads && c->index_topk > T ? c->index_topk : T;
    CHECK_STATUS(mla_layer_workspace_bytes(ctx, plan, &opt, T, 1, max_ctx, &wb), MLA_OK);
    void *wsp = NULL;
    mla_malloc(ctx, (size_t)wb, &wsp);
    mla_tensor ws;
    mla_tensor_init(&ws, wsp, MLA_DTYPE_U8, MLA_MEMORY_HOST, 1, &wb);
    mla_tensor bt = ten(MLA_DTYPE_I32, 2, (int64_t[]){1, nb - 1}, blocks);
    mla_tensor lens = idx32(1, (int32_t[]){(int32_t)T}), cu = idx32(2, (int32_t[]){0, (int32_t)T});
    mla_layer_batch b = {&pos, &slots, &bt, &lens, &cu, 1};
    mla_layer_buffers bufs = {&cos, &sin, &cache, c->index_heads ? &icache : NULL, &ws};
    mla_layer_plan *lp = NULL;
    CHECK_STATUS(mla_layer_plan_create(ctx, plan, &cd, &opt, &b, max_ctx, &bufs, &lp), MLA_OK);
    mla_tensor y = ten(MLA_DTYPE_F32, 2, (int64_t[]){T, c->hidden}, NULL);
    {
        if (c->index_heads)
            CALL("layer", mla_layer_forward(ctx, lp, &w, &x, &y), ("y", "cache", "index_cache"),
                 (&y, &cache, &icache));
        else
            CALL("layer", mla_layer_forward(ctx, lp, &w, &x, &y), ("y", "cache"), (&y, &cache));
        const char *dir = last_dump();
        CHECK(!altering || altered_output(dir, "cache", bb + (v.dtype == MLA_DTYPE_BF16), 0x40, 1));
        if (altering &&
            c->index_heads) { /* a code of the index cache; a selection that is not one */
            CHECK(altered_output(dir, "index_cache", ibb, 0x40, 1));
            CHECK(altered_replays(dir, "sel.topk.npy", 3, 0x40, 1));
        }
    }
    mla_layer_plan_destroy(lp);
    mla_plan_destroy(plan);
    mla_free(ctx, wsp);
    mla_layer_weights_free(ctx, &w);
}

/* Every call dumped on one backend (the reference, then the CPU). */
static void run_all(mla_backend b)
{
    char cmd[600];
    snprintf(dump_dir, sizeof dump_dir, "test_op_cli.tmp/%s", mla_backend_name(b));
    backend = mla_backend_name(b);
    other = b == MLA_BACKEND_REFERENCE ? "cpu" : "reference";
    altering = b == MLA_BACKEND_REFERENCE;
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dump_dir, dump_dir);
    if (system(cmd) != 0 || mla_context_create(b, NULL, &ctx) != MLA_OK) {
        CHECK(!"a context and a dump folder");
        return;
    }
    CHECK_STATUS(mla_context_set_dump(ctx, "*", dump_dir, 1000), MLA_OK);
    test_formats();
    test_gemms_norms();
    test_cache_attention();
    test_indexer();
    const mla_layer_weight_formats bf16 = {0};
    const mla_layer_weight_formats fp8 = {MLA_WEIGHT_FP8_BLOCK,
                                          MLA_WEIGHT_FP8_BLOCK,
                                          MLA_WEIGHT_FP8_BLOCK,
                                          MLA_WEIGHT_FP8_BLOCK,
                                          MLA_WEIGHT_FP8_BLOCK,
                                          0,
                                          0,
                                          0};
    const layer_variant plain = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, MLA_LAYER_FORM_AUTO};
    test_layer("test-tiny", &bf16, 3, plain);
    test_layer("test-tiny", &fp8, 3, plain);
    test_layer("test-tiny-indexer", &bf16, 3, plain);
    test_layer("test-tiny-indexer", &bf16, 70, plain);
    /* the other caches, and the expanded form */
    test_layer("test-tiny", &bf16, 3,
               (layer_variant){MLA_CACHE_FP8_SCALED, MLA_DTYPE_FP8_E4M3FN, MLA_LAYER_FORM_AUTO});
    test_layer("test-tiny", &bf16, 3,
               (layer_variant){MLA_CACHE_SHUFFLED, MLA_DTYPE_BF16, MLA_LAYER_FORM_EXPANDED});
    test_layer("test-tiny", &bf16, 3,
               (layer_variant){MLA_CACHE_NORMAL, MLA_DTYPE_FP8_E4M3FN, MLA_LAYER_FORM_AUTO});
    mla_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    mla_exe = argv[1];
    run_all(MLA_BACKEND_REFERENCE);
    run_all(MLA_BACKEND_CPU);
    printf("%d calls dumped and replayed\n", ops_seen);
    CHECK(ops_seen >= 2 * 47);
    for (int i = 0; i < nowned; ++i)
        free(owned[i]);
    return TEST_SUMMARY();
}
