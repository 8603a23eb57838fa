/* The DSA indexer's K cache ops composed (MLA.md section 6), bit-exact:
 *
 * - indexer_k_roundtrip: mla_indexer_k_cache_write, then mla_indexer_k_gather
 *   of the same rows. Golden: the 32 rows of indexer_k_inputs_f32 written at
 *   scattered slots, in both flavours, plain and ue8m0, NORMAL and SHUFFLE,
 *   block sizes 1, 16 and 64, on every backend; the gathered codes and scales
 *   must equal the golden vectors, and the cache bytes the golden codes and
 *   scales placed where MLA.md's formula puts them (cases_indexer.h), every
 *   other byte untouched. Generated cases compare with the reference.
 * - indexer_rope_k_cache: the indexer's k path, mla_rope (NeoX or
 *   interleaved, R = 64, out of place) and then the cache write of the
 *   rotated rows; the rotated rows and the cache bytes must match. The
 *   negative control of seed 002's second bug (a fast path that assumed the
 *   RoPE rotated k in place while it returned a new tensor, and cached the
 *   unrotated k) swaps this suite's exec in tests/conformance_negative_indexer.c. */
#include <stdlib.h>
#include <string.h>

#include "conformance/cases_indexer.h"

static const mla_dtype fp8s[] = {MLA_DTYPE_FP8_E4M3FN, MLA_DTYPE_FP8_E4M3FNUZ};
static const unsigned klays[] = {CONF_L_CONTIG, CONF_L_PAD, CONF_L_STEP2 | CONF_L_OFFSET,
                                 CONF_L_COLMAJOR};

/* ---------------------------------------------------- the round trip */

#define RT_SEQS 3

static const char *const golden_in = "indexer_k_inputs_f32.npy";

/* Golden: the 32 rows as sequences of 13, 0 and 19 tokens (generated: 40
 * rows, 13, 0, 27). */
static void rt_lens(const conf_case *c, int64_t *lens)
{
    lens[0] = 13;
    lens[1] = 0;
    lens[2] = c->p.idx.T - 13;
}

static int64_t rt_mb(const conf_case *c)
{
    return (c->p.idx.T - 13 + c->p.idx.block_size - 1) / c->p.idx.block_size;
}

static const conf_field rt_fields[] = {
    CONF_IDX_CACHE_FIELDS,
    CONF_FIELD(idx, T, CONF_F_I64),
    CONF_FIELD(idx, k, CONF_F_DTYPE),
    CONF_FIELD(idx, k_lay, CONF_F_LAY),
    CONF_ENUM(idx, dist, conf_name_dist, CONF_DIST_COUNT),
};

static void label_rt(conf_case *c)
{
    conf_idx_label(c, c->golden >= 0 ? "golden" : mla_dtype_name(c->p.idx.k));
}

static int build_roundtrip(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_indexer_k_roundtrip};
    static const struct {
        int64_t bs, blocks;
        int layout;
    } g[] = {{1, 40, MLA_INDEXER_LAYOUT_AUTO},
             {16, 5, MLA_INDEXER_LAYOUT_AUTO},
             {64, 3, MLA_INDEXER_NORMAL},
             {64, 3, MLA_INDEXER_SHUFFLE}};
    conf_case c;
    int n = 0;
    for (int fi = 0; fi < 2; ++fi)
        for (int ue = 0; ue < 2; ++ue)
            for (int k = 0; k < 4; ++k, ++n) {
                conf_idx_case(&c, fp8s[fi], ue, g[k].bs, g[k].layout, g[k].blocks);
                c.golden = n;
                c.p.idx.k = MLA_DTYPE_F32;
                c.p.idx.cache_lay = n % 3 == 1 ? CONF_L_PAD : CONF_L_CONTIG;
                c.p.idx.T = 32;
                conf_push(&b, &c);
            }
    for (int k = 0; k < 4; ++k) { /* generated, against the reference */
        conf_idx_case(&c, fp8s[k % 2], k / 2, g[k].bs, g[k].layout, g[k].blocks + 1);
        c.p.idx.k = k % 2 ? MLA_DTYPE_BF16 : MLA_DTYPE_F32;
        c.p.idx.k_lay = klays[k];
        c.p.idx.T = 40;
        conf_push(&b, &c);
    }
    return b.n;
}

