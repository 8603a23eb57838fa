/* The RoPE table builder behind mla_rope_table_build (core/rope_table.c),
 * for any row range: tests check rows far beyond what fits in memory. */
#ifndef MLA_CORE_ROPE_TABLE_H
#define MLA_CORE_ROPE_TABLE_H

#include "mla/mla.h"

/* Rows [first, first + count) of the [max_pos, R/2] cos and sin tables into
 * cos_out, sin_out ([count, R/2] each); first = 0 is mla_rope_table_build. */
mla_status mla_rope_table_rows(const mla_rope_config *cfg, int64_t first, int64_t count,
                               float *cos_out, float *sin_out);

#endif
