/* Hugging Face checkpoint directories (include/mla/mla_weights.h): config.json,
 * the shard index, and shards opened on first use, so that a layer's load
 * reads the shard headers it needs and that layer's tensors, nothing else. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json_mini.h"
#include "core/safetensors.h"
#include "core/validate.h"

#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
/* An index of a trillion-parameter checkpoint is a few MB. */
#define INDEX_MAX_BYTES ((size_t)256 << 20)

typedef struct ck_tensor {
    char *name;
    int32_t shard;
} ck_tensor;

struct mla_checkpoint {
    char *dir;
    mla_hf_config cfg;
    int64_t count;
    ck_tensor *t; /* sorted by name */
    int32_t nshards;
    char **shard;           /* file names within dir */
    mla_safetensors **file; /* NULL until first used */
};

mla_status mla_read_small_file(mla_context *ctx, const char *path, const char *name, size_t max,
                               char **out, size_t *len)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return mla_fail(ctx, MLA_ERR_IO, name, "cannot open '%s'", path);
    if (!S_ISREG(sb.st_mode))
        return mla_fail(ctx, MLA_ERR_IO, name, "'%s' is not a regular file", path);
    if ((uint64_t)sb.st_size > (uint64_t)max)
        return mla_fail(ctx, MLA_ERR_FORMAT, name, "'%s' is %lld bytes, more than %zu", path,
                        (long long)sb.st_size, max);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return mla_fail(ctx, MLA_ERR_IO, name, "cannot open '%s'", path);
    const size_t n = (size_t)sb.st_size;
    char *text = malloc(n + 1);
    mla_status st = MLA_OK;
    if (!text)
        st = mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, name, "out of memory");
    else if (fread(text, 1, n, fp) != n)
        st = mla_fail(ctx, MLA_ERR_IO, name, "could not read '%s'", path);
    fclose(fp);
    if (st != MLA_OK) {
        free(text);
        return st;
    }
    text[n] = '\0';
    *out = text;
    *len = n;
    return MLA_OK;
}

static char *join(const char *dir, const char *name)
{
    const size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (p)
        snprintf(p, a + b + 2, "%s/%s", dir, name);
    return p;
}

static int is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

void mla_checkpoint_close(mla_checkpoint *ck)
{
    if (!ck)
        return;
    for (int64_t i = 0; i < ck->count; ++i)
        free(ck->t[i].name);
    for (int32_t i = 0; i < ck->nshards; ++i) {
        free(ck->shard[i]);
        mla_safetensors_close(ck->file[i]);
    }
    free(ck->t);
    free(ck->shard);
    free(ck->file);
    free(ck->dir);
    free(ck);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const ck_tensor *)a)->name, ((const ck_tensor *)b)->name);
}

static const ck_tensor *lookup(const mla_checkpoint *ck, const char *name)
{
    const ck_tensor key = {(char *)name, 0};
    return ck->count ? bsearch(&key, ck->t, (size_t)ck->count, sizeof key, by_name) : NULL;
}

int mla_ck_has(const mla_checkpoint *ck, const char *name)
{
    return ck && name && lookup(ck, name) != NULL;
}

/* The shard named s: its index in ck->shard, added when new. Shard names
 * stay inside the directory. */
static mla_status shard_of(mla_context *ctx, mla_checkpoint *ck, const char *s, int32_t *out)
{
    for (int32_t i = ck->nshards - 1; i >= 0; --i) /* the index lists shards in runs */
        if (!strcmp(ck->shard[i], s)) {
            *out = i;
            return MLA_OK;
        }
    if (!*s || s[0] == '/' || strstr(s, ".."))
        return mla_fail(ctx, MLA_ERR_FORMAT, INDEX_NAME,
                        INDEX_NAME ": shard name '%.64s' leaves the directory", s);
    char **sh = realloc(ck->shard, (size_t)(ck->nshards + 1) * sizeof *sh);
    if (sh)
        ck->shard = sh;
    char *copy = sh ? malloc(strlen(s) + 1) : NULL;
    if (!copy)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, INDEX_NAME, "out of memory");
    memcpy(copy, s, strlen(s) + 1);
    ck->shard[ck->nshards] = copy;
    *out = ck->nshards++;
    return MLA_OK;
}

