/* mla op --replay DIR: reruns a call captured by the dump switch (core/dump.c,
 * docs/REPLAY.md) and compares with what was dumped. Every file the manifest
 * lists is checked (size and FNV-1a hash) and every file the replay line
 * names must be listed, so a missing or altered file is refused by name
 * before anything runs. The verdict is apps/replay_compare.c's; for the ops
 * judged against the reference backend the line runs there too (its
 * outputs as TMP/ref.NAME.npy). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/cmd.h"
#include "apps/op.h"
#include "apps/replay.h"
#include "conformance/npy.h"

enum { MAX_FILES = 48, MAX_TOKENS = 256 };

typedef struct manifest {
    char op[64], backend[32], version[32], status[64];
    int nfiles;
    struct {
        char name[64];
        unsigned long long hash;
        long long bytes;
    } f[MAX_FILES];
} manifest;

static int refuse(const char *dir, const char *fmt, const char *what)
{
    fprintf(stderr, "mla op --replay %s: ", dir);
    fprintf(stderr, fmt, what);
    fprintf(stderr, "\n");
    return MLA_EXIT_USAGE;
}

static int hash_file(const char *path, unsigned long long *h, long long *bytes)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return -1;
    unsigned long long x = 0xCBF29CE484222325ull;
    long long n = 0;
    unsigned char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, fp)) > 0) {
        for (size_t i = 0; i < k; ++i)
            x = (x ^ buf[i]) * 0x100000001B3ull;
        n += (long long)k;
    }
    fclose(fp);
    *h = x, *bytes = n;
    return 0;
}

static int listed(const manifest *m, const char *name)
{
    for (int i = 0; i < m->nfiles; ++i)
        if (!strcmp(m->f[i].name, name))
            return 1;
    return 0;
}

static int read_manifest(const char *dir, manifest *m)
{
    char path[4200], line[512];
    memset(m, 0, sizeof *m);
    snprintf(path, sizeof path, "%s/manifest.txt", dir);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return refuse(dir, "%s is missing (not a dump folder, or the dump did not complete)",
                      "manifest.txt");
    int ok = fgets(line, sizeof line, fp) && !strcmp(line, "mla-dump 1\n");
    while (ok && fgets(line, sizeof line, fp)) {
        char key[16];
        if (sscanf(line, "%15s", key) != 1)
            ok = 0;
        else if (!strcmp(key, "op"))
            ok = sscanf(line, "op %63s", m->op) == 1;
        else if (!strcmp(key, "backend"))
            ok = sscanf(line, "backend %31s", m->backend) == 1;
        else if (!strcmp(key, "version"))
            ok = sscanf(line, "version %31s", m->version) == 1;
        else if (!strcmp(key, "status"))
            ok = sscanf(line, "status %63[^\n]", m->status) == 1;
        else if (!strcmp(key, "file") && m->nfiles < MAX_FILES)
            ok = sscanf(line, "file %llx %lld %63s", &m->f[m->nfiles].hash, &m->f[m->nfiles].bytes,
                        m->f[m->nfiles].name) == 3 &&
                 ++m->nfiles;
        else
            ok = 0;
    }
    fclose(fp);
    if (!ok || !*m->op || !*m->backend || !*m->status)
        return refuse(dir, "%s is malformed", "manifest.txt");
    for (int i = 0; i < m->nfiles; ++i) {
        unsigned long long h;
        long long n;
        snprintf(path, sizeof path, "%s/%s", dir, m->f[i].name);
        if (hash_file(path, &h, &n) != 0)
            return refuse(dir, "%s is missing", m->f[i].name);
        if (h != m->f[i].hash || n != m->f[i].bytes)
            return refuse(dir, "%s was altered (its size or hash is not the manifest's)",
                          m->f[i].name);
    }
    if (!listed(m, "replay.sh"))
        return refuse(dir, "%s is not in the manifest", "replay.sh");
    return MLA_EXIT_OK;
}

/* The `op NAME ...` words of replay.sh's exec line, in buf. */
static int replay_words(const char *dir, char *buf, size_t cap, char **w, int *n)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/replay.sh", dir);
    FILE *fp = fopen(path, "r");
    const char *mark = "exec \"${MLA:-mla}\" ";
    char *line = NULL;
    while (fp && fgets(buf, (int)cap, fp))
        if ((line = strstr(buf, mark)))
            break;
    if (fp)
        fclose(fp);
    if (!line)
        return refuse(dir, "%s has no `mla op` line", "replay.sh");
    line += strlen(mark);
    *n = 0;
    for (char *t = strtok(line, " \n"); t && *n < MAX_TOKENS; t = strtok(NULL, " \n"))
        w[(*n)++] = t;
    if (*n < 2 || strcmp(w[0], "op") != 0 || !op_find(w[1]))
        return refuse(dir, "%s's line names no op `mla op` knows", "replay.sh");
    return MLA_EXIT_OK;
}