/* Golden expectation of the cache: its old bytes, with each row's golden
 * codes and scale placed by MLA.md's formula. */
static mla_status rt_golden_cache(conf_problem *p, const conf_case *c)
{
    const conf_arg *a = &p->arg[CONF_RT_CACHE];
    const int64_t blocks = a->t.shape[0], bb = a->t.shape[1], bs = c->p.idx.block_size;
    const int64_t D = CONF_IDX_D;
    unsigned char *want = malloc((size_t)(blocks * bb > 0 ? blocks * bb : 1));
    if (!want)
        return MLA_ERR_OUT_OF_MEMORY;
    for (int64_t blk = 0; blk < blocks; ++blk)
        memcpy(want + blk * bb, conf_idx_block_byte(p, CONF_RT_CACHE, blk, 0), (size_t)bb);
    const unsigned char *codes = p->arg[CONF_RT_FP8].golden, *scales = p->arg[CONF_RT_SCALE].golden;
    for (int64_t r = 0; r < c->p.idx.T; ++r) {
        const int64_t slot = (int64_t)conf_in_value(&p->arg[CONF_RT_SLOTS], r);
        unsigned char *blk = want + (slot / bs) * bb;
        for (int64_t d = 0; d < D; ++d)
            blk[conf_idx_value_byte(conf_idx_layout(c), slot % bs, d, D)] = codes[r * D + d];
        memcpy(blk + conf_idx_scale_byte(slot % bs, bs, D), scales + 4 * r, 4);
    }
    p->owned[p->nowned++] = want;
    p->arg[CONF_RT_CACHE].golden = want;
    return MLA_OK;
}

static mla_status setup_roundtrip(const conf_case *c, const conf_env *env, conf_problem *p,
                                  char *err, size_t errlen)
{
    const conf_p_indexer *q = &c->p.idx;
    const int64_t T = q->T, mb = rt_mb(c), D = CONF_IDX_D, bs = q->block_size;
    const int64_t ks[2] = {T, D}, ts[1] = {T}, bt[2] = {RT_SEQS, mb}, cs[1] = {RT_SEQS + 1};
    int64_t lens[RT_SEQS];
    rt_lens(c, lens);
    mla_status st = conf_idx_add_cache(p, c, CONF_INOUT);
    if (st == MLA_OK)
        st = conf_add_arg(p, "k", CONF_IN, q->k, 2, ks, q->k_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "slots", CONF_IN, MLA_DTYPE_I32, 1, ts, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "block_table", CONF_IN, MLA_DTYPE_I32, 2, bt, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "cu_seq_lens", CONF_IN, MLA_DTYPE_I32, 1, cs, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "k_fp8", CONF_OUT, q->fp8, 2, ks, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "k_scale", CONF_OUT, MLA_DTYPE_F32, 1, ts, CONF_L_CONTIG);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    p->arg[CONF_RT_CACHE].bound.raw = p->arg[CONF_RT_FP8].bound.raw =
        p->arg[CONF_RT_SCALE].bound.raw = 1;
    conf_fill(p, CONF_RT_CACHE, CONF_DIST_CODES, c->seed, 0);
    conf_idx_fill_table(p, CONF_RT_TABLE, lens, RT_SEQS, mb, bs, q->blocks, c->seed);
    for (int64_t s = 0, cu = 0, r = 0; s <= RT_SEQS; ++s) { /* row r of sequence s -> its slot */
        conf_set_value(p, CONF_RT_CU, s, (double)cu);
        for (int64_t j = 0; s < RT_SEQS && j < lens[s]; ++j, ++r) {
            const int64_t blk = (int64_t)conf_in_value(&p->arg[CONF_RT_TABLE], s * mb + j / bs);
            conf_set_value(p, CONF_RT_SLOTS, r, (double)(blk * bs + j % bs));
        }
        cu += s < RT_SEQS ? lens[s] : 0;
    }
    if (c->golden < 0) {
        conf_fill(p, CONF_RT_K, q->dist, c->seed ^ 1, D);
        return MLA_OK;
    }
    const char *fl = q->fp8 == MLA_DTYPE_FP8_E4M3FN ? "e4m3fn" : "e4m3fnuz";
    const char *rule = q->ue8m0 ? "ue8m0" : "plain";
    char codes[96], scales[96];
    snprintf(codes, sizeof codes, "indexer_k_%s_%s_codes_u8.npy", fl, rule);
    snprintf(scales, sizeof scales, "indexer_k_%s_%s_scales_f32.npy", fl, rule);
    st = conf_golden_input(p, CONF_RT_K, env, golden_in, err, errlen);
    if (st == MLA_OK)
        st = conf_golden_output(p, CONF_RT_FP8, env, codes, err, errlen);
    if (st == MLA_OK)
        st = conf_golden_output(p, CONF_RT_SCALE, env, scales, err, errlen);
    if (st == MLA_OK && (st = rt_golden_cache(p, c)) != MLA_OK)
        snprintf(err, errlen, "out of memory");
    return st;
}

