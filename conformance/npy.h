/* NumPy .npy files (format versions 1.0 and 2.0), little-endian, C order.
 *
 * Used by the conformance harness (golden vectors) and by `mla op`. The
 * reader treats every file as hostile: the header is parsed with a bounded
 * tokenizer, sizes are 64-bit with overflow checks, and the declared data size
 * must match the file exactly, so a truncated or padded file is refused with
 * MLA_ERR_FORMAT before anything large is allocated. */
#ifndef MLA_CONFORMANCE_NPY_H
#define MLA_CONFORMANCE_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "mla/mla.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The element types the reader and writer take (NumPy "descr" strings). */
typedef enum mla_npy_type {
    MLA_NPY_F4 = 0, /* <f4 */
    MLA_NPY_F8 = 1, /* <f8 */
    MLA_NPY_F2 = 2, /* <f2 */
    MLA_NPY_U2 = 3, /* <u2 (bf16 bits) */
    MLA_NPY_U1 = 4, /* |u1 (fp8, e8m0, fp4x2 raw codes) */
    MLA_NPY_I1 = 5, /* |i1 */
    MLA_NPY_I4 = 6, /* <i4 */
    MLA_NPY_I8 = 7, /* <i8 */
    MLA_NPY_TYPE_COUNT
} mla_npy_type;

/* NumPy allows up to 64 dims; the library's tensors have at most 6. */
#define MLA_NPY_MAX_DIMS 16
/* np.load refuses headers above 10000 bytes by default; be a little kinder. */
#define MLA_NPY_MAX_HEADER (1u << 20)

typedef struct mla_npy {
    mla_npy_type type;
    int32_t ndim;
    int64_t shape[MLA_NPY_MAX_DIMS];
    int64_t numel;
    size_t nbytes; /* numel * element size */
    void *data;    /* malloc'd; NULL when nbytes == 0 */
} mla_npy;

const char *mla_npy_type_descr(mla_npy_type type); /* "<f4"; "?" when unknown */
size_t mla_npy_type_size(mla_npy_type type);       /* 0 when unknown */
/* Parses a descr string ("<f4", "|u1", ...); MLA_ERR_FORMAT when not taken. */
mla_status mla_npy_type_parse(const char *descr, mla_npy_type *out);

/* Parses a whole .npy image held in memory (data is copied). On failure *out
 * is zeroed, and err (may be NULL) receives a sentence. */
mla_status mla_npy_parse(const void *buf, size_t len, mla_npy *out, char *err, size_t errlen);
/* Reads a file: MLA_ERR_IO when it cannot be opened or read, MLA_ERR_FORMAT
 * when its content is malformed, MLA_ERR_OUT_OF_MEMORY. */
mla_status mla_npy_load(const char *path, mla_npy *out, char *err, size_t errlen);
/* Writes data (numel elements, C order) as a version 1.0 file (a header of
 * at most MLA_NPY_MAX_DIMS dims always fits its 16-bit length). */
mla_status mla_npy_save(const char *path, mla_npy_type type, int32_t ndim, const int64_t *shape,
                        const void *data, char *err, size_t errlen);
/* The bytes of the header (magic to newline) for those arguments, into buf;
 * *len receives the size. MLA_ERR_OVERFLOW when buf is too small. */
mla_status mla_npy_header(mla_npy_type type, int32_t ndim, const int64_t *shape, char *buf,
                          size_t cap, size_t *len);
void mla_npy_free(mla_npy *a);

#ifdef __cplusplus
}
#endif

#endif
