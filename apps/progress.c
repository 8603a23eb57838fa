/* Terminal progress lines (apps/progress.h). */
#define _POSIX_C_SOURCE 200809L
#include "apps/progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define SHOW_AFTER_S 2.0
#define EVERY_S 0.25

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void mla_progress_begin(mla_progress *p, const char *what)
{
    p->what = what;
    p->t0 = now();
    p->last = 0;
    p->shown = 0;
    p->tty = isatty(fileno(stderr));
}

void mla_progress_update(mla_progress *p, int64_t done, int64_t total)
{
    const double t = now() - p->t0;
    if (!p->tty || t < SHOW_AFTER_S || t - p->last < EVERY_S)
        return;
    p->last = t;
    p->shown = 1;
    fprintf(stderr, "\r%s: %5.1f%% (%.1f of %.1f MB), %.0f s", p->what,
            total > 0 ? 100.0 * (double)done / (double)total : 0.0, (double)done / 1e6,
            (double)total / 1e6, t);
    fflush(stderr);
}

void mla_progress_end(mla_progress *p)
{
    if (p->shown)
        fprintf(stderr, "\r%60s\r", "");
    p->shown = 0;
}

void mla_progress_cb(void *user, int64_t done, int64_t total)
{
    mla_progress_update(user, done, total);
}
