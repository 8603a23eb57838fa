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

/* Reads bytes at an absolute file offset (counted in bytes_read); what
 * names the refused item. */
mla_status mla_st_read_at(mla_context *ctx, mla_safetensors *f, int64_t offset, void *dst,
                          size_t bytes, const char *what);
/* A whole small file (config.json, an index) into a NUL-terminated malloc'ed
 * buffer: MLA_ERR_IO (param: name) when it is missing, not a regular file
 * or unreadable, MLA_ERR_FORMAT when longer than max bytes. */
mla_status mla_read_small_file(mla_context *ctx, const char *path, const char *name, size_t max,
                               char **out, size_t *len);
/* A writer's save calls fn(user, done0 + bytes written, total) after each tensor. */
void mla_st_writer_progress(mla_safetensors_writer *w, mla_progress_fn fn, void *user,
                            int64_t done0, int64_t total);
/* The data bytes the writer's tensors take. */
int64_t mla_st_writer_data_bytes(const mla_safetensors_writer *w);
/* config.json text for cfg (what mla_hf_config_parse reads back to cfg),
 * malloc'ed; NULL when out of memory. quant: "" or a quantization_config
 * quant_method ("fp8": with 128 x 128 blocks). */
char *mla_hf_config_json(const mla_model_config *cfg, int64_t num_layers, const char *quant);

/* 1 when the checkpoint's index lists tensor name. */
int mla_ck_has(const mla_checkpoint *ck, const char *name);

#endif