static mla_status exec_roundtrip(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    mla_indexer_cache_desc d = conf_idx_desc(c);
    mla_status st =
        mla_indexer_k_cache_write(ctx, &d, &t[CONF_RT_CACHE], &t[CONF_RT_K], &t[CONF_RT_SLOTS]);
    if (st == MLA_OK)
        st = mla_indexer_k_gather(ctx, &d, &t[CONF_RT_CACHE], &t[CONF_RT_TABLE], &t[CONF_RT_CU],
                                  &t[CONF_RT_FP8], &t[CONF_RT_SCALE]);
    return st;
}

const conf_suite conf_suite_indexer_k_roundtrip = {.name = "indexer_k_roundtrip",
                                                   .op = MLA_OP_INDEXER_K_CACHE_WRITE,
                                                   .build = build_roundtrip,
                                                   .setup = setup_roundtrip,
                                                   .exec = exec_roundtrip,
                                                   .label = label_rt,
                                                   .fields = rt_fields,
                                                   .nfields = CONF_NFIELDS(rt_fields)};

/* ------------------------------------------- RoPE, then the cache write */

#define ROPE_R 64   /* the indexer's rope dims */
#define ROPE_P 512  /* table rows */

static const conf_field rk_fields[] = {
    CONF_IDX_CACHE_FIELDS,
    CONF_FIELD(idx, T, CONF_F_I64),
    CONF_FIELD(idx, k, CONF_F_DTYPE),
    CONF_FIELD(idx, positions, CONF_F_DTYPE),
    CONF_ENUM(idx, style, conf_name_rope_style, MLA_ROPE_STYLE_COUNT),
    CONF_FIELD(idx, k_lay, CONF_F_LAY),
    CONF_ENUM(idx, dist, conf_name_dist, CONF_DIST_COUNT),
};

static void label_rk(conf_case *c)
{
    conf_idx_label(c, mla_rope_style_name((mla_rope_style)c->p.idx.style));
}

static int build_rope(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_indexer_rope_k_cache};
    static const struct {
        int64_t bs, blocks;
        int layout;
    } g[] = {{1, 30, MLA_INDEXER_LAYOUT_AUTO},
             {16, 2, MLA_INDEXER_LAYOUT_AUTO},
             {64, 1, MLA_INDEXER_NORMAL}};
    conf_case c;
    for (int n = 0; n < 6; ++n) {
        const int k = n % 3;
        conf_idx_case(&c, fp8s[n % 2], n / 3, g[k].bs, g[k].layout, g[k].blocks);
        c.p.idx.k = n % 2 ? MLA_DTYPE_BF16 : MLA_DTYPE_F32; /* k, and the rotated k */
        c.p.idx.positions = n % 3 == 2 ? MLA_DTYPE_I64 : MLA_DTYPE_I32;
        c.p.idx.style = n < 4 ? MLA_ROPE_NEOX : MLA_ROPE_INTERLEAVED;
        c.p.idx.k_lay = n % 2 ? CONF_L_PAD : CONF_L_CONTIG;
        c.p.idx.T = 20;
        conf_push(&b, &c);
    }
    return b.n;
}

