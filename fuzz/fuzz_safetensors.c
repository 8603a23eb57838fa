/* libFuzzer: the safetensors reader (core/safetensors_read.c) and the layer
 * loader (core/layer_weights.c) through the public API, on any bytes given
 * as a file (a memfd). Every tensor the header lists is described and read
 * into a host buffer with guard bytes; the layer is loaded for the three
 * fuzz configs (fuzz/fuzz_config.h) with and without the fp8 conversions.
 * Checked: no crash, no sanitizer report, guards intact, a refused load
 * leaves its output untouched. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz/fuzz_config.h"
#include "mla/mla.h"

enum { GUARD = 64, MAX_READ = 1 << 20 };

static void read_all(mla_context *ctx, mla_safetensors *f)
{
    const int64_t n = mla_safetensors_count(f);
    for (int64_t k = 0; k < n; ++k) {
        mla_safetensors_info info;
        if (mla_safetensors_info_at(f, k, &info) != MLA_OK)
            continue;
        (void)mla_safetensors_has(f, info.name);
        if (info.bytes < 0 || info.bytes > MAX_READ || info.ndim < 0 || info.ndim > MLA_MAX_DIMS)
            continue;
        uint8_t *buf = malloc((size_t)info.bytes + 2 * GUARD);
        if (!buf)
            continue;
        memset(buf, 0xA5, (size_t)info.bytes + 2 * GUARD);
        mla_tensor t;
        if (mla_tensor_init(&t, buf + GUARD, info.dtype, MLA_MEMORY_HOST, info.ndim, info.shape) ==
            MLA_OK)
            (void)mla_safetensors_read(ctx, f, info.name, &t);
        for (int64_t i = 0; i < GUARD; ++i)
            if (buf[i] != 0xA5 || buf[GUARD + info.bytes + i] != 0xA5)
                __builtin_trap();
        free(buf);
    }
    (void)mla_safetensors_metadata(f, "config");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static mla_context *ctx;
    static int fd = -1;
    static char path[64];
    if (!ctx) {
        const mla_context_options one = {1, 0, NULL};
        fd = memfd_create("fuzz_safetensors", 0);
        if (fd < 0 || mla_context_create(MLA_BACKEND_REFERENCE, &one, &ctx) != MLA_OK)
            abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    mla_safetensors *f = NULL;
    if (mla_safetensors_open(ctx, path, &f) != MLA_OK)
        return 0;
    read_all(ctx, f);
    for (int k = 0; k < 3; ++k) {
        const mla_model_config cfg = fz_layer_config(k);
        for (int conv = 0; conv < MLA_KV_B_FP8_COUNT; ++conv) {
            mla_layer_load_options opt;
            mla_layer_load_options_default(&opt);
            opt.kv_b_fp8 = (mla_kv_b_fp8)conv;
            mla_layer_weights_ex w, untouched;
            memset(&w, 0x5A, sizeof w);
            memcpy(&untouched, &w, sizeof w);
            if (mla_layer_weights_load(ctx, f, &cfg, 0, &opt, &w) == MLA_OK)
                mla_layer_weights_free(ctx, &w);
            else if (memcmp(&w, &untouched, sizeof w) != 0)
                __builtin_trap(); /* a refused load writes nothing */
        }
    }
    mla_safetensors_close(f);
    return 0;
}
