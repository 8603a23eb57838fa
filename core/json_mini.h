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

typedef struct json_cursor {
    const char *p;
    const char *end;
    int depth; /* nesting of the value being read, bounded (no stack exhaustion) */
} json_cursor;

typedef enum json_result {
    JSON_OK = 0,
    JSON_BAD = 1,      /* malformed text */
    JSON_OVERFLOW = 2, /* an integer beyond int64 */
    JSON_NOMEM = 3,
    JSON_DUPLICATE = 4 /* an object names a key twice */
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

/* ------------------------------------------------------- document tree */

typedef enum json_type {
    JSON_NULL = 0,
    JSON_FALSE = 1,
    JSON_TRUE = 2,
    JSON_NUMBER = 3,
    JSON_STRING = 4,
    JSON_ARRAY = 5,
    JSON_OBJECT = 6
} json_type;

typedef struct json_value {
    json_type type;
    double number;      /* NUMBER: correctly rounded (strtod in the C locale) */
    int is_integer;     /* NUMBER written without fraction or exponent, fits int64 */
    int64_t integer;    /* its value when is_integer */
    char *string;       /* STRING */
    int64_t count;      /* ARRAY, OBJECT: items */
    char **keys;        /* OBJECT: the item names, in file order */
    struct json_value *items;
} json_value;

/* Parses a whole document (one value, only whitespace after it). On failure
 * *out is a JSON_NULL value and *err_at the byte offset where reading
 * stopped. */
json_result json_value_parse(const char *text, size_t len, json_value *out, size_t *err_at);
void json_value_free(json_value *v);
/* The item of an object named key; NULL when absent or v is not an object. */
const json_value *json_value_get(const json_value *v, const char *key);

#endif
