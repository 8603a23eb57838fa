/* mla op --replay's comparison of the rerun's outputs with the dumped ones
 * (apps/replay_compare.c). */
#ifndef MLA_APPS_REPLAY_H
#define MLA_APPS_REPLAY_H

/* Compares each --out NAME=TMP/got.NAME.npy of args with DIR/out.NAME.npy:
 * bits where op is bit-defined or same_backend, else the op's bound (GEMMs,
 * RMSNorm), else reported without a verdict. Returns the exit code. */
int replay_compare(const char *dir, const char *tmp, const char *op, int same_backend, char **args,
                   int nargs);

#endif
