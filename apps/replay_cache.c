/* The caches a call writes (apps/replay.h). A call defines only the slots
 * it writes: every byte outside them (other slots, the gaps of a block)
 * must still be the input cache's byte, in the dump and in the rerun. The
 * written slots are compared element by element at the layouts of MLA.md
 * sections 4 and 6 (conformance/conf.h's conf_cache_elem, cases_indexer.h):
 * bit for bit where the writer is bit-defined (conformance compares those
 * caches as raw bytes), else each side's dequantized element against the
 * oracle within its bound plus half the side's own quantization step (the
 * element's rounding to the cache dtype). A NaN there matches any NaN:
 * arithmetic leaves the payload free. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/cmd.h"
#include "apps/replay.h"
#include "conformance/cases_indexer.h"

typedef struct side {
    const char *who;
    const unsigned char *bytes;
    int64_t kept, written; /* mismatches outside and inside the written slots */
    double worst;
    char first[200];
} side;

/* Elements of one token: the latent cache's (scales included), or the
 * indexer cache's head_dim values and their scale. */
static int64_t elems(const replay_cache_geom *cg)
{
    return cg->indexer ? cg->idx.head_dim + 1 : conf_cache_elems(&cg->g);
}

static int64_t elem_at(const replay_cache_geom *cg, int64_t t, int64_t d, mla_dtype *dt)
{
    if (!cg->indexer)
        return conf_cache_elem(&cg->g, t, d, dt);
    const int64_t D = cg->idx.head_dim;
    *dt = d < D ? cg->idx.dtype : MLA_DTYPE_F32;
    return d < D ? conf_idx_value_byte(cg->idx.layout, t, d, D)
                 : conf_idx_scale_byte(t, cg->idx.block_size, D);
}

static double f32_at(const unsigned char *p)
{
    return conf_decode_value(MLA_DTYPE_F32, conf_load_bits(p, 4));
}

/* Element d of token t of a block: its dequantized value and half its
 * quantization step. */
static double value_at(const replay_cache_geom *cg, const unsigned char *blk, int64_t t, int64_t d,
                       double *half_step)
{
    mla_dtype dt;
    const int64_t at = elem_at(cg, t, d, &dt);
    const unsigned code = blk[at];
    if (dt == MLA_DTYPE_BF16) {
        const double v = conf_decode_value(dt, conf_load_bits(blk + at, 2));
        *half_step = 0.5 * conf_ulp(dt, v);
        return v;
    }
    double s = cg->g.k_scale;
    if (cg->indexer)
        s = f32_at(blk + elem_at(cg, t, cg->idx.head_dim, &dt));
    else if (cg->g.layout == MLA_CACHE_FP8_SCALED)
        s = f32_at(blk + conf_cache_elem(&cg->g, t, cg->g.L + cg->g.R + d / 128, &dt));
    *half_step = conf_code_half_gap(cg->indexer ? cg->idx.dtype : cg->g.cache_dtype, code) * s;
    return cg->indexer ? conf_decode_value(cg->idx.dtype, code) * s
                       : conf_cache_value(&cg->g, blk, t, d);
}

/* One written element of one side: bits (against the dump's bytes), or
 * its value within the bound of the oracle's ov. */
static void judge_elem(side *s, const replay_cache_geom *cg, const unsigned char *dumped,
                       int64_t blk, int64_t bb, int64_t t, int64_t slot, int64_t d, int kind,
                       double ov, double tol)
{
    mla_dtype dt;
    const int64_t at = blk * bb + elem_at(cg, t, d, &dt);
    const size_t es = mla_dtype_size(dt);
    if (kind == 0) {
        if (memcmp(s->bytes + at, dumped + at, es) && !s->written++)
            snprintf(s->first, sizeof s->first, "slot %lld element %lld: 0x%llx, dumped 0x%llx",
                     (long long)slot, (long long)d,
                     (unsigned long long)conf_load_bits(s->bytes + at, es),
                     (unsigned long long)conf_load_bits(dumped + at, es));
        return;
    }
    double hs;
    const double v = value_at(cg, s->bytes + blk * bb, t, d, &hs);
    int ok;
    if (!isfinite(v) || !isfinite(ov)) {
        ok = (isnan(v) && isnan(ov)) || v == ov;
    } else {
        const double e = v == ov ? 0.0 : fabs(v - ov) / (tol + hs);
        ok = e <= 1.0;
        s->worst = fmax(s->worst, e);
    }
    if (!ok && !s->written++)
        snprintf(s->first, sizeof s->first, "slot %lld dim %lld: %.9g, the oracle %.9g",
                 (long long)slot, (long long)d, v, ov);
}

