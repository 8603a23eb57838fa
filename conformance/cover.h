/* Variant axes: for each op, the parameters on which a backend may refuse it
 * (the tensors' dtypes and views, the layouts, rules, block size classes,
 * RoPE style, site, kernel paths), each with its legal values, and the
 * API's rules between them. Used twice:
 * - by the case files, to generate cases that cover every pair of values of
 *   every two axes (and the full cross product of the axes so marked) among
 *   the legal combinations (conf_axes_design);
 * - by tests/test_coverage.c, which asks every backend's supports() about
 *   the combinations and fails when one it accepts is not exercised on it
 *   by a case, pairwise (conf_axes_check). The cases' axis values there come
 *   from the variants their entry points really built (conf_recorder), not
 *   from the designs. */
#ifndef MLA_CONFORMANCE_COVER_H
#define MLA_CONFORMANCE_COVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "conformance/conf.h"

#define CONF_MAX_AXES 32
#define CONF_AXIS_VALUES 8

typedef enum conf_axis_kind {
    CONF_AX_DTYPE, /* v.arg_dtype[arg] */
    CONF_AX_VIEW,  /* v.arg_view[arg] (mla_arg_view) */
    CONF_AX_FIELD, /* an int32 field of the variant, one of values[] */
    CONF_AX_CLASS, /* an int32 / int64 field by classes: class i holds values[i] .. values[i+1]-1 */
} conf_axis_kind;

typedef struct conf_axis {
    const char *name;
    conf_axis_kind kind;
    int arg;      /* DTYPE, VIEW */
    size_t field; /* FIELD, CLASS: offsetof(mla_variant, ...) */
    int wide;     /* the field is an int64_t */
    int n;
    int64_t values[CONF_AXIS_VALUES];
    const char *const *names; /* FIELD, CLASS: value names; NULL: numbers */
    /* bit k: value k is refused by some backend by design (topk's k past 2048
     * on HIP): the designs keep it out of the cases that cover the rest */
    unsigned rare;
} conf_axis;

#define CONF_NVALS(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define CONF_AX_DT(nm, a, ...) \
    {.name = nm, .kind = CONF_AX_DTYPE, .arg = a, .n = CONF_NVALS(__VA_ARGS__), .values = {__VA_ARGS__}}
#define CONF_AX_VW(nm, a, ...) \
    {.name = nm, .kind = CONF_AX_VIEW, .arg = a, .n = CONF_NVALS(__VA_ARGS__), .values = {__VA_ARGS__}}
#define CONF_AX_FL(nm, f, nms, ...)                                                              \
    {.name = nm, .kind = CONF_AX_FIELD, .field = offsetof(mla_variant, f), .names = nms,         \
     .n = CONF_NVALS(__VA_ARGS__), .values = {__VA_ARGS__}}
#define CONF_AX_CL(nm, f, wd, nms, ...)                                                          \
    {.name = nm, .kind = CONF_AX_CLASS, .field = offsetof(mla_variant, f), .wide = wd,          \
     .names = nms, .n = CONF_NVALS(__VA_ARGS__), .values = {__VA_ARGS__}}

/* The common value lists. */
#define CONF_FLOATS MLA_DTYPE_F32, MLA_DTYPE_BF16, MLA_DTYPE_F16
#define CONF_FP8S MLA_DTYPE_FP8_E4M3FN, MLA_DTYPE_FP8_E4M3FNUZ
#define CONF_INDEX MLA_DTYPE_I32, MLA_DTYPE_I64
#define CONF_VIEWS MLA_ARG_DENSE, MLA_ARG_ROWS, MLA_ARG_STRIDED
#define CONF_VIEWS_1D MLA_ARG_DENSE, MLA_ARG_STRIDED

/* A combination of axis values, possibly partial. */
typedef struct conf_point {
    int64_t v[CONF_MAX_AXES]; /* axis i's value (not its index) */
    int k[CONF_MAX_AXES];     /* its index in axes[i].values */
    unsigned set;             /* bit i: axis i has a value */
} conf_point;

#define CONF_HAS(p, a) (((p)->set >> (a)) & 1u)
#define CONF_VAL(p, a) ((p)->v[(a)])
/* Both axes set and "cond" false: the rule between them is broken. */
#define CONF_RULE(p, a, b, cond) (!(CONF_HAS(p, a) && CONF_HAS(p, b)) || (cond))

typedef struct conf_op_axes {
    mla_op op;
    const conf_axis *axes;
    int naxes;                      /* view axes last: the searches take their first legal value */
    mla_variant base;               /* the fields no axis sets */
    void (*derive)(mla_variant *v); /* fields that follow from the axes (in_dtype = x's dtype) */
    /* 0 when the values set break one of the API's rules (a partial point:
     * only rules between set axes are judged); NULL: no rules */
    int (*legal)(const conf_point *p);
    unsigned full; /* bit i: axis i is crossed fully with the others so marked */
} conf_op_axes;

/* The latent cache's rules between its layout, element dtype and block size
 * class axes (cases_cache.c): FP8_SCALED stores fp8, SHUFFLED needs whole
 * 16-token tiles. */
int conf_cache_legal(const conf_point *p, int layout, int dtype, int block);

/* The axes of each op (cases_*.c), NULL for none. */
const conf_op_axes *conf_axes_of(mla_op op);

/* A recorded variant's point; -1, or the first axis whose value is not in
 * the table (the table then misses a value the API takes). */
int conf_axes_classify(const conf_op_axes *a, const mla_variant *v, conf_point *p);
/* The variant of a complete point. */
void conf_axes_variant(const conf_op_axes *a, const conf_point *p, mla_variant *v);
/* Names "q_pe.dtype=f32" of axis i's value in p. */
void conf_axes_value_str(const conf_op_axes *a, const conf_point *p, int i, char *buf, size_t len);

/* Decides whether a backend runs a variant (1) or not. */
typedef int (*conf_accept)(void *ctx, const mla_variant *v);

/* Completes p (unset axes) into a legal point that accept takes (NULL: any),
 * searching every value of every non-view axis and taking the first legal
 * value of each view axis; rare values only when allow_rare. 1 when found. */
int conf_axes_complete(const conf_op_axes *a, conf_point *p, int allow_rare, conf_accept accept,
                       void *actx);

/* Points whose cases cover every legal pair of values of every two axes and
 * every legal combination of the full axes; rare values in points of their
 * own. Returns the count (cap bounds what is written). */
int conf_axes_design(const conf_op_axes *a, conf_point *out, int cap);

/* Pushes one case per design point: design(point, its index, case) fills
 * the case's parameters (golden -1 is set before). */
void conf_push_design(conf_builder *b, const conf_op_axes *a,
                      void (*design)(const conf_point *p, int k, conf_case *c));

/* CONF_L_* flags that give a tensor of ndim >= 1 dims (each extent >= 2)
 * the mla_arg_view view (dense, rows, strided); k varies the choice among
 * equivalent ones (an offset start, a transposed or a stepped view). */
unsigned conf_lay_of_view(int64_t view, int32_t ndim, int k);

/* The check: every pair (and full combination) that some point accept
 * takes is in exercised[0..n), which holds the points of the cases that ran
 * on that backend. Prints at most max_msgs problems, naming the backend
 * and, where the cases tie one axis to another, the coupling; returns the
 * number of missing pairs and combinations. */
int conf_axes_check(const conf_op_axes *a, const conf_point *exercised, int n, conf_accept accept,
                    void *actx, const char *backend, FILE *out, int max_msgs);

#endif
