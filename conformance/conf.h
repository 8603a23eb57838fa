/* Internal types of the conformance harness, shared by the harness, the
 * comparators, the generator and the per-op case files (cases_*.c). */
#ifndef MLA_CONFORMANCE_CONF_H
#define MLA_CONFORMANCE_CONF_H

#include <stddef.h>
#include <stdint.h>

#include "conformance/case_params.h"
#include "conformance/conformance.h"
#include "core/backend.h"

#define CONF_MAX_ARGS 16 /* the fused RoPE + cache op has 12 */
#define CONF_GUARD_BYTES 256 /* keeps the view 256-aligned unless a case offsets it */

/* --------------------------------------------------------------- views */

/* How a case lays an argument out in memory; flags combine. The logical
 * content never depends on the layout, only the addresses do. */
enum {
    CONF_L_CONTIG = 0,
    CONF_L_PAD = 1u << 0,      /* a 3-element gap after every innermost run */
    CONF_L_STEP2 = 1u << 1,    /* the fastest dim has stride 2 (gaps between elements) */
    CONF_L_COLMAJOR = 1u << 2, /* dims laid out in reverse order (a transposed buffer) */
    CONF_L_OFFSET = 1u << 3,   /* the view starts one element into its buffer (misaligned) */
};

/* "contig", or the flags joined by '+': "pad+step2"; and back (0: not a layout). */
void conf_layout_str(unsigned lay, char *buf, size_t len);
int conf_layout_parse(const char *s, unsigned *lay);

/* Row-major iteration over a view: off is the element offset of each
 * logical index in turn. */
typedef struct conf_iter {
    int32_t ndim;
    int64_t shape[MLA_MAX_DIMS], stride[MLA_MAX_DIMS], idx[MLA_MAX_DIMS];
    int64_t off, left;
} conf_iter;

void conf_iter_init(conf_iter *it, const mla_tensor *t);
int conf_iter_next(conf_iter *it, int64_t *off);
/* Formats the current logical index ("[3, 17]") of element number i. */
void conf_index_str(const mla_tensor *t, int64_t i, char *buf, size_t len);

/* ------------------------------------------------------------- bounds */

/* How an output is compared once bits and class have been checked.
 * Every op of the number-format family is bit-defined: CONF_BOUND_EXACT.
 * A later op declares its bound where it builds its cases, with the
 * derivation next to it, e.g. for an fp32 dot product of length K with a
 * free summation order: |err| <= gamma_K * sum|a_i b_i|, gamma_K = K u / (1 - K u),
 * u = 2^-24, which as a normwise bound gives CONF_BOUND_NMSE with
 * limit (K u)^2 for well-scaled inputs. */
typedef enum conf_bound_kind {
    CONF_BOUND_EXACT = 0, /* bits must match (after the NaN rule below) */
    CONF_BOUND_ULP = 1,   /* per element, distance in units of the dtype's last place */
    CONF_BOUND_REL = 2,   /* per element, |got - want| / max(|want|, floor) */
    CONF_BOUND_NMSE = 3,  /* whole tensor, sum (got - want)^2 / sum want^2 */
    /* per value: |got - want| <= tol[k] + limit * ulp(dtype, max(|got|, |want|)), with
     * tol[k] the arithmetic error the case derived from its inputs (conformance/bounds.c)
     * and limit the output roundings (1: half an ulp on each side). Zero and finite are
     * one class here (cancellation may give either); NaN and Inf classes stay strict. */
    CONF_BOUND_TOL = 4,
} conf_bound_kind;

typedef struct conf_bound {
    conf_bound_kind kind;
    double limit;   /* ulps, relative error or NMSE */
    double floor;   /* CONF_BOUND_REL: denominator floor */
    int nan_any;    /* any NaN encoding matches any other (golden e4m3fn encode) */
    int zero_sign_free; /* +0 and -0 match (ops whose summation order may flip it) */
    int raw;        /* bytes compared as plain integers, no class (cache bytes) */
    const double *tol; /* CONF_BOUND_TOL: per logical value, owned by the problem */
} conf_bound;

/* ---------------------------------------------------------- problems */