/* A --in / --out / --param value as the replay uses it: input files and
 * the weights inside dir (each must be in the manifest), outputs in tmp. */
static int rewrite(const char *dir, const char *tmp, const manifest *m, const char *opt, char *kv,
                   char **out)
{
    char *eq = strchr(kv, '=');
    *out = NULL;
    if (!eq)
        return refuse(dir, "replay.sh: '%s' is not NAME=VALUE", kv);
    const char *v = eq + 1;
    const size_t cap = strlen(dir) + strlen(tmp) + strlen(kv) + 8;
    *out = malloc(cap);
    if (!*out)
        return refuse(dir, "%s: out of memory", kv);
    const int in = !strcmp(opt, "--in");
    const int file = in || (!strcmp(opt, "--param") && (!strncmp(kv, "weights=", 8)));
    const int dirv = !strcmp(opt, "--param") && !strncmp(kv, "model=", 6);
    if (file && !listed(m, v))
        return refuse(dir, "replay.sh names %s, which the manifest does not list", v);
    if (file)
        snprintf(*out, cap, "%.*s%s/%s", (int)(eq - kv + 1), kv, dir, v);
    else if (dirv)
        snprintf(*out, cap, "%.*s%s", (int)(eq - kv + 1), kv, dir);
    else if (!strcmp(opt, "--out"))
        snprintf(*out, cap, "%.*s%s/%s", (int)(eq - kv + 1), kv, tmp, v);
    else
        snprintf(*out, cap, "%s", kv);
    return MLA_EXIT_OK;
}

static int has_out(char **w, int n, const char *name)
{
    const size_t k = strlen(name);
    for (int i = 0; i + 1 < n; ++i)
        if (!strcmp(w[i], "--out") && !strncmp(w[i + 1], name, k) && w[i + 1][k] == '=')
            return 1;
    return 0;
}

static void remove_tree(const char *tmp, char **w, int n)
{
    char path[4300];
    for (int i = 0; i + 1 < n; ++i)
        if (!strcmp(w[i], "--out") && strchr(w[i + 1], '=')) {
            const char *f = strchr(w[i + 1], '=') + 1;
            snprintf(path, sizeof path, "%s/%s", tmp, f);
            remove(path);
            if (!strncmp(f, "got.", 4)) {
                snprintf(path, sizeof path, "%s/ref.%s", tmp, f + 4);
                remove(path);
            }
        }
    rmdir(tmp);
}

static int run_words(char **args, int na, const char *backend);

