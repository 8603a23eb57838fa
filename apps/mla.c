/* mla: the libmla command-line tool. `mla help` lists the subcommands. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "apps/cmd.h"
#include "apps/suggest.h"

static int cmd_help(int argc, char **argv);
static void usage_help(FILE *out) { fprintf(out, "usage: mla help [COMMAND]\n"); }

static const mla_cmd commands[] = {
    {"demo", "one MLA layer end to end: prefill, decode steps, speed, error vs float64", cmd_demo,
     usage_demo},
    {"info", "version, build options, backends, GPUs, what AUTO picks", cmd_info, usage_info},
    {"conformance", "check backends against the reference and the golden vectors",
     cmd_conformance, usage_conformance},
    {"op", "run one op on .npy files", cmd_op, usage_op},
    {"bench", "benchmarks: prepare-path ops and the ceilings they are judged by", cmd_bench,
     usage_bench},
    {"plan", "a config's shapes, RoPE site and per-stage kernels on a target", cmd_plan,
     usage_plan},
    {"weights", "seeded DeepSeek layer weights as safetensors; list a safetensors file",
     cmd_weights, usage_weights},
    {"help", "this text, or a command's usage", cmd_help, usage_help},
};
#define NCOMMANDS ((int)(sizeof commands / sizeof commands[0]))

static const char *command_at(int i, void *user)
{
    (void)user;
    return i < NCOMMANDS ? commands[i].name : NULL;
}

static const mla_cmd *find(const char *name)
{
    for (int i = 0; i < NCOMMANDS; ++i)
        if (!strcmp(commands[i].name, name))
            return &commands[i];
    return NULL;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: mla COMMAND [OPTIONS]\n\ncommands:\n");
    for (int i = 0; i < NCOMMANDS; ++i)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n`mla help COMMAND` or `mla COMMAND --help` for a command's options.\n");
}

static int cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        usage(stdout);
        return MLA_EXIT_OK;
    }
    const mla_cmd *c = find(argv[1]);
    if (!c) {
        fprintf(stderr, "mla help: unknown command '%s'", argv[1]);
        mla_suggest(stderr, argv[1], command_at, NULL);
        fprintf(stderr, "\n");
        return MLA_EXIT_USAGE;
    }
    c->usage(stdout);
    return MLA_EXIT_OK;
}

int mla_app_parse_backend(const char *s, mla_backend *out)
{
    for (int b = 0; b < MLA_BACKEND_COUNT; ++b)
        if (!strcmp(s, mla_backend_name((mla_backend)b))) {
            *out = (mla_backend)b;
            return 0;
        }
    return -1;
}

const char *mla_app_printable(const char *s, char *buf, size_t len)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && n + 5 < len; ++p) {
        if (*p < 0x20 || *p == 0x7F || *p == '\\' || *p == '"')
            n += (size_t)snprintf(buf + n, len - n, "\\x%02X", *p);
        else
            buf[n++] = (char)*p;
    }
    buf[n] = '\0';
    return buf;
}

void mla_app_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; ++p)
        if (*p < 0x20 || *p == '"' || *p == '\\' || *p == 0x7F)
            fprintf(out, "\\u%04X", *p);
        else
            fputc(*p, out);
    fputc('"', out);
}

int mla_app_parse_i64_prefix(const char *s, int64_t *out, char **end)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    long long v = strtoll(s, end, 10);
    if (errno)
        return -1;
    *out = (int64_t)v;
    return 0;
}

int mla_app_parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = (int64_t)v;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return MLA_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return MLA_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("mla %s\n", mla_version_string());
        return MLA_EXIT_OK;
    }
    const mla_cmd *c = find(argv[1]);
    if (!c) {
        fprintf(stderr, "mla: unknown command '%s'", argv[1]);
        mla_suggest(stderr, argv[1], command_at, NULL);
        fprintf(stderr, "\n\n");
        usage(stderr);
        return MLA_EXIT_USAGE;
    }
    for (int i = 2; i < argc; ++i)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            c->usage(stdout);
            return MLA_EXIT_OK;
        }
    return c->run(argc - 1, argv + 1);
}
