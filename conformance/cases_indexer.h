/* Shared by the DSA indexer's case files (cases_indexer*.c): the K cache's
 * byte layout, written here from MLA.md (section 6) and not taken from the
 * library, so that a writer and a reader that agree with each other but not
 * with MLA.md cannot both pass (seed 002), and the helpers every cache-based
 * case shares (parameters: conf_p_indexer, case_params.h).
 *
 * A block of the cache holds [block_size * D fp8 values][block_size fp32
 * scales], D = head_dim:
 *   NORMAL:  value (t, d) at t * D + d
 *   SHUFFLE: value (t, d) at (t/16)*16*D + (d/16)*16*16 + (t%16)*16 + d%16
 *   scale of token t at block_size * D + 4 t, little-endian. */
#ifndef MLA_CONFORMANCE_CASES_INDEXER_H
#define MLA_CONFORMANCE_CASES_INDEXER_H

#include "conformance/conf.h"

#define CONF_IDX_D 128         /* the model's indexer head dim */
#define CONF_IDX_BLOCK_PAD 48  /* bytes between the blocks of a padded cache */

static inline int64_t conf_idx_value_byte(int32_t layout, int64_t t, int64_t d, int64_t D)
{
    if (layout == MLA_INDEXER_SHUFFLE)
        return (t / 16) * 16 * D + (d / 16) * 256 + (t % 16) * 16 + d % 16;
    return t * D + d;
}

static inline int64_t conf_idx_scale_byte(int64_t t, int64_t bs, int64_t D)
{
    return bs * D + 4 * t;
}

/* The descriptor of a cache-based case (the layout as the caller asks). */
static inline mla_indexer_cache_desc conf_idx_desc(const conf_case *c)
{
    const conf_p_indexer *q = &c->p.idx;
    mla_indexer_cache_desc d = {
        q->blocks, q->block_size, CONF_IDX_D, q->fp8, (mla_indexer_layout)q->layout, q->ue8m0};
    return d;
}

/* The layout the entry points resolve (the bytes'). */
static inline int32_t conf_idx_layout(const conf_case *c)
{
    const conf_p_indexer *q = &c->p.idx;
    return q->layout == MLA_INDEXER_LAYOUT_AUTO ? (int32_t)mla_indexer_layout_for(q->block_size)
                                                : q->layout;
}

/* Argument order of the two composite suites, indexer_k_roundtrip (write,
 * then gather) and indexer_rope_k_cache (mla_rope, then the write): the
 * negative controls run their own exec over them. */
enum { CONF_RT_CACHE, CONF_RT_K, CONF_RT_SLOTS, CONF_RT_TABLE, CONF_RT_CU, CONF_RT_FP8,
       CONF_RT_SCALE };
enum { CONF_RK_CACHE, CONF_RK_K, CONF_RK_POS, CONF_RK_COS, CONF_RK_SIN, CONF_RK_SLOTS,
       CONF_RK_ROT };

/* "NORMAL" / "SHUFFLE", "auto=NORMAL" when the case leaves it to AUTO. */
void conf_idx_layout_label(const conf_case *c, char *buf, size_t len);

/* A cache-based case (the cache's parameters, the ACT distribution) and its
 * label, "e4m3fn ue8m0 bs16 auto=SHUFFLE" + extra. */
void conf_idx_case(conf_case *c, mla_dtype fp8, int ue8m0, int64_t bs, int layout,
                   int64_t blocks);
void conf_idx_label(conf_case *c, const char *extra);

/* The fields of the cache's parameters (CONF_IDX_CACHE_FIELDS, 6 entries). */
#define CONF_IDX_CACHE_FIELDS                                                                      \
    CONF_ENUM(idx, layout, conf_name_indexer_layout, MLA_INDEXER_LAYOUT_COUNT),                    \
        CONF_FIELD(idx, fp8, CONF_F_DTYPE), CONF_FIELD(idx, block_size, CONF_F_I64),               \
        CONF_FIELD(idx, blocks, CONF_F_I64), CONF_FIELD(idx, ue8m0, CONF_F_I32),                   \
        CONF_FIELD(idx, cache_lay, CONF_F_LAY)

/* Design helpers (cover.h): the resolved layout SHUFFLE needs a block size
 * class of 16 or more; a design case's cache for a block size class and a
 * resolved layout (asked as AUTO in every other design where AUTO gives it). */
struct conf_point;
int conf_idx_legal(const struct conf_point *p, int layout, int block);
void conf_idx_design_cache(conf_case *c, mla_dtype fp8, int ue8m0, int64_t block_class,
                           int64_t layout, int k);

/* Adds the cache, U8 [blocks, block_bytes], as argument i = p->nargs, with
 * role; a padded block stride on cache_lay & CONF_L_PAD. */
mla_status conf_idx_add_cache(conf_problem *p, const conf_case *c, int role);

/* Fills cache argument i as a writer leaves it: every value byte a finite
 * code of the dtype (all codes when codes_any), every scale a positive
 * normal fp32 (powers of two under ue8m0, as the writer stores them). */
void conf_idx_fill_cache(conf_problem *p, int i, const conf_case *c, int codes_any);

/* Host address of byte `off` of block `blk` of cache argument i. */
unsigned char *conf_idx_block_byte(conf_problem *p, int i, int64_t blk, int64_t off);

/* A block table [S, mb] (argument i, I32) for sequences of lens[s] tokens:
 * the blocks a sequence uses are distinct blocks scattered over the cache
 * (a seeded permutation of the blocks), the unused entries -1. */
void conf_idx_fill_table(conf_problem *p, int i, const int64_t *lens, int64_t S, int64_t mb,
                         int64_t bs, int64_t blocks, uint64_t seed);

/* The paged-logits problem (cases_indexer_logits.c): arguments cache,
 * q, w, block_table, context_lens, logits in that order, CONF_LG_SEQS
 * sequences of next_n query rows, Hi heads. The indexer_search suite builds
 * on it. */
enum { CONF_LG_CACHE, CONF_LG_Q, CONF_LG_W, CONF_LG_TABLE, CONF_LG_LENS, CONF_LG_LOGITS };
#define CONF_LG_SEQS 3
void conf_idx_logits_case(conf_case *c, int64_t bs, int layout, int next_n, int64_t Hi,
                          mla_dtype fp8, int n);
mla_status conf_idx_setup_logits(const conf_case *c, const conf_env *env, conf_problem *p,
                                 char *err, size_t errlen);
void conf_idx_logits_label(conf_case *c);
/* The logits' bound (conformance/cases_indexer_logits.c) of a problem in
 * that argument order, the cache read with d's dtype, block size and
 * resolved layout, every sequence next_n query rows. */
mla_status conf_idx_logits_tol(conf_problem *p, const mla_indexer_cache_desc *d, int64_t next_n);
/* The search's indices (arg ix, [rows, K]) against the top-k of the
 * logits (arg CONF_LG_LOGITS) they came with, got[] the whole buffers; the
 * logits problem's context lengths give each row's causal bound. */
void conf_idx_search_check(const conf_problem *p, int ix, int64_t next_n, unsigned char *const *got,
                           conf_cmp *r);
/* The logits' rows: CONF_LG_SEQS * next_n. */
static inline int64_t conf_idx_logits_rows(const conf_case *c)
{
    return CONF_LG_SEQS * (int64_t)c->p.idx.next_n;
}

#endif
