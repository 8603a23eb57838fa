/* The `mla` command's subcommands. Each returns the process exit code:
 * 0 success, 1 failure (a failing case, an op error), 2 usage error, 77
 * (conformance --require-device) a requested GPU was not there. */
#ifndef MLA_APPS_CMD_H
#define MLA_APPS_CMD_H

#include <stdio.h>

#include "mla/mla.h"

#define MLA_EXIT_OK 0
#define MLA_EXIT_FAIL 1
#define MLA_EXIT_USAGE 2

/* Returns the exit code of expr unless it is MLA_EXIT_OK. */
#define OP_TRY(expr)                                                                               \
    do {                                                                                           \
        int op_rc_ = (expr);                                                                       \
        if (op_rc_ != MLA_EXIT_OK)                                                                 \
            return op_rc_;                                                                         \
    } while (0)

typedef struct mla_cmd {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand's name */
    void (*usage)(FILE *out);
} mla_cmd;

int cmd_info(int argc, char **argv);
void usage_info(FILE *out);
int cmd_conformance(int argc, char **argv);
void usage_conformance(FILE *out);
int cmd_op(int argc, char **argv);
void usage_op(FILE *out);
int cmd_bench(int argc, char **argv);
void usage_bench(FILE *out);
int cmd_plan(int argc, char **argv);
void usage_plan(FILE *out);
int cmd_demo(int argc, char **argv);
void usage_demo(FILE *out);
int cmd_weights(int argc, char **argv);
void usage_weights(FILE *out);

/* "auto", "reference", "cpu", "hip" -> backend; 0 on success. */
int mla_app_parse_backend(const char *s, mla_backend *out);
/* A non-negative integer that fits in *out; 0 on success. */
int mla_app_parse_i64(const char *s, int64_t *out);
/* s with control bytes, DEL, backslash and '"' written as \xNN, so that a
 * file's strings cannot steer a terminal. */
const char *mla_app_printable(const char *s, char *buf, size_t len);
/* s as a quoted JSON string (control bytes, quotes, backslashes as \u00XX). */
void mla_app_json_string(FILE *out, const char *s);
/* mla weights inspect (apps/weights_inspect.c). */
int weights_inspect(int argc, char **argv);
/* The same at the start of s; *end: the first character after it. */
int mla_app_parse_i64_prefix(const char *s, int64_t *out, char **end);

#endif