/* Argument roles for conf_add_arg*: an input, an output (filled with a salted
 * pattern before the run), or an in/out argument (its host contents are copied
 * in, like an input; afterwards it is compared like an output, and its bytes
 * outside the view must still hold the host contents). In place ops and the
 * latent cache are in/out. */
enum { CONF_IN = 0, CONF_OUT = 1, CONF_INOUT = 2 };

typedef struct conf_arg {
    const char *name;
    int output;           /* CONF_OUT and CONF_INOUT */
    int inout;
    mla_tensor t;         /* dtype, ndim, shape, stride; data unused */
    int64_t offset;       /* elements from the buffer start to element 0 */
    size_t bytes;         /* buffer bytes, gaps included */
    unsigned char *host;  /* inputs: the buffer (gaps poisoned) */
    conf_bound bound;     /* outputs */
    const unsigned char *golden; /* outputs of golden cases: contiguous expected bytes */
} conf_arg;

typedef struct conf_problem {
    conf_arg arg[CONF_MAX_ARGS];
    int nargs;
    void *owned[3 * CONF_MAX_ARGS]; /* freed with the problem (golden arrays, tolerances) */
    int nowned;
} conf_problem;

typedef struct conf_suite conf_suite;

typedef struct conf_case {
    const conf_suite *suite; /* set by conf_push and conf_parse */
    conf_params p;           /* the op's named parameters (case_params.h) */
    uint64_t seed;
    int golden;                   /* index into the op's golden table; -1 = generated */
    char label[64];               /* the table row: the suite's label() of p, then note */
    const char *note;             /* what a listed case is for ("odd D"); not a parameter */
    int designed;                 /* one of the op's pairwise designs (conf_push_design) */
} conf_case;

/* ------------------------------------------------------ descriptions */

/* How one parameter prints and parses. */
typedef enum conf_field_kind {
    CONF_F_I64,   /* int64_t */
    CONF_F_I32,   /* int32_t (switches, counts) */
    CONF_F_REAL,  /* double */
    CONF_F_DTYPE, /* mla_dtype: its name, "none" for MLA_DTYPE_COUNT */
    CONF_F_ENUM,  /* int32_t named by name(value), values 0 .. count-1 */
    CONF_F_LAY,   /* unsigned CONF_L_* flags: "contig", "pad+step2" */
    CONF_F_SHAPE, /* conf_shape: "7x66" */
} conf_field_kind;

typedef struct conf_field {
    const char *name;
    conf_field_kind kind;
    size_t offset; /* in conf_params */
    const char *(*enum_name)(int value);
    int count;
} conf_field;

/* Field f of the union member u (the op's struct), named f. */
#define CONF_FIELD(u, f, kind) {#f, kind, offsetof(conf_params, u.f), NULL, 0}
#define CONF_ENUM(u, f, fn, n) {#f, CONF_F_ENUM, offsetof(conf_params, u.f), fn, n}
#define CONF_NFIELDS(table) ((int)(sizeof(table) / sizeof((table)[0])))

/* Names of the library's enums, for CONF_ENUM. */
const char *conf_name_saturation(int v);
const char *conf_name_scale_layout(int v);
const char *conf_name_mxfp4_rule(int v);
const char *conf_name_fp8_rule(int v);
const char *conf_name_rope_style(int v);
const char *conf_name_cache_layout(int v);
const char *conf_name_indexer_layout(int v);
const char *conf_name_dist(int v);

typedef struct conf_cmp conf_cmp; /* one output's comparison (below) */

typedef struct conf_env {
    const char *data_dir;
    int golden_required; /* missing data is a failure, not a skip */
} conf_env;

/* An op's cases. build lists them (returns the count; cases may be NULL to
 * count); label names a case's table row from its parameters; setup fills
 * a problem; exec calls the public API on ctx with the problem's views
 * (t[i] mirrors arg[i], data in context memory). */
