#define _POSIX_C_SOURCE 200809L
/* A main() for the fuzz targets where libFuzzer is not linked (gcc builds,
 * the tests): runs LLVMFuzzerTestOneInput on every file named, and on every
 * file of every directory named. The corpora and the regression inputs run
 * this way in the default and asan presets (fuzz/CMakeLists.txt). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 1;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 4096;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return 1;
            }
            buf = nb;
        }
        const size_t got = fread(buf + len, 1, cap - len, f);
        if (!got)
            break;
        len += got;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0, bad = 0;
    for (int i = 1; i < argc; ++i) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "%s: not found\n", argv[i]);
            ++bad;
        } else if (S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            for (struct dirent *e; d && (e = readdir(d));) {
                if (e->d_name[0] == '.')
                    continue;
                char path[4096];
                snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
                bad += run_file(path);
                ++files;
            }
            if (d)
                closedir(d);
        } else {
            bad += run_file(argv[i]);
            ++files;
        }
    }
    printf("%d inputs replayed, %d unreadable\n", files, bad);
    return bad != 0;
}