/* The files of folder dir, then dir itself (a capture's folder: no subfolders). */
static void remove_folder(const char *dir)
{
    DIR *d = opendir(dir);
    char path[4600];
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            remove(path);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* The rerun of a sparse layer records its own top-k selection the way the
 * dump recorded the dumped call's: through the dump switch, into TMP/rerun. */
static int run_capturing(char **args, int na, const char *tmp, char *sel, size_t len)
{
    static const char *const vars[3] = {"MLA_DUMP", "MLA_DUMP_DIR", "MLA_DUMP_MAX"};
    char dir[4200], *old[3];
    snprintf(dir, sizeof dir, "%s/rerun", tmp);
    const char *set[3] = {"layer", dir, "1"};
    for (int i = 0; i < 3; ++i) {
        const char *v = getenv(vars[i]);
        old[i] = v ? strdup(v) : NULL;
        setenv(vars[i], set[i], 1);
    }
    const int rc = run_words(args, na, NULL);
    for (int i = 0; i < 3; ++i) {
        if (old[i])
            setenv(vars[i], old[i], 1);
        else
            unsetenv(vars[i]);
        free(old[i]);
    }
    snprintf(sel, len, "%s/0000-layer/sel.topk.npy", dir);
    return rc;
}

/* Runs the rerun's words (op_main splits them in place: copies) on backend
 * (NULL: as they are), the outputs' got.NAME files renamed ref.NAME. */
static int run_words(char **args, int na, const char *backend)
{
    char *run[MAX_TOKENS + 4];
    int nr = 0;
    for (; nr < na; ++nr) {
        const char *a = args[nr], *eq = strchr(a, '='), *got = eq ? strstr(eq, "/got.") : NULL;
        if (nr > 0 && backend && !strcmp(args[nr - 1], "--backend"))
            a = backend;
        if (!(run[nr] = malloc(strlen(a) + 1)))
            break;
        strcpy(run[nr], a);
        if (backend && nr > 0 && !strcmp(args[nr - 1], "--out") && got)
            memcpy(run[nr] + (got - a) + 1, "ref", 3);
    }
    const int rc = nr == na ? op_main(na, run) : MLA_EXIT_FAIL;
    for (int i = 0; i < nr; ++i)
        free(run[i]);
    return rc;
}

int op_replay(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: mla op --replay DIR [--backend B] [--threads N]\n");
        return MLA_EXIT_USAGE;
    }
    const char *dir = argv[2], *backend = NULL, *threads = NULL;
    for (int i = 3; i < argc; i += 2) {
        if (i + 1 >= argc || (strcmp(argv[i], "--backend") && strcmp(argv[i], "--threads"))) {
            fprintf(stderr, "mla op --replay: unknown option '%s'\n", argv[i]);
            return MLA_EXIT_USAGE;
        }
        *(argv[i][2] == 'b' ? &backend : &threads) = argv[i + 1];
    }
    manifest m;
    OP_TRY(read_manifest(dir, &m));
    static char line[32768];
    char *w[MAX_TOKENS];
    int n = 0;
    OP_TRY(replay_words(dir, line, sizeof line, w, &n));
    char tmp[4096];
    const char *td = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/mla-replay-XXXXXX", td && *td ? td : "/tmp");
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "mla op --replay: cannot make a folder in %s\n", tmp);
        return MLA_EXIT_FAIL;
    }
    char *args[MAX_TOKENS + 4], *owned[MAX_TOKENS];
    int na = 0, no = 0, rc = MLA_EXIT_OK;
    for (int i = 0; i < n && rc == MLA_EXIT_OK; ++i) {
        args[na++] = w[i];
        const char *o = w[i];
        if (i + 1 < n && (!strcmp(o, "--in") || !strcmp(o, "--out") || !strcmp(o, "--param"))) {
            rc = rewrite(dir, tmp, &m, o, w[++i], &owned[no]);
            args[na++] = owned[no++];
        } else if (i + 1 < n && !strcmp(o, "--backend") && backend) {
            args[na++] = (char *)backend;
            ++i;
        }
    }
    if (rc == MLA_EXIT_OK && threads) {
        args[na++] = "--threads";
        args[na++] = (char *)threads;
    }
    const char *ran_on = backend ? backend : m.backend;
    if (rc == MLA_EXIT_OK) {
        printf("replay %s: %s dumped on %s by libmla %s (returned '%s'); rerun on %s\n", dir, m.op,
               m.backend, m.version, m.status, ran_on);
        fflush(stdout);
        static char sel[4300];
        const int same = !strcmp(ran_on, m.backend);
        /* on another backend a sparse layer's verdict needs the rerun's own selection */
        const int sparse_layer = !same && !strcmp(m.op, "layer") && has_out(w, n, "index_cache");
        rc = sparse_layer ? run_capturing(args, na, tmp, sel, sizeof sel)
                          : run_words(args, na, NULL);
        const int dumped_ok = !strcmp(m.status, mla_status_name(MLA_OK));
        if (!dumped_ok) { /* a refused call must be refused again */
            printf("%s: the call was refused when dumped ('%s') and %s now\n",
                   rc == MLA_EXIT_FAIL ? "same" : "DIFFERENT", m.status,
                   rc == MLA_EXIT_FAIL ? "is refused" : "is not refused");
            rc = rc == MLA_EXIT_FAIL ? MLA_EXIT_OK : MLA_EXIT_FAIL;
        } else if (rc == MLA_EXIT_OK && !same && replay_wants_reference(m.op) &&
                   strcmp(ran_on, "reference")) {
            printf("  (and on reference: the oracle of the outputs without bits to match)\n");
            fflush(stdout);
            rc = run_words(args, na, "reference");
        }
        if (dumped_ok && rc == MLA_EXIT_OK) {
            replay rp;
            memset(&rp, 0, sizeof rp);
            rp.dir = dir, rp.op = m.op, rp.args = args, rp.n = na;
            rp.same_backend = same;
            rp.on_reference = !strcmp(ran_on, "reference");
            rp.sel_rerun = sparse_layer ? sel : NULL;
            rc = replay_compare(&rp);
        }
    }
    char rerun[4300];
    snprintf(rerun, sizeof rerun, "%s/rerun/0000-layer", tmp);
    remove_folder(rerun);
    snprintf(rerun, sizeof rerun, "%s/rerun", tmp);
    rmdir(rerun);
    remove_tree(tmp, w, n);
    for (int i = 0; i < no; ++i)
        free(owned[i]);
    return rc;
}