struct conf_suite {
    const char *name;
    mla_op op;
    int (*build)(conf_case *cases, int cap);
    mla_status (*setup)(const conf_case *c, const conf_env *env, conf_problem *p, char *err,
                        size_t errlen);
    mla_status (*exec)(mla_context *ctx, const conf_case *c, mla_tensor *t);
    /* Optional: judges output i itself and returns 1 (outputs that are only
     * meaningful together, like quantized codes and their scales), or returns
     * 0 for the generic conf_compare. got and want are whole buffers. Used
     * against the reference only: a repeat run is always compared bit for bit. */
    int (*compare)(const conf_case *c, const conf_problem *p, int i, unsigned char *const *got,
                   unsigned char *const *want, conf_cmp *r);
    void (*label)(conf_case *c);
    const conf_field *fields; /* the parameters a case of this suite has */
    int nfields;
};

/* Case lists: build functions push into (cases, cap), counting past cap
 * (cases NULL = count only). conf_push sets the label and the seed, a hash
 * of the case's parameters (conf_case_seed): a case's data never depends on
 * the cases listed before it. */
typedef struct conf_builder {
    conf_case *cases;
    int cap, n;
    const conf_suite *suite;
} conf_builder;

void conf_push(conf_builder *b, conf_case *c);

/* "rope_cache layout=shuffled dtype=fp8_e4m3fn ... seed=0x..." (+ " golden=N"):
 * every parameter of the case by name, enough to rebuild it (conf_parse). */
void conf_describe(const conf_suite *s, const conf_case *c, char *buf, size_t len);
/* The seed of a case: a hash of its suite, parameters and golden index. */
uint64_t conf_case_seed(const conf_suite *s, const conf_case *c);
/* The case a description names: *suite among suites, *c with every
 * parameter, the seed and the label. MLA_ERR_INVALID_ARGUMENT with err
 * filled when a suite, parameter or value is unknown or one is missing. */
mla_status conf_parse(const char *text, const conf_suite *const *suites, int nsuites,
                      const conf_suite **suite, conf_case *c, char *err, size_t errlen);

extern const conf_suite conf_suite_convert;
extern const conf_suite conf_suite_mxfp4_quant;
extern const conf_suite conf_suite_mxfp4_dequant;
extern const conf_suite conf_suite_fp8_group_quant;
extern const conf_suite conf_suite_fp8_group_dequant;
extern const conf_suite conf_suite_rmsnorm;
extern const conf_suite conf_suite_qk_rmsnorm;
extern const conf_suite conf_suite_rope;
extern const conf_suite conf_suite_linear;
extern const conf_suite conf_suite_batched_gemm;
extern const conf_suite conf_suite_cache_write;
extern const conf_suite conf_suite_cache_gather;
extern const conf_suite conf_suite_rope_cache;
extern const conf_suite conf_suite_gemm_a16wfp4;
extern const conf_suite conf_suite_gemm_a4w4;
extern const conf_suite conf_suite_flatten_mxfp4_quant;
extern const conf_suite conf_suite_flatten_fp8_quant;
extern const conf_suite conf_suite_layernorm;
extern const conf_suite conf_suite_hadamard;
extern const conf_suite conf_suite_indexer_k_cache_write;
extern const conf_suite conf_suite_indexer_k_gather;
extern const conf_suite conf_suite_indexer_k_roundtrip;
extern const conf_suite conf_suite_indexer_rope_k_cache;
extern const conf_suite conf_suite_indexer_logits;
extern const conf_suite conf_suite_indexer_search;
extern const conf_suite conf_suite_topk;
extern const conf_suite conf_suite_indexer_head_weights;
extern const conf_suite conf_suite_attention;
extern const conf_suite conf_suite_attention_expanded;

/* Adds an argument with the given logical shape and layout; inputs get a
 * buffer filled with poison (so a kernel that reads a gap sees NaNs). */
mla_status conf_add_arg(conf_problem *p, const char *name, int output, mla_dtype dtype,
                        int32_t ndim, const int64_t *shape, unsigned lay);
/* Like conf_add_arg with explicit strides (scale tensors whose layout the op fixes). */
mla_status conf_add_arg_strided(conf_problem *p, const char *name, int output, mla_dtype dtype,
                                int32_t ndim, const int64_t *shape, const int64_t *stride,
                                unsigned lay);
