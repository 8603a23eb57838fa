/* The consumer of an installed libmla (tests/package): the version it was
 * runs against, a CPU context, and one op whose bits are known. */
#include <stdio.h>
#include <string.h>

#include <mla/mla.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: consumer <expected libmla version>\n");
        return 2;
    }
    const char *want = argv[1];
    if (strcmp(mla_version_string(), want) != 0) {
        fprintf(stderr, "consumer: libmla %s, expected %s\n", mla_version_string(), want);
        return 1;
    }
    mla_context *ctx = NULL;
    mla_status st = mla_context_create(MLA_BACKEND_CPU, NULL, &ctx);
    if (st != MLA_OK) {
        fprintf(stderr, "consumer: CPU context: %s\n", mla_status_name(st));
        return 1;
    }
    float x[4] = {1.0f, -2.5f, 3.0e38f, 0.1f};
    uint16_t y[4] = {0};
    const uint16_t want_bits[4] = {0x3F80, 0xC020, 0x7F62, 0x3DCD};
    const int64_t shape[1] = {4};
    mla_tensor tx, ty;
    mla_tensor_init(&tx, x, MLA_DTYPE_F32, MLA_MEMORY_HOST, 1, shape);
    mla_tensor_init(&ty, y, MLA_DTYPE_BF16, MLA_MEMORY_HOST, 1, shape);
    st = mla_convert(ctx, &tx, &ty, MLA_SATURATE);
    mla_context_destroy(ctx);
    if (st != MLA_OK || memcmp(y, want_bits, sizeof y) != 0) {
        fprintf(stderr, "consumer: convert gave %s %04x %04x %04x %04x\n", mla_status_name(st),
                y[0], y[1], y[2], y[3]);
        return 1;
    }
    printf("consumer: libmla %s, convert ok\n", mla_version_string());
    return 0;
}
