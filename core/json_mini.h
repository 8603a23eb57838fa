/* A small JSON reader: the streaming calls a safetensors header needs
 * (objects, arrays, strings, non-negative integers, skipping any other value
 * so unknown fields do not break a file), and a bounded document tree for
 * the checkpoint files (config.json, model.safetensors.index.json). Not a
 * general JSON library: no writer, numbers as doubles (plus the exact
 * integer when there is one). */
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
    MLA_JSON_NOMEM = 3,
    MLA_JSON_DUPLICATE = 4 /* an object names a key twice */
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

/* ------------------------------------------------------- document tree */

typedef enum mla_json_type {
    MLA_JSON_NULL = 0,
    MLA_JSON_FALSE = 1,
    MLA_JSON_TRUE = 2,
    MLA_JSON_NUMBER = 3,
    MLA_JSON_STRING = 4,
    MLA_JSON_ARRAY = 5,
    MLA_JSON_OBJECT = 6
} mla_json_type;

typedef struct mla_json_value {
    mla_json_type type;
    double number;      /* NUMBER: correctly rounded (strtod in the C locale) */
    int is_integer;     /* NUMBER written without fraction or exponent, fits int64 */
    int64_t integer;    /* its value when is_integer */
    char *string;       /* STRING */
    int64_t count;      /* ARRAY, OBJECT: items */
    char **keys;        /* OBJECT: the item names, in file order */
    struct mla_json_value *items;
} mla_json_value;

/* Parses a whole document (one value, only whitespace after it). On failure
 * *out is a MLA_JSON_NULL value and *err_at the byte offset where reading
 * stopped. */
mla_json_result mla_json_value_parse(const char *text, size_t len, mla_json_value *out, size_t *err_at);
void mla_json_value_free(mla_json_value *v);
/* The item of an object named key; NULL when absent or v is not an object. */
const mla_json_value *mla_json_value_get(const mla_json_value *v, const char *key);

#endif
