/* Test support for the replay tests (tests/test_replay.c, test_op_cli.c):
 * shell commands, and altering a dumped .npy file's data with its manifest
 * entry rewritten to match, so that only the replay's comparison can catch
 * the change. */
#ifndef MLA_TESTS_DUMP_TAMPER_H
#define MLA_TESTS_DUMP_TAMPER_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

static int sh(const char *cmd)
{
    const int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* FNV-1a 64 of a file, as the manifest records it. */
static unsigned long long fnv(const char *path, long long *bytes)
{
    FILE *fp = fopen(path, "rb");
    unsigned long long h = 0xCBF29CE484222325ull;
    int c;
    *bytes = 0;
    while (fp && (c = fgetc(fp)) != EOF)
        h = (h ^ (unsigned)c) * 0x100000001B3ull, ++*bytes;
    if (fp)
        fclose(fp);
    return h;
}

/* XORs byte `at` of a .npy file's data with mask and records the new hash
 * in the manifest. Returns 0 on success. */
static int tamper_bits(const char *dir, const char *file, long at, int mask)
{
    char path[2000], cmd[4400];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *fp = fopen(path, "r+b");
    if (!fp)
        return -1;
    unsigned char pre[10] = {0};
    int ok = fread(pre, 1, 10, fp) == 10;
    at += 10 + (pre[8] | pre[9] << 8); /* version 1.0: the header's length at byte 8 */
    const int c = ok && fseek(fp, at, SEEK_SET) == 0 ? fgetc(fp) : EOF;
    ok = c != EOF && fseek(fp, at, SEEK_SET) == 0 && fputc(c ^ mask, fp) != EOF;
    fclose(fp);
    long long n;
    const unsigned long long h = fnv(path, &n);
    snprintf(cmd, sizeof cmd,
             "sed -i 's/^file [0-9a-f]* [0-9]* %s$/file %016llx %lld %s/' '%s/manifest.txt'", file,
             h, n, file, dir);
    return ok && sh(cmd) == 0 ? 0 : -1;
}

#endif
