/* Progress of long CLI steps on stderr: shown only on a terminal and only
 * once a step has run ~2 s, so that short steps and pipes stay quiet. */
#ifndef MLA_APPS_PROGRESS_H
#define MLA_APPS_PROGRESS_H

#include <stdint.h>

typedef struct mla_progress {
    const char *what;
    double t0, last;
    int shown, tty;
} mla_progress;

void mla_progress_begin(mla_progress *p, const char *what);
void mla_progress_update(mla_progress *p, int64_t done, int64_t total);
/* Clears the line if one was shown. */
void mla_progress_end(mla_progress *p);
/* mla_progress_fn over an mla_progress (user). */
void mla_progress_cb(void *user, int64_t done, int64_t total);

#endif