static int64_t index_at(const mla_npy *a, int64_t i)
{
    return a->type == MLA_NPY_I8 ? ((const int64_t *)a->data)[i] : ((const int32_t *)a->data)[i];
}

static void say_side(const side *s)
{
    printf("%s ", s->who);
    if (!s->kept && !s->written)
        printf("yes");
    if (s->kept)
        printf("DIFFERENT outside the written slots (%lld bytes, first at %s)", (long long)s->kept,
               s->first);
    else if (s->written)
        printf("DIFFERENT in %lld written elements (first %s)", (long long)s->written, s->first);
}

int replay_cache(replay *r, replay_out *o, const char *in_name, const char *slots_name,
                 const replay_cache_geom *cg, replay_slot_oracle oracle, void *octx)
{
    const char *in_path = replay_word(r, "--in", in_name);
    const char *sl_path = replay_word(r, "--in", slots_name);
    mla_npy in = {0}, sl = {0};
    const int64_t NB = o->dumped.ndim == 2 ? o->dumped.shape[0] : 0;
    const int64_t bb = o->dumped.ndim == 2 ? o->dumped.shape[1] : 0;
    const int64_t bs = cg->indexer ? cg->idx.block_size : cg->g.block_size;
    const size_t n = o->dumped.nbytes;
    unsigned char *mask = calloc(n + 1, 1), *zero = calloc(n + 1, 1);
    int rc = MLA_EXIT_FAIL;
    if (!mask || !zero || !sl_path || replay_load(sl_path, &sl) ||
        (in_path && replay_load(in_path, &in)))
        goto done;
    if ((in_path && in.nbytes != n) || o->dumped.type != MLA_NPY_U1 || bs < 1 ||
        (sl.type != MLA_NPY_I4 && sl.type != MLA_NPY_I8)) {
        replay_say(o, MLA_EXIT_FAIL, "DIFFERENT: not a cache of the call's geometry");
        goto done;
    }
    const unsigned char *before = in_path ? in.data : zero;
    side sd[2] = {{"dumped", o->dumped.data, 0, 0, 0, ""}, {"rerun", o->got.data, 0, 0, 0, ""}};
    int64_t nslots = 0;
    for (int64_t i = 0; i < sl.numel; ++i) {
        const int64_t slot = index_at(&sl, i), blk = slot / bs, t = slot % bs;
        if (slot < 0)
            continue;
        if (blk >= NB) {
            replay_say(o, MLA_EXIT_FAIL, "DIFFERENT: slot %lld is outside the cache",
                       (long long)slot);
            goto done;
        }
        ++nslots;
        for (int64_t d = 0; d < elems(cg); ++d) {
            mla_dtype dt;
            const int64_t at = blk * bb + elem_at(cg, t, d, &dt);
            memset(mask + at, 1, mla_dtype_size(dt));
            double ov = 0, tol = 0;
            const int kind = oracle ? oracle(octx, slot, d, &ov, &tol) : 0;
            /* bits: the rerun against the dump; a bound: each side against the oracle */
            for (int k = kind == 0; k < 2 && kind != 2; ++k)
                judge_elem(&sd[k], cg, o->dumped.data, blk, bb, t, slot, d, kind, ov, tol);
        }
    }
    for (int k = 0; k < 2; ++k) {
        for (size_t b = 0; b < n; ++b)
            if (!mask[b] && sd[k].bytes[b] != before[b] && !sd[k].kept++ && !sd[k].written)
                snprintf(sd[k].first, sizeof sd[k].first,
                         "block %lld byte %lld: 0x%02x, was 0x%02x", (long long)(b / (size_t)bb),
                         (long long)(b % (size_t)bb), sd[k].bytes[b], before[b]);
    }
    rc = sd[0].kept || sd[0].written || sd[1].kept || sd[1].written ? MLA_EXIT_FAIL : MLA_EXIT_OK;
    printf("  %-12s %lld written slots %s, every other byte the input cache's: ", o->name,
           (long long)nslots, oracle ? "within the bound of the oracle" : "bit for bit");
    say_side(&sd[0]);
    printf("; ");
    say_side(&sd[1]);
    if (oracle && !rc)
        printf(" (worst %.3g of the bound)", fmax(sd[0].worst, sd[1].worst));
    printf("\n");
    o->judged = 1;
done:
    if (rc && !o->judged)
        replay_say(o, rc, "DIFFERENT: cannot read the call's slots or input cache");
    mla_npy_free(&in);
    mla_npy_free(&sl);
    free(mask);
    free(zero);
    return rc;
}

