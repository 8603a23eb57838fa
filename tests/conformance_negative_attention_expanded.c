/* Controls of the expanded attention's conformance
 * (conformance/cases_attention_expanded.c). Each wrong slot wraps the
 * table's own kernel with one bug a decompressing backend can have, and
 * must FAIL, caught by the bound, on one case of the suite (a few suffice:
 * each bug moves every score or value far past it; conformance_<backend>
 * runs every case of the correct tables):
 * - V decompressed from the W_kc rows of kv_b_proj instead of the W_vc rows;
 * - k_pe not broadcast to the heads (the rope part of every score lost);
 * - the softmax scale left out.
 * The wrappers run on the reference table (host memory). */
#include "core/attention_expanded.h"
#include "tests/conformance_negative.h"

enum { BUG_V_FROM_W_KC, BUG_NO_ROPE_PART, BUG_NO_SCALE };
static int bug;

/* kv_b_proj (bf16) with each head's W_vc rows replaced by its W_kc rows
 * (the cases have nope == v); NULL when the case's weight is not bf16. */
static uint16_t *v_from_w_kc(const mla_attention_expanded_op_args *a, mla_tensor *out)
{
    const int64_t H = a->desc.heads, nope = a->desc.nope, nv = nope + a->desc.v;
    const int64_t L = a->kv_b.shape[1];
    if (a->kv_b.dtype != MLA_DTYPE_BF16 || nope != a->desc.v)
        return NULL;
    uint16_t *w = malloc((size_t)(H * nv * L) * sizeof *w);
    if (!w)
        return NULL;
    for (int64_t r = 0; r < H * nv; ++r) {
        const int64_t src = r % nv < nope ? r : r - nope;
        for (int64_t d = 0; d < L; ++d)
            memcpy(w + r * L + d, neg_at(&a->kv_b, src * a->kv_b.stride[0] + d * a->kv_b.stride[1]),
                   2);
    }
    mla_tensor_init(out, w, MLA_DTYPE_BF16, a->kv_b.memory, 2, (int64_t[]){H * nv, L});
    return w;
}

static mla_status wrong_expanded(mla_context *ctx, const mla_attention_expanded_op_args *a)
{
    mla_attention_expanded_op_args b = *a;
    void *owned = NULL;
    if (bug == BUG_V_FROM_W_KC && !(owned = v_from_w_kc(a, &b.kv_b)))
        return MLA_ERR_OUT_OF_MEMORY;
    if (bug == BUG_NO_ROPE_PART) {
        const size_t es = mla_dtype_size(a->q_pe.dtype);
        if (!(owned = calloc((size_t)mla_tensor_numel(&a->q_pe) + 1, es)))
            return MLA_ERR_OUT_OF_MEMORY;
        mla_tensor_init(&b.q_pe, owned, a->q_pe.dtype, a->q_pe.memory, 3, a->q_pe.shape);
    }
    if (bug == BUG_NO_SCALE)
        b.desc.softmax_scale = 1.0f;
    mla_status st = neg_base->attention_expanded(ctx, &b);
    free(owned);
    return st;
}

void neg_attention_expanded_controls(const mla_backend_ops *from)
{
    if (from != &mla_reference_ops)
        return; /* the wrappers delegate to the table's kernel: once is enough */
    mla_conformance_summary s;
    neg_base = from;
    neg_case = 0; /* chunks after cached tokens, 3 heads, bf16 kv_b_proj */
    int rc = neg_run(from, from->name, "attention_expanded", &s);
    neg_expect(rc == 0 && s.failed == 0 && s.passed > 0,
               "unmodified reference table passes attention_expanded case 0", &s);
    mla_backend_ops t = *from;
    t.attention_expanded = wrong_expanded;
    bug = BUG_V_FROM_W_KC;
    neg_negative(from, &t, "expanded attention decompressing V from the W_kc rows",
                 "attention_expanded", MLA_CONF_FAIL_BOUND);
    bug = BUG_NO_ROPE_PART;
    neg_negative(from, &t, "expanded attention not broadcasting k_pe", "attention_expanded",
                 MLA_CONF_FAIL_BOUND);
    neg_case = 5; /* next_n 2 rows each, an fp8 e4m3fnuz cache */
    bug = BUG_NO_SCALE;
    neg_negative(from, &t, "expanded attention without the softmax scale", "attention_expanded",
                 MLA_CONF_FAIL_BOUND);
    neg_case = -1;
}