/* A view at element offset `offset` of a buffer that ends with the view's
 * last element: q_pe inside q, W_kc inside kv_b_proj, a [H, T, L] view of a
 * [T, H, L] buffer. The rest of the buffer is gap (poison, or checked). */
mla_status conf_add_view(conf_problem *p, const char *name, int role, mla_dtype dtype,
                         int32_t ndim, const int64_t *shape, const int64_t *stride,
                         int64_t offset);
/* Allocates the per-value tolerance array of output i (owned by p, zeroed)
 * and sets its bound to CONF_BOUND_TOL with `ulps` output roundings. */
double *conf_tol_alloc(conf_problem *p, int i, double ulps);
/* Host address of logical element k of a view whose element 0 is at elem0. */
unsigned char *conf_elem_at(const conf_arg *a, unsigned char *elem0, int64_t k);
/* Value of logical element k of an input (floats, fp8, e8m0, integers). */
double conf_in_value(const conf_arg *a, int64_t k);
/* Stores v into logical element k of an input: integer dtypes exactly, floats
 * rounded by the generator's encoder. */
void conf_set_value(conf_problem *p, int i, int64_t k, double v);
/* Number of logical elements of argument i. */
int64_t conf_numel(const conf_arg *a);
/* Loads <data_dir>/<file> as the golden expectation of output arg i, or as
 * the contents of input arg i; checks element count and width. */
mla_status conf_golden_output(conf_problem *p, int i, const conf_env *env, const char *file,
                              char *err, size_t errlen);
mla_status conf_golden_input(conf_problem *p, int i, const conf_env *env, const char *file,
                             char *err, size_t errlen);
void conf_problem_free(conf_problem *p);
/* Pointer to element 0 of an input's host buffer, and the view for
 * writing it with conf_iter. */
unsigned char *conf_arg_elem0(const conf_arg *a);

/* --------------------------------------------------------- generator */

enum {
    CONF_DIST_EDGE = 0,     /* element-wise mix: ties, huge, tiny, subnormal, NaN, Inf, -0 */
    CONF_DIST_BLOCKS = 1,   /* per-block scales, zero / tiny / huge / boundary blocks, no NaN/Inf */
    CONF_DIST_SPECIALS = 2, /* CONF_DIST_BLOCKS with NaN / Inf sprinkled into some blocks */
    CONF_DIST_CODES = 3,    /* narrow codes: every code once, then uniform bytes */
    CONF_DIST_SCALES = 4,   /* scale inputs: plausible magnitudes plus extremes */
    CONF_DIST_SCALES_SPECIALS = 5, /* the same with NaN / Inf scales */
    /* activations and weights of the prepare path, per row (block = row
     * length): ordinary rows, tiny rows (where eps matters), rows with an
     * outlier, zero rows, rows on the bf16 grid; finite, |x| < 2^24 */
    CONF_DIST_ACT = 6,
    CONF_DIST_ACT_SPECIALS = 7, /* the same with NaN, Inf and -0 sprinkled */
    CONF_DIST_CODES_FINITE = 8, /* fp8 codes without the NaN codes */
    CONF_DIST_ACT_NARROW = 9,   /* rows spanning 3 binades (inputs of 4-bit quantizers) */
    CONF_DIST_NORM_WEIGHT = 10, /* RMSNorm weights: |w| in 2^-3 .. 2^1, a few negative */
    CONF_DIST_COUNT
};

const char *conf_dist_name(int dist);
/* splitmix64's output function: a counter-based RNG when fed seed + counter. */
uint64_t conf_mix64(uint64_t x);
/* The r-th 64-bit draw for element i of a stream: depends only on
 * (seed, stream, i, r), never on thread count or order. */
uint64_t conf_rng(uint64_t seed, uint64_t stream, uint64_t i, unsigned r);
/* Fills input arg i's elements in logical order. block is the quantization
 * block along the last dim for CONF_DIST_BLOCKS / SPECIALS (32, group). */
void conf_fill(conf_problem *p, int i, int dist, uint64_t seed, int64_t block);
/* Slots [T] (I32 / I64) of distinct cache slots below capacity, the last
 * slot first; with negatives, every sixth token is skipped (slot < 0). */
