/* "Did you mean": Levenshtein distance, case-insensitive, over short names. */
#include "apps/suggest.h"

#include <string.h>

#include "mla/mla.h"

static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

/* Edit distance of a and b (their first 63 characters). */
static int distance(const char *a, const char *b)
{
    int prev[64], cur[64];
    const int n = (int)(strlen(b) < 63 ? strlen(b) : 63),
              m = (int)(strlen(a) < 63 ? strlen(a) : 63);
    for (int j = 0; j <= n; ++j)
        prev[j] = j;
    for (int i = 1; i <= m; ++i) {
        cur[0] = i;
        for (int j = 1; j <= n; ++j) {
            const int sub = prev[j - 1] + (lower(a[i - 1]) != lower(b[j - 1]));
            const int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof(int) * (size_t)(n + 1));
    }
    return prev[n];
}

void mla_suggest(FILE *out, const char *word, const char *(*name_at)(int i, void *user), void *user)
{
    if (!word)
        return;
    const char *best = NULL;
    int best_d = 1 << 30;
    for (int i = 0; name_at(i, user); ++i) {
        const int d = distance(word, name_at(i, user));
        if (d < best_d)
            best_d = d, best = name_at(i, user);
    }
    const int len = (int)strlen(word), limit = len / 3 > 2 ? len / 3 : 2;
    if (best && best_d <= limit)
        fprintf(out, "; did you mean '%s'?", best);
}

static const char *preset_at(int i, void *user)
{
    (void)user;
    return mla_model_config_preset_name(i);
}

void mla_suggest_preset(FILE *out, const char *word) { mla_suggest(out, word, preset_at, NULL); }
