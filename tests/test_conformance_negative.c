/* Negative controls for the conformance harness: backend tables with one
 * deliberately wrong slot must be reported as FAIL, by the comparator that
 * should catch them (bits, class, guard, status), and the unmodified
 * reference and CPU tables must pass. A harness that cannot fail proves
 * nothing; these keep it honest. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/conformance_negative.h"

const mla_backend_ops *neg_base; /* the table the wrong slot was copied from */
int64_t neg_case = -1;           /* the one case of each op neg_run runs; -1: all */
static int passed, failed;

/* ------------------------------------------------------ tensor helpers */

/* Byte address of the element with row-major linear index i. */
static unsigned char *elem(const mla_tensor *t, int64_t i)
{
    int64_t off = 0;
    for (int32_t d = t->ndim - 1; d >= 0; --d) {
        off += (i % t->shape[d]) * t->stride[d];
        i /= t->shape[d];
    }
    return (unsigned char *)t->data + off * (int64_t)mla_dtype_size(t->dtype);
}

static int64_t numel(const mla_tensor *t) { return mla_tensor_numel(t); }

static float load_float(const mla_tensor *t, int64_t i)
{
    return neg_load_bytes(elem(t, i), t->dtype);
}

static int is_fp8(mla_dtype d) { return d == MLA_DTYPE_FP8_E4M3FN || d == MLA_DTYPE_FP8_E4M3FNUZ; }

/* ------------------------------------------------------ wrong kernels */

/* bits: f32 -> fp8 rounding toward zero instead of to nearest even. */
static mla_status convert_rtz(mla_context *ctx, const mla_convert_args *a)
{
    if (a->x.dtype != MLA_DTYPE_F32 || !is_fp8(a->y.dtype))
        return neg_base->convert(ctx, a);
    for (int64_t i = 0; i < numel(&a->x); ++i) {
        float x = load_float(&a->x, i);
        uint8_t c = mla_f32_to_fp8(x, a->y.dtype, a->mode);
        float v = mla_fp8_to_f32(c, a->y.dtype);
        if (isfinite(x) && !isnan(v) && fabsf(v) > fabsf(x) && (c & 0x7F)) {
            c = (uint8_t)((c & 0x80) | ((c & 0x7F) - 1)); /* one code toward zero */
            if (a->y.dtype == MLA_DTYPE_FP8_E4M3FNUZ && c == 0x80)
                c = 0; /* 0x80 is fnuz's NaN; zero has no sign there */
        }
        *elem(&a->y, i) = c;
    }
    return MLA_OK;
}

/* bits: MXFP4 production rule without the mantissa round-up (= the OCP rule). */
static mla_status mxfp4_no_roundup(mla_context *ctx, const mla_mxfp4_quant_args *a)
{
    mla_mxfp4_quant_args b = *a;
    b.rule = MLA_MXFP4_OCP;
    return neg_base->mxfp4_quant(ctx, &b);
}

/* bits: fp8 group quant multiplying by the scale instead of its inverse. */
static mla_status fp8_group_not_inverted(mla_context *ctx, const mla_fp8_group_quant_args *a)
{
    mla_status st = neg_base->fp8_group_quant(ctx, a);
    if (st != MLA_OK)
        return st;
    for (int64_t m = 0; m < a->M; ++m)
        for (int64_t k = 0; k < a->K; ++k) {
            float s;
            memcpy(&s, (const unsigned char *)a->scales.data +
                           4 * (m * a->scales.stride[0] + (k / a->group) * a->scales.stride[1]),
                   4);
            float x = load_float(&a->x, m * a->K + k);
            *elem(&a->codes, m * a->K + k) = mla_f32_to_fp8(x * s, a->codes.dtype, MLA_SATURATE);
        }
    return MLA_OK;
}

/* bits (or guard): treats every tensor as contiguous row-major. */
static mla_status convert_ignores_strides(mla_context *ctx, const mla_convert_args *a)
{
    mla_convert_args b = *a;
    mla_tensor_init(&b.x, a->x.data, a->x.dtype, a->x.memory, a->x.ndim, a->x.shape);
    mla_tensor_init(&b.y, a->y.data, a->y.dtype, a->y.memory, a->y.ndim, a->y.shape);
    return neg_base->convert(ctx, &b);
}