static mla_status add_tensor(mla_context *ctx, mla_checkpoint *ck, int64_t *cap, const char *name,
                             int32_t shard)
{
    if (ck->count == *cap) {
        const int64_t ncap = *cap ? 2 * *cap : 64;
        ck_tensor *t = realloc(ck->t, (size_t)ncap * sizeof *t);
        if (!t)
            return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, INDEX_NAME, "out of memory");
        ck->t = t;
        *cap = ncap;
    }
    char *copy = malloc(strlen(name) + 1);
    if (!copy)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, INDEX_NAME, "out of memory");
    memcpy(copy, name, strlen(name) + 1);
    ck->t[ck->count++] = (ck_tensor){copy, shard};
    return MLA_OK;
}

/* {"metadata": {...}, "weight_map": {"tensor": "shard file", ...}} */
static mla_status read_index(mla_context *ctx, mla_checkpoint *ck, const char *path)
{
    char *text = NULL;
    size_t len = 0;
    MLA_TRY(mla_read_small_file(ctx, path, INDEX_NAME, INDEX_MAX_BYTES, &text, &len));
    mla_json_value root;
    size_t at = 0;
    const mla_json_result jr = mla_json_value_parse(text, len, &root, &at);
    free(text);
    if (jr == MLA_JSON_NOMEM)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, INDEX_NAME, "out of memory");
    if (jr != MLA_JSON_OK)
        return mla_fail(ctx, MLA_ERR_FORMAT, INDEX_NAME, INDEX_NAME ": %s at byte %zu",
                        jr == MLA_JSON_DUPLICATE ? "a tensor listed twice (the object ends)"
                                             : "malformed JSON",
                        at);
    const mla_json_value *map = mla_json_value_get(&root, "weight_map");
    mla_status st = MLA_OK;
    if (!map || map->type != MLA_JSON_OBJECT)
        st = mla_fail(ctx, MLA_ERR_FORMAT, INDEX_NAME, INDEX_NAME ": no \"weight_map\" object");
    int64_t cap = 0;
    for (int64_t i = 0; st == MLA_OK && i < map->count; ++i) {
        int32_t sh = 0;
        if (map->items[i].type != MLA_JSON_STRING)
            st = mla_fail(ctx, MLA_ERR_FORMAT, INDEX_NAME,
                          INDEX_NAME ": the shard of '%.64s' is not a string", map->keys[i]);
        if (st == MLA_OK && !*map->keys[i])
            st = mla_fail(ctx, MLA_ERR_FORMAT, INDEX_NAME, INDEX_NAME ": an empty tensor name");
        if (st == MLA_OK)
            st = shard_of(ctx, ck, map->items[i].string, &sh);
        if (st == MLA_OK)
            st = add_tensor(ctx, ck, &cap, map->keys[i], sh);
    }
    mla_json_value_free(&root);
    return st;
}

