/* A small JSON reader: just what a safetensors header needs (objects,
 * arrays, strings, non-negative integers), plus skipping any other value so
 * unknown fields do not break a file. Not a general JSON library. */
#ifndef MLA_CORE_JSON_MINI_H
#define MLA_CORE_JSON_MINI_H

#include <stddef.h>
#include <stdint.h>

typedef struct mla_json_cursor {
    const char *p;
    const char *end;
    int depth; /* nesting of the value being read, bounded (no stack exhaustion) */
} mla_json_cursor;

typedef enum mla_json_result {
    MLA_JSON_OK = 0,
    MLA_JSON_BAD = 1,      /* malformed text */
    MLA_JSON_OVERFLOW = 2, /* an integer beyond int64 */
    MLA_JSON_NOMEM = 3
} mla_json_result;

void mla_json_skip_ws(mla_json_cursor *c);
/* Consumes ch (after whitespace); 1 when it was there. */
int mla_json_take(mla_json_cursor *c, char ch);
/* Peeks the next non-space character, '\0' at the end. */
char mla_json_peek(mla_json_cursor *c);
/* A string; *out is malloc'ed UTF-8 (NUL-terminated; an embedded \u0000
 * is refused, names are C strings). */
mla_json_result mla_json_string(mla_json_cursor *c, char **out);
/* A non-negative integer without fraction or exponent. */
mla_json_result mla_json_uint(mla_json_cursor *c, int64_t *out);
/* Any value. */
mla_json_result mla_json_skip(mla_json_cursor *c);

#endif