/* class: loses the sign of zero (-0 written as +0). */
static mla_status convert_no_negative_zero(mla_context *ctx, const mla_convert_args *a)
{
    mla_status st = neg_base->convert(ctx, a);
    size_t es = mla_dtype_size(a->y.dtype);
    for (int64_t i = 0; st == MLA_OK && i < numel(&a->y); ++i) {
        unsigned char *p = elem(&a->y, i);
        if (a->y.dtype == MLA_DTYPE_FP4X2) {
            if ((*p & 0x0F) == 0x08)
                *p &= 0xF0;
            if ((*p & 0xF0) == 0x80)
                *p &= 0x0F;
            continue;
        }
        unsigned char neg0[4] = {0, 0, 0, 0};
        neg0[es - 1] = 0x80; /* little-endian: the sign bit is in the last byte */
        if (a->y.dtype != MLA_DTYPE_FP8_E4M3FNUZ && !memcmp(p, neg0, es))
            p[es - 1] = 0;
    }
    return st;
}

/* guard: writes one element past the last element of its output. */
static mla_status convert_writes_past_end(mla_context *ctx, const mla_convert_args *a)
{
    mla_status st = neg_base->convert(ctx, a);
    int64_t n = numel(&a->y);
    if (st == MLA_OK && n > 0) {
        size_t es = mla_dtype_size(a->y.dtype);
        unsigned char *past = elem(&a->y, n - 1) + es;
        for (size_t b = 0; b < es; ++b)
            past[b] = (unsigned char)~past[b]; /* surely not what was there */
    }
    return st;
}

/* status: says it supports the op, then refuses it. */
static mla_status dequant_refuses(mla_context *ctx, const mla_fp8_group_dequant_args *a)
{
    (void)a;
    return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "group", "changed its mind");
}

/* not a failure: refuses every group but 128 in supports(). */
static const char *supports_group128_only(const mla_context *ctx, const mla_variant *v)
{
    if ((v->op == MLA_OP_FP8_GROUP_QUANT || v->op == MLA_OP_FP8_GROUP_DEQUANT) && v->group != 128)
        return "group";
    return neg_base->supports(ctx, v);
}

/* ------------------------------------------------------------ driver */

/* The controls run the listed cases (the pairwise designs, which add
 * combinations rather than comparator paths, are the conformance tests'
 * business); a correct slot that rounds differently runs them all. */
static int run_suite(const mla_backend_ops *ops, const char *label, const char *op_pattern,
                     mla_conformance_suite suite, mla_conformance_summary *sum)
{
    mla_conformance_options opt;
    mla_conformance_options_init(&opt);
    opt.op_pattern = op_pattern;
    opt.case_id = neg_case;
    opt.suite = suite;
    /* MLA_NEGATIVE_LOG=1 shows the harness's report of every run */
    const char *show = getenv("MLA_NEGATIVE_LOG");
    FILE *log = show && *show == '1' ? NULL : tmpfile();
    int rc = mla_conformance_run_ops(&opt, ops, label, log ? log : stdout, sum);
    if (log)
        fclose(log);
    return rc;
}

int neg_run(const mla_backend_ops *ops, const char *label, const char *op_pattern,
            mla_conformance_summary *sum)
{
    return run_suite(ops, label, op_pattern, MLA_CONF_SUITE_LISTED, sum);
}

void neg_expect(int ok, const char *what, const mla_conformance_summary *s)
{
    printf("%s %s (%d passed, %d failed, %d unsupported; bits %d class %d guard %d status %d "
           "bound %d)\n",
           ok ? "ok  " : "FAIL", what, s->passed, s->failed, s->unsupported,
           s->by_kind[MLA_CONF_FAIL_BITS], s->by_kind[MLA_CONF_FAIL_CLASS],
           s->by_kind[MLA_CONF_FAIL_GUARD], s->by_kind[MLA_CONF_FAIL_STATUS],
           s->by_kind[MLA_CONF_FAIL_BOUND]);
    if (ok)
        passed++;
    else
        failed++;
}

