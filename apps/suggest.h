/* "Did you mean": the closest of a list of names to a mistyped word. */
#ifndef MLA_APPS_SUGGEST_H
#define MLA_APPS_SUGGEST_H

#include <stdio.h>

/* name_at(i, user) lists the names (NULL ends). Prints "; did you mean
 * 'NAME'?" to out when one is within a third of the word's length in edit
 * distance (letters compared without regard to case); nothing otherwise. */
void mla_suggest(FILE *out, const char *word, const char *(*name_at)(int i, void *user),
                 void *user);
/* The same for model config presets. */
void mla_suggest_preset(FILE *out, const char *word);

#endif