void conf_fill_slots(conf_problem *p, int i, int64_t capacity, uint64_t seed, int negatives);
/* The attention cases' paging: phys [nb] a seeded permutation of the cache's
 * nb blocks and, when i >= 0, block table arg i [S, max_blocks] with row s
 * phys[first[s] + b] for its used[s] blocks b, -1 past them. */
/* A code of moderate magnitude: bf16, e4m3fn or e4m3fnuz with |v| in
 * [2^-3, 2), random sign (r: random bits). */
uint64_t conf_moderate_code(mla_dtype dt, uint64_t r);
/* v's low bytes, little-endian. */
void conf_put_bits(unsigned char *p, uint64_t v, int bytes);
/* The cache argument i as a writer leaves every block (MLA.md section 4):
 * NORMAL and SHUFFLED blocks all moderate value codes; an FP8_SCALED token
 * L codes, L / 128 fp32 scales 2^-2 .. 2^0, R bf16 values. */
void conf_fill_cache_written(conf_problem *p, int i, uint64_t seed, mla_cache_layout layout,
                             mla_dtype dt, int64_t block_size, int64_t L, int64_t R);
void conf_fill_block_table(conf_problem *p, int i, uint64_t seed, int64_t nb, int64_t S,
                           int64_t max_blocks, const int64_t *used, const int64_t *first,
                           int64_t *phys);
/* Fills an input with value = f(logical index) bytes: codes 0..n-1 (decoding golden cases). */
void conf_fill_iota(conf_problem *p, int i);

/* --------------------------------------------------------- comparing */

struct conf_cmp {
    int64_t count;       /* values compared (fp4x2: two per byte) */
    int64_t mismatches;  /* values outside the bound */
    int64_t class_bad;   /* of which the class differs */
    int64_t zeros;       /* expected values that are zero (MISTRUSTED) */
    double max_err;      /* among same-class mismatches, in unit */
    const char *unit;
    char first[160];     /* the first mismatch, readable */
};

/* Compares got (a view at the problem's layout) with want (the same layout
 * or, when want_contig, contiguous row-major) value by value. */
void conf_compare(const conf_arg *a, const unsigned char *got, const unsigned char *want,
                  int want_contig, conf_cmp *r);
/* The comparators' own decoder (MLA.md section 5, not the library's): the
 * value of bits of dtype (floats, fp8, fp4 nibble, e8m0, integers). */
double conf_decode_value(mla_dtype dt, uint64_t bits);
/* Little-endian load of es bytes. */
uint64_t conf_load_bits(const unsigned char *p, size_t es);
/* The spacing of dtype's values at magnitude m (F32, F16, BF16, F64). */
double conf_ulp(mla_dtype dt, double m);

/* ------------------------------------------------ bounds (bounds.c) */

/* Allowed |got - want| of an fp32-accumulated GEMM value of K terms whose
 * scaled sum of |x_k||w_k| is S, before the output roundings. */
double conf_gemm_tol(int64_t K, double S);
/* Relative error bound of an fp32 RMSNorm of rows of D values, against exact. */
double conf_norm_rel(int64_t D);
/* RMSNorm of input args ix (x [T, D]) and iw (w [D]) in float64 into y [T * D]. */
void conf_rmsnorm_exact(const conf_problem *p, int ix, int iw, double eps, double *y);
/* One (row, head) of an attention, as the bound sees it: the n visible keys
 * (a key listed twice counts twice) with their exact scores, their
 * magnitudes scale * sum_d |q_d k_d| over the D = L + R dims, their value
 * rows (L values), and the sink logit if any. */
typedef struct conf_attn_row {
    int64_t n, D, L;
    double *score, *mag;
    const double **v;
    int has_sink;
    double sink;
    /* Optional (NULL: none), for keys and values that are themselves computed
     * (the expanded form's decompression): each score's own error bound
     * from its inputs' errors, and each value row's (L values). */
    const double *score_err;
    const double *const *v_err;
} conf_attn_row;
/* Allowed |got - want| of o[row, h, 0..L) (tol_o) and of lse[row, h]
 * (*tol_lse) before the output roundings (see bounds.c); 0 when n == 0. */
