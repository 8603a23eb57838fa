/* Reference top-k of the DSA indexer (MLA.md section 6): per row r, the
 * indices of the m = min(k, len) largest of logits[r, 0:len] (len =
 * lengths[r]), in ascending index order, padded with -1 to k.
 *
 * The rank order is total, so the chosen set is unique:
 * - ties go to the lower index (a choice of this library, section 8); +0 and
 *   -0 are equal and tie;
 * - -inf is an ordinary value (a candidate below every finite one);
 * - NaN ranks below every number, -inf included; NaNs among themselves by
 *   index. So a NaN is only chosen when fewer than k numbers are left.
 * The set is written in index order (a choice of this library: the anchors'
 * kernels promise no order; this one needs no sort of the set on a device,
 * and the sparse attention reads the cache in page order). */
#include <stdlib.h>

#include "core/checked.h"
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

typedef struct entry {
    float v;
    int64_t i;
} entry;

/* a before b: the larger number first, NaN last, then the lower index. */
static int rank_order(const void *pa, const void *pb)
{
    const entry *a = pa, *b = pb;
    const int na = isnan(a->v), nb = isnan(b->v);
    if (na != nb)
        return na - nb;
    if (!na && a->v != b->v)
        return a->v > b->v ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

static int by_index(const void *pa, const void *pb)
{
    const entry *a = pa, *b = pb;
    return (a->i > b->i) - (a->i < b->i);
}

mla_status mla_ref_topk(mla_context *ctx, const mla_topk_args *a)
{
    const int64_t R = a->logits.shape[0];
    /* a row's candidates: its length (validated <= the row, I32), not the
     * row, which a broadcast view can make longer than memory */
    int64_t longest = 0;
    for (int64_t r = 0; r < R; ++r) {
        const int64_t len = mla_ref_load_index(&a->lengths, r * a->lengths.stride[0]);
        longest = len > longest ? len : longest;
    }
    entry *e;
    MLA_TRY(mla_alloc_array(ctx, (void **)&e, longest, 1, sizeof *e, "lengths"));
    for (int64_t r = 0; r < R; ++r) {
        const int64_t len = mla_ref_load_index(&a->lengths, r * a->lengths.stride[0]);
        for (int64_t n = 0; n < len; ++n)
            e[n] = (entry){((const float *)a->logits.data)[mla_ref_offset2(&a->logits, r, n)], n};
        qsort(e, (size_t)len, sizeof *e, rank_order);
        const int64_t m = a->k < len ? a->k : len;
        qsort(e, (size_t)m, sizeof *e, by_index);
        for (int64_t c = 0; c < a->k; ++c)
            ((int32_t *)a->indices.data)[mla_ref_offset2(&a->indices, r, c)] =
                c < m ? (int32_t)e[c].i : -1;
    }
    free(e);
    return MLA_OK;
}