/* One wrong slot must fail, and be caught by `kind`. */
void neg_negative(const mla_backend_ops *from, mla_backend_ops *t, const char *label,
                  const char *op, mla_conformance_failure kind)
{
    mla_conformance_summary s;
    neg_base = from;
    int rc = neg_run(t, label, op, &s);
    char what[160];
    snprintf(what, sizeof what, "%s on %s is caught by %s", label, from->name,
             mla_conformance_failure_name(kind));
    neg_expect(rc == 1 && s.failed > 0 && s.by_kind[kind] > 0, what, &s);
}

/* A correct slot that rounds differently (fp32, another order) must pass. */
void neg_positive(const mla_backend_ops *from, mla_backend_ops *t, const char *label,
                  const char *op)
{
    mla_conformance_summary s;
    neg_base = from;
    int rc = run_suite(t, label, op, MLA_CONF_SUITE_ALL, &s);
    char what[160];
    snprintf(what, sizeof what, "%s on %s passes", label, from->name);
    neg_expect(rc == 0 && s.failed == 0 && s.passed > 0, what, &s);
}

int main(void)
{
    const mla_backend_ops *tables[] = {&mla_reference_ops, mla_cpu_ops()};
    /* every op but the expanded attention, whose controls run on a few of
     * its cases (conformance_<backend> runs all of them) */
    char all_but_expanded[1024] = "";
    for (int op = 0; op < MLA_OP_COUNT; ++op)
        if (op != MLA_OP_ATTENTION_EXPANDED)
            snprintf(all_but_expanded + strlen(all_but_expanded),
                     sizeof all_but_expanded - strlen(all_but_expanded), "%s%s", op ? "," : "",
                     mla_op_name((mla_op)op));
    for (int ti = 0; ti < 2; ++ti) {
        const mla_backend_ops *from = tables[ti];
        mla_conformance_summary s;
        char what[160];
        neg_base = from;
        snprintf(what, sizeof what, "unmodified %s table passes", from->name);
        int rc = neg_run(from, from->name, all_but_expanded, &s);
        neg_expect(rc == 0 && s.failed == 0 && s.passed > 0, what, &s);

        mla_backend_ops t = *from;
        t.convert = convert_rtz;
        neg_negative(from, &t, "fp8 convert rounding toward zero", "convert", MLA_CONF_FAIL_BITS);
        t = *from;
        t.mxfp4_quant = mxfp4_no_roundup;
        neg_negative(from, &t, "mxfp4 quant without the round-up", "mxfp4_quant",
                     MLA_CONF_FAIL_BITS);
        t = *from;
        t.fp8_group_quant = fp8_group_not_inverted;
        neg_negative(from, &t, "fp8 group quant with the scale not inverted", "fp8_group_quant",
                     MLA_CONF_FAIL_BITS);
        t = *from;
        t.convert = convert_ignores_strides;
        neg_negative(from, &t, "convert ignoring strides", "convert", MLA_CONF_FAIL_BITS);
        t = *from;
        t.convert = convert_no_negative_zero;
        neg_negative(from, &t, "convert losing the sign of zero", "convert", MLA_CONF_FAIL_CLASS);
        t = *from;
        t.convert = convert_writes_past_end;
        neg_negative(from, &t, "convert writing one element past the output", "convert",
                     MLA_CONF_FAIL_GUARD);
        t = *from;
        t.fp8_group_dequant = dequant_refuses;
        neg_negative(from, &t, "dequant failing after supports() said yes", "fp8_group_dequant",
                     MLA_CONF_FAIL_STATUS);

        t = *from;
        t.supports = supports_group128_only;
        rc = neg_run(&t, "group128 only", "fp8_group_*", &s);
        snprintf(what, sizeof what, "%s refusing group 32 reports unsupported, not FAIL",
                 from->name);
        neg_expect(rc == 0 && s.failed == 0 && s.unsupported > 0 && s.passed > 0, what, &s);

        neg_prepare_controls(from);
        neg_positive_controls(from);
        neg_mxfp4_controls(from);
        neg_indexer_controls(from);
        neg_attention_controls(from);
        neg_attention_expanded_controls(from);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
