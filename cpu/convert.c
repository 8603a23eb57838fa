/* CPU convert: y = x elementwise, any shape and strides, any dtype pair the
 * API accepts. Each source value is exact in fp32, so a value is loaded into
 * an fp32 buffer and rounded once at the target (as the reference does).
 *
 * The tensors are first reduced to rows: dims of extent 1 are dropped and
 * outer dims whose strides chain into the next one (in both tensors) are
 * merged, so a contiguous tensor of any rank is one long unit-stride row.
 * Rows are cut into tiles, and tiles are spread over the threads. When one
 * side is FP4X2 a row of n values is n / 2 bytes there; tiles start at even
 * values, so a byte never straddles two tiles. In-place conversion (same
 * elements, same width) is safe: each chunk of values is read into the
 * buffer before the same elements are written. */
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"

#define TILE 8192          /* values per task: a multiple of MLA_CPU_CHUNK */
#define STRIDED_ROWS 16    /* strided rows: rows per task */
#define STRIDED_VALUES 256 /* and values per row piece (even) */

/* Rows of the conversion: `rows` rows of n values; row r starts at outer
 * index r of dims [0, nd) (row-major), at element offsets xo / yo. */
typedef struct rows_view {
    int32_t nd;
    int64_t ext[MLA_MAX_DIMS], xs[MLA_MAX_DIMS], ys[MLA_MAX_DIMS]; /* outer dims */
    int64_t n, rows;
    int64_t xl, yl; /* element strides along a row */
} rows_view;

static rows_view make_rows(const mla_tensor *x, const mla_tensor *y)
{
    int xp = x->dtype == MLA_DTYPE_FP4X2;
    int64_t ex[MLA_MAX_DIMS + 1], ey[MLA_MAX_DIMS + 1], sx[MLA_MAX_DIMS + 1], sy[MLA_MAX_DIMS + 1];
    int32_t nd = 0;
    for (int32_t i = 0; i < x->ndim; ++i) {
        if (x->shape[i] == 1 && y->shape[i] == 1)
            continue; /* no extent, any stride */
        ex[nd] = x->shape[i], ey[nd] = y->shape[i];
        sx[nd] = x->stride[i], sy[nd] = y->stride[i];
        ++nd;
    }
    if (nd == 0) { /* a single value */
        ex[0] = ey[0] = 1, sx[0] = sy[0] = 1;
        nd = 1;
    }
    /* Merge dim d into the row (dim nd-1) while, in both tensors, stepping d
     * once is stepping the whole row: stride[d] == stride[row] * extent[row]. */
    while (nd >= 2 && sx[nd - 2] == sx[nd - 1] * ex[nd - 1] &&
           sy[nd - 2] == sy[nd - 1] * ey[nd - 1]) {
        ex[nd - 2] *= ex[nd - 1], ey[nd - 2] *= ey[nd - 1];
        sx[nd - 2] = sx[nd - 1], sy[nd - 2] = sy[nd - 1];
        --nd;
    }
    rows_view v;
    v.nd = nd - 1;
    v.rows = 1;
    for (int32_t i = 0; i < v.nd; ++i) {
        v.ext[i] = ex[i], v.xs[i] = sx[i], v.ys[i] = sy[i];
        v.rows *= ex[i];
    }
    v.n = xp ? 2 * ex[nd - 1] : ex[nd - 1]; /* values: x's bytes hold two */
    v.xl = sx[nd - 1], v.yl = sy[nd - 1];
    return v;
}

/* Element offsets of row r in x and y. */
static void row_offsets(const rows_view *v, int64_t r, int64_t *xo, int64_t *yo)
{
    int64_t ox = 0, oy = 0;
    for (int32_t i = v->nd - 1; i >= 0; --i) {
        int64_t idx = r % v->ext[i];
        r /= v->ext[i];
        ox += idx * v->xs[i], oy += idx * v->ys[i];
    }
    *xo = ox, *yo = oy;
}

/* The hot loop: n values of a row through the fp32 buffer. */
MLA_CPU_INLINE void span_body(const void *x, mla_dtype xt, int64_t xs, void *y, mla_dtype yt,
                              int64_t ys, int64_t n, int saturate)
{
    float buf[MLA_CPU_CHUNK];
    for (int64_t i = 0; i < n; i += MLA_CPU_CHUNK) {
        int64_t c = n - i < MLA_CPU_CHUNK ? n - i : MLA_CPU_CHUNK;
        mla_cpu_load(mla_cpu_row_at(x, xt, xs, i), xt, xs, c, buf);
        mla_cpu_store(buf, (void *)mla_cpu_row_at(y, yt, ys, i), yt, ys, c, saturate);
    }
}

typedef void (*span_fn)(const void *, mla_dtype, int64_t, void *, mla_dtype, int64_t, int64_t,
                        int);

static void span_generic(const void *x, mla_dtype xt, int64_t xs, void *y, mla_dtype yt,
                         int64_t ys, int64_t n, int saturate)
{
    span_body(x, xt, xs, y, yt, ys, n, saturate);
}

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void span_avx2(const void *x, mla_dtype xt, int64_t xs, void *y,
                                      mla_dtype yt, int64_t ys, int64_t n, int saturate)
{
    span_body(x, xt, xs, y, yt, ys, n, saturate);
}

MLA_TARGET_AVX512 static void span_avx512(const void *x, mla_dtype xt, int64_t xs, void *y,
                                          mla_dtype yt, int64_t ys, int64_t n, int saturate)
{
    span_body(x, xt, xs, y, yt, ys, n, saturate);
}
#endif

mla_status mla_cpu_convert(mla_context *ctx, const mla_convert_args *a)
{
    const mla_tensor *x = &a->x, *y = &a->y;
    rows_view v = make_rows(x, y);
    span_fn span = MLA_CPU_PICK(mla_cpu_isa_of(ctx), span);
    /* A task is `rb` consecutive rows times `ct` values. Strided rows (a
     * transposed view) are walked in short pieces, row after row, so the
     * cache lines a piece touches are still there for the next row, which
     * usually sits next to it. */
    int strided = v.xl != 1 || v.yl != 1;
    int64_t rb = strided ? STRIDED_ROWS : 1, ct = strided ? STRIDED_VALUES : TILE;
    int64_t tiles = (v.n + ct - 1) / ct, tasks = (v.rows + rb - 1) / rb * tiles;
    size_t xsz = mla_dtype_size(x->dtype), ysz = mla_dtype_size(y->dtype);
    int xp = x->dtype == MLA_DTYPE_FP4X2, yp = y->dtype == MLA_DTYPE_FP4X2;
    int saturate = a->mode == MLA_SATURATE;
    int nt = mla_cpu_threads(ctx, tasks, v.rows * v.n);
    (void)nt;
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int64_t t = 0; t < tasks; ++t) {
        int64_t r0 = t / tiles * rb, k0 = (t % tiles) * ct;
        int64_t r1 = v.rows - r0 < rb ? v.rows : r0 + rb;
        int64_t n = v.n - k0 < ct ? v.n - k0 : ct;
        for (int64_t r = r0; r < r1; ++r) {
            int64_t xo, yo;
            row_offsets(&v, r, &xo, &yo);
            xo += (xp ? k0 / 2 : k0) * v.xl;
            yo += (yp ? k0 / 2 : k0) * v.yl;
            span((const char *)x->data + xo * (int64_t)xsz, x->dtype, v.xl,
                 (char *)y->data + yo * (int64_t)ysz, y->dtype, v.yl, n, saturate);
        }
    }
    return MLA_OK;
}