mla_status mla_checkpoint_open(mla_context *ctx, const char *dir, mla_checkpoint **out)
{
    if (ctx)
        mla_clear_error(ctx);
    if (!dir || !out)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, !dir ? "dir" : "out", "null argument");
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return mla_fail(ctx, MLA_ERR_IO, "dir", "'%s' is not a directory", dir);
    mla_checkpoint *ck = calloc(1, sizeof *ck);
    char *cfg_path = join(dir, "config.json"), *index = join(dir, INDEX_NAME);
    char *single = join(dir, SINGLE_NAME);
    mla_safetensors *f = NULL;
    mla_status st = MLA_OK;
    if (ck)
        ck->dir = malloc(strlen(dir) + 1);
    if (!ck || !ck->dir || !cfg_path || !index || !single)
        st = mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "dir", "out of memory");
    else
        memcpy(ck->dir, dir, strlen(dir) + 1);
    if (st == MLA_OK && !is_file(cfg_path))
        st = mla_fail(ctx, MLA_ERR_IO, "config.json", "'%s': no config.json", dir);
    if (st == MLA_OK)
        st = mla_hf_config_load(ctx, cfg_path, &ck->cfg);
    if (st == MLA_OK) { /* the model's name: the directory's */
        const char *e = dir + strlen(dir), *b;
        while (e > dir && e[-1] == '/')
            --e;
        for (b = e; b > dir && b[-1] != '/'; --b)
            ;
        if (e > b)
            snprintf(ck->cfg.model.name, sizeof ck->cfg.model.name, "%.*s",
                     (int)(e - b < 31 ? e - b : 31), b);
    }
    if (st == MLA_OK && is_file(index)) {
        st = read_index(ctx, ck, index);
    } else if (st == MLA_OK && is_file(single)) {
        int32_t sh = 0;
        int64_t cap = 0;
        st = shard_of(ctx, ck, SINGLE_NAME, &sh);
        if (st == MLA_OK)
            st = mla_safetensors_open(ctx, single, &f);
        for (int64_t i = 0; st == MLA_OK && i < mla_safetensors_count(f); ++i) {
            mla_safetensors_info info;
            mla_safetensors_info_at(f, i, &info);
            st = add_tensor(ctx, ck, &cap, info.name, sh);
        }
    } else if (st == MLA_OK) {
        st = mla_fail(ctx, MLA_ERR_IO, INDEX_NAME, "'%s': neither " INDEX_NAME " nor " SINGLE_NAME,
                      dir);
    }
    if (st == MLA_OK) {
        ck->file = calloc((size_t)ck->nshards + 1, sizeof *ck->file);
        if (!ck->file)
            st = mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "dir", "out of memory");
        else
            ck->file[0] = f; /* one model.safetensors: already open */
    }
    for (int32_t i = 0; st == MLA_OK && i < ck->nshards; ++i) {
        char *p = join(dir, ck->shard[i]);
        if (!p)
            st = mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "dir", "out of memory");
        else if (!is_file(p))
            st = mla_fail(ctx, MLA_ERR_IO, ck->shard[i],
                          "shard '%s' (named in the index) is absent", p);
        free(p);
    }
    if (st == MLA_OK && ck->count > 1) {
        qsort(ck->t, (size_t)ck->count, sizeof *ck->t, by_name);
        for (int64_t i = 1; i < ck->count && st == MLA_OK; ++i)
            if (!strcmp(ck->t[i - 1].name, ck->t[i].name))
                st = mla_fail(ctx, MLA_ERR_FORMAT, ck->t[i].name, "tensor '%s' appears twice",
                              ck->t[i].name);
    }
    free(cfg_path);
    free(index);
    free(single);
    if (st != MLA_OK) {
        if (!ck || !ck->file)
            mla_safetensors_close(f);
        mla_checkpoint_close(ck);
        return st;
    }
    *out = ck;
    return MLA_OK;
}

const mla_hf_config *mla_checkpoint_config(const mla_checkpoint *ck)
{
    return ck ? &ck->cfg : NULL;
}

int64_t mla_checkpoint_tensor_count(const mla_checkpoint *ck) { return ck ? ck->count : 0; }

mla_status mla_checkpoint_tensor_at(const mla_checkpoint *ck, int64_t index, const char **name,
                                    const char **shard)
{
    if (!ck || !name || !shard)
        return MLA_ERR_NULL_POINTER;
    if (index < 0 || index >= ck->count)
        return MLA_ERR_OUT_OF_RANGE;
    *name = ck->t[index].name;
    *shard = ck->shard[ck->t[index].shard];
    return MLA_OK;
}

mla_status mla_checkpoint_find(mla_context *ctx, mla_checkpoint *ck, const char *name,
                               mla_safetensors **file, mla_safetensors_info *info)
{
    if (!ck || !name || !file || !info)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER,
                        !ck     ? "ck"
                        : !name ? "name"
                        : !file ? "file"
                                : "info",
                        "null argument");
    const ck_tensor *t = lookup(ck, name);
    if (!t)
        return mla_fail(ctx, MLA_ERR_FORMAT, name, "the checkpoint has no tensor '%s'", name);
    mla_safetensors **f = &ck->file[t->shard];
    if (!*f) {
        char *p = join(ck->dir, ck->shard[t->shard]);
        mla_status st = p ? mla_safetensors_open(ctx, p, f)
                          : mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, name, "out of memory");
        free(p);
        if (st != MLA_OK)
            return st;
    }
    if (!mla_safetensors_has(*f, name))
        return mla_fail(ctx, MLA_ERR_FORMAT, name,
                        "the index puts tensor '%s' in '%s', which does not hold it", name,
                        ck->shard[t->shard]);
    *file = *f;
    return mla_safetensors_find(ctx, *f, name, info);
}

int64_t mla_checkpoint_bytes_read(const mla_checkpoint *ck)
{
    int64_t n = 0;
    for (int32_t i = 0; ck && i < ck->nshards; ++i)
        n += mla_safetensors_bytes_read(ck->file[i]);
    return n;
}
