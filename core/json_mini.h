/* A small JSON reader: just what a safetensors header needs (objects,
 * arrays, strings, non-negative integers), plus skipping any other value so
 * unknown fields do not break a file. Not a general JSON library. */
#ifndef MLA_CORE_JSON_MINI_H
#define MLA_CORE_JSON_MINI_H

#include <stddef.h>
#include <stdint.h>

typedef struct json_cursor {
    const char *p;
    const char *end;
    int depth; /* nesting of the value being read, bounded (no stack exhaustion) */
} json_cursor;

typedef enum json_result {
    JSON_OK = 0,
    JSON_BAD = 1,      /* malformed text */
    JSON_OVERFLOW = 2, /* an integer beyond int64 */
    JSON_NOMEM = 3
} json_result;

void json_skip_ws(json_cursor *c);
/* Consumes ch (after whitespace); 1 when it was there. */
int json_take(json_cursor *c, char ch);
/* Peeks the next non-space character, '\0' at the end. */
char json_peek(json_cursor *c);
/* A string; *out is malloc'ed UTF-8 (NUL-terminated; an embedded \u0000
 * is refused, names are C strings). */
json_result json_string(json_cursor *c, char **out);
/* A non-negative integer without fraction or exponent. */
json_result json_uint(json_cursor *c, int64_t *out);
/* Any value. */
json_result json_skip(json_cursor *c);

#endif