void conf_attention_tol(const conf_attn_row *row, double *tol_o, double *tol_lse);

/* The attention suite's arguments (cases_attention.c), in this order
 * (absent ones are empty placeholders); the same problem built from a
 * dump's files (mla op --replay) gets the same bound. */
enum {
    CONF_AT_Q,
    CONF_AT_CACHE,
    CONF_AT_TABLE,
    CONF_AT_CONTEXT,
    CONF_AT_CU,
    CONF_AT_TOPK,
    CONF_AT_SINKS,
    CONF_AT_O,
    CONF_AT_LSE,
    CONF_AT_COS,
    CONF_AT_SIN,
    CONF_AT_QPOS
};
/* An attention call as its bound sees it: S sequences of ctx[s] keys whose
 * rows are cu[s] .. cu[s + 1] - 1 (row j of n at position ctx - n + j),
 * the cache's layout, the descriptor's scales, top-k width (0: dense). */
typedef struct conf_attn_geom {
    int64_t S, H, L, R, block_size, max_blocks, topk;
    const int64_t *ctx, *cu;
    mla_cache_layout layout;
    mla_dtype cache_dtype;
    double k_scale, q_scale, softmax_scale;
    int contiguous, rope, sinks; /* contiguous: sequence s reads block s */
    mla_rope_style style;        /* rope inside attention */
} conf_attn_geom;
/* tol_o [T, H, L] and tol_lse [T, H] of the problem's o and lse
 * (conf_attention_tol per row and head), the keys read from `cache` (the
 * cache argument's bytes, block stride its stride[0]). */
mla_status conf_attention_tols(const conf_problem *p, const conf_attn_geom *g,
                               const unsigned char *cache, double *tol_o, double *tol_lse);
/* Element d of token t of a latent cache block (MLA.md section 4): its byte
 * offset in the block and *dt its dtype. d < L + R are the key's dims;
 * FP8_SCALED's L / 128 group scales (F32) follow as d = L + R + i.
 * conf_cache_elems: the elements of a token, scales included. */
int64_t conf_cache_elem(const conf_attn_geom *g, int64_t t, int64_t d, mla_dtype *dt);
int64_t conf_cache_elems(const conf_attn_geom *g);
/* Dim d < L + R of token t of the block at blk, dequantized (float64, exact). */
double conf_cache_value(const conf_attn_geom *g, const unsigned char *blk, int64_t t, int64_t d);
/* The per-value bounds of the suites below, from a problem's inputs (the
 * cases' own data, or a dump's files for mla op --replay): each allocates
 * output iy's tolerances (conf_tol_alloc). LayerNorm of x [T, D] with w, b
 * [D] (cases_indexer_norm.c); the Hadamard rotation along x's last dim. */
mla_status conf_layernorm_tol(conf_problem *p, int ix, int iw, int ib, int iy, float eps);
mla_status conf_hadamard_tol(conf_problem *p, int ix, int iy);
/* The same bounds for one row of values: LayerNorm's tol [D] of row x;
 * the Hadamard rotation's (every output of a row whose sum of |x| is sa). */
void conf_layernorm_row_tol(const double *x, const double *w, const double *b, int64_t D,
                            double eps, double *tol);
double conf_hadamard_sum_tol(double sa, int64_t D);
/* linear (cases_gemm.c): x [T, K], w [N, K], is: its fp8 scales (block
 * [ceil(N/128), ceil(K/128)] or one [1, 1]), -1 for none; batched: x [B, M,
 * K], w [B, K, N] times w_scale; the MXFP4 GEMMs (cases_mxfp4_gemm.c) with
 * their arguments in that suite's order (a4w4: x codes and scales first). */
mla_status conf_linear_tol(conf_problem *p, int ix, int iw, int is, int iy);
mla_status conf_batched_tol(conf_problem *p, int ix, int iw, int iy, float w_scale);
mla_status conf_mxfp4_gemm_tol(conf_problem *p, const conf_p_mxfp4_gemm *q, int a4w4);
/* RMSNorm's float output iy of rows ix [T, D] with weight iw; the fused
 * norm's quantized q_out iqo with its scales iqs (cases_norm.c,
 * compare_quant.c's bound). */