static mla_status setup_rope(const conf_case *c, const conf_env *env, conf_problem *p, char *err,
                             size_t errlen)
{
    (void)env;
    const conf_p_indexer *q = &c->p.idx;
    const int64_t T = q->T, ks[2] = {T, CONF_IDX_D}, ts[1] = {T}, tab[2] = {ROPE_P, ROPE_R / 2};
    mla_status st = conf_idx_add_cache(p, c, CONF_INOUT);
    if (st == MLA_OK)
        st = conf_add_arg(p, "k", CONF_IN, q->k, 2, ks, q->k_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "positions", CONF_IN, q->positions, 1, ts, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "cos", CONF_IN, MLA_DTYPE_F32, 2, tab, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "sin", CONF_IN, MLA_DTYPE_F32, 2, tab, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "slots", CONF_IN, MLA_DTYPE_I32, 1, ts, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "k_rot", CONF_OUT, q->k, 2, ks, CONF_L_CONTIG);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    p->arg[CONF_RK_CACHE].bound.raw = 1;
    conf_fill(p, CONF_RK_CACHE, CONF_DIST_CODES, c->seed, 0);
    conf_fill(p, CONF_RK_K, q->dist, c->seed ^ 1, CONF_IDX_D);
    /* DeepSeek-V3.2's YaRN table, R = 64 */
    mla_rope_config rc = {ROPE_R, 10000.0, 40.0, 32.0, 1.0, 4096, 1.0, 1.0};
    st = mla_rope_table_build(&rc, ROPE_P, (float *)conf_arg_elem0(&p->arg[CONF_RK_COS]),
                              (float *)conf_arg_elem0(&p->arg[CONF_RK_SIN]));
    if (st != MLA_OK) {
        snprintf(err, errlen, "mla_rope_table_build: %s", mla_status_name(st));
        return st;
    }
    for (int64_t t = 0; t < T; ++t) /* position 0 (no rotation) once, then spread */
        conf_set_value(p, CONF_RK_POS, t,
                       t ? (double)(conf_rng(c->seed, 24, (uint64_t)t, 0) % ROPE_P) : 0.0);
    conf_fill_slots(p, CONF_RK_SLOTS, q->blocks * q->block_size, c->seed ^ 3, 1);
    return MLA_OK;
}

/* The correct composite: rotate into a new buffer, cache the rotated rows. */
static mla_status exec_rope(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    mla_indexer_cache_desc d = conf_idx_desc(c);
    mla_status st = mla_rope(ctx, &t[CONF_RK_COS], &t[CONF_RK_SIN], &t[CONF_RK_POS], &t[CONF_RK_K],
                             &t[CONF_RK_ROT], (mla_rope_style)c->p.idx.style);
    if (st == MLA_OK)
        st = mla_indexer_k_cache_write(ctx, &d, &t[CONF_RK_CACHE], &t[CONF_RK_ROT],
                                       &t[CONF_RK_SLOTS]);
    return st;
}

const conf_suite conf_suite_indexer_rope_k_cache = {.name = "indexer_rope_k_cache",
                                                    .op = MLA_OP_INDEXER_K_CACHE_WRITE,
                                                    .build = build_rope,
                                                    .setup = setup_rope,
                                                    .exec = exec_rope,
                                                    .label = label_rk,
                                                    .fields = rk_fields,
                                                    .nfields = CONF_NFIELDS(rk_fields)};
