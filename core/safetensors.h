/* Internal pieces shared by the safetensors reader, writer, layer loader
 * and generator. */
#ifndef MLA_CORE_SAFETENSORS_H
#define MLA_CORE_SAFETENSORS_H

#include "core/backend.h"

/* Bounds a header the way safetensors does (100 MB): a corrupt length
 * must not make the reader allocate gigabytes. */
#define MLA_ST_MAX_HEADER ((int64_t)100 * 1000 * 1000)

/* File dtype string -> read-as dtype; 0 when unknown. */
int mla_st_dtype_parse(const char *s, mla_dtype *out);
/* Library dtype -> file dtype string; NULL when it has none. */
const char *mla_st_dtype_string(mla_dtype dtype);
/* product(shape) * size in *bytes; MLA_ERR_OVERFLOW / MLA_ERR_SHAPE otherwise. */
mla_status mla_st_bytes(mla_dtype dtype, int32_t ndim, const int64_t *shape, int64_t *bytes);
/* The config's extents are positive (index_heads may be 0; an indexer needs
 * q_lora) and small enough that every weight size fits int64 with room. */
mla_status mla_st_check_config(mla_context *ctx, const mla_model_config *cfg);

#endif