mla_status conf_norm_tol(conf_problem *p, int ix, int iw, int iy, double eps);
mla_status conf_qk_quant_tol(conf_problem *p, int iq, int iqw, double eps, int iqo, int iqs);
/* The MXFP4 production rule's e8m0 scale byte for a block maximum a >= 0. */
int conf_mxfp4_scale_byte(float a);

/* Quantized codes (fp8 or FP4X2, arg iq, [T, D] values) and their scales
 * (arg is: F32 per group of 128, or e8m0 per 32), judged together as
 * dequantized values; judges arg `which` (iq or is). See compare_quant.c. */
void conf_compare_quant(const conf_problem *p, int iq, int is, int which,
                        unsigned char *const *got, unsigned char *const *want, conf_cmp *r);
/* Half the larger distance from a code (fp8, or an fp4 nibble) to its neighbours. */
double conf_code_half_gap(mla_dtype dt, unsigned code);

/* ---------------------------------------------------------- selection */

/* --op: a glob with '*' and '?', comma-separated alternatives. */
int conf_op_selected(const char *pattern, const char *name);
/* --case and --suite. */
int conf_case_selected(const mla_conformance_options *opt, const conf_case *c, int id);
/* --list: one line per selected case. */
void conf_list_cases(const mla_conformance_options *opt, const conf_suite *const *suites,
                     int nsuites, FILE *out);

/* Reported by conf_execute as *kind when the op returned MLA_ERR_UNSUPPORTED
 * naming "op": the backend has no kernel in that slot yet, an answer like a
 * refusal by supports(), not a failure. */
#define CONF_NO_KERNEL ((mla_conformance_failure)(MLA_CONF_FAIL_COUNT + 1))

/* ---------------------------------------------------------- running */

/* Every suite, in run order. */
extern const conf_suite *const conf_suites[];
extern const int conf_nsuites;
/* 1 when the --op pattern selects at least one suite. */
int conf_any_selected(const char *pattern);

/* A reference table whose supports() notes the variants every entry point
 * of a run asks about: the harness asks the backend under test the same. */
#define CONF_MAX_VARIANTS 16
typedef struct conf_recorder {
    mla_backend_ops ops;
    mla_variant v[CONF_MAX_VARIANTS];
    int n;
} conf_recorder;
void conf_recorder_init(conf_recorder *r);
/* conf_execute on a context created with a recorder's ops: afterwards the
 * recorder holds the run's variants. */
mla_status conf_record(mla_context *ref, const conf_suite *s, const conf_case *c,
                       const conf_problem *p, unsigned char **outs, mla_conformance_failure *kind,
                       char *detail, size_t len);

/* Runs the problem on ctx: inputs copied in with mla_memcpy, outputs
 * surrounded by guard bytes filled with a pattern that depends on salt.
 * outs[i] receives a malloc'd copy of output arg i's buffer (NULL for
 * inputs). On an error the status says why, *kind is SETUP or STATUS and
 * detail a sentence; on MLA_OK *kind is MLA_CONF_FAIL_GUARD (detail filled,
 * outs still valid) or MLA_CONF_FAIL_COUNT when all guards held. */
mla_status conf_execute(mla_context *ctx, const conf_suite *s, const conf_case *c,
                        const conf_problem *p, unsigned salt, unsigned char **outs,
                        mla_conformance_failure *kind, char *detail, size_t len);

/* The hook the negative-control tests use: run with any backend table,
 * labelled label in the report, against the reference backend. */
int mla_conformance_run_ops(const mla_conformance_options *opt, const mla_backend_ops *ops,
                            const char *label, FILE *out, mla_conformance_summary *summary);
/* The same, except that on the tested backend the suite named swap->name
 * runs swap->exec instead of its own: a test-only composite of public calls
 * (a fast path that drops a result, a reader that assumes a layout) judged
 * against the suite's own exec on the reference and against its golden data. */
int mla_conformance_run_ops_swap(const mla_conformance_options *opt, const mla_backend_ops *ops,
                                 const char *label, const conf_suite *swap, FILE *out,
                                 mla_conformance_summary *summary);

#endif