static int choice(const replay *r, const char *key, const char *const *names, int n)
{
    const char *v = replay_word(r, "--param", key);
    for (int i = 0; v && i < n; ++i)
        if (!strcmp(v, names[i]))
            return i;
    return 0;
}

replay_cache_geom replay_latent_geom(const replay *r, int64_t L, int64_t R)
{
    static const char *const layouts[] = {"normal", "shuffled", "fp8_scaled"};
    replay_cache_geom cg;
    memset(&cg, 0, sizeof cg);
    cg.g.layout = (mla_cache_layout)choice(r, "layout", layouts, 3);
    cg.g.cache_dtype = replay_dtype_param(r, "dtype", MLA_DTYPE_BF16);
    cg.g.block_size = (int64_t)replay_param(r, "block_size", 16);
    cg.g.k_scale = (float)replay_param(r, "k_scale", 1.0);
    cg.g.L = L, cg.g.R = R;
    return cg;
}

replay_cache_geom replay_index_geom(const replay *r, int layer)
{
    static const char *const layouts[] = {"auto", "normal", "shuffle"};
    replay_cache_geom cg;
    memset(&cg, 0, sizeof cg);
    cg.indexer = 1;
    mla_indexer_cache_desc *d = &cg.idx;
    d->dtype = replay_dtype_param(r, layer ? "idx_dtype" : "dtype", MLA_DTYPE_FP8_E4M3FN);
    d->block_size = (int64_t)replay_param(r, "block_size", layer ? 16 : 64);
    d->head_dim = layer ? 128 : (int64_t)replay_param(r, "head_dim", 128);
    d->ue8m0 = (int32_t)replay_param(r, layer ? "idx_ue8m0" : "ue8m0", 1);
    const int lay = choice(r, layer ? "idx_layout" : "layout", layouts, 3);
    d->layout = lay ? (mla_indexer_layout)lay : mla_indexer_layout_for(d->block_size);
    return cg;
}

/* The second dim of an input's file (0 when absent). */
static int64_t width(const replay *r, const char *name)
{
    const char *path = replay_word(r, "--in", name);
    mla_npy a;
    if (!path || replay_load(path, &a))
        return 0;
    const int64_t w = a.ndim >= 2 ? a.shape[a.ndim - 1] : 0;
    mla_npy_free(&a);
    return w;
}

int replay_bit_caches(replay *r)
{
    replay_out *o = replay_find(r, "cache");
    if (!o || (strcmp(r->op, "cache_write") && strcmp(r->op, "rope_cache") &&
               strcmp(r->op, "indexer_k_cache_write")))
        return -1;
    if (!strcmp(r->op, "indexer_k_cache_write")) {
        const replay_cache_geom cg = replay_index_geom(r, 0);
        return replay_cache(r, o, "cache", "slots", &cg, NULL, NULL);
    }
    const replay_cache_geom cg = replay_latent_geom(r, width(r, "k_nope"), width(r, "k_pe"));
    return replay_cache(r, o, "cache", "slots", &cg, NULL, NULL);
}
