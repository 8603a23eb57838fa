/* The GPU queries of a build without the HIP backend. */
#include "core/backend.h"

int mla_gpu_count(void) { return 0; }

mla_status mla_gpu_name(int device, char *buf, size_t len)
{
    (void)device;
    if (buf && len)
        buf[0] = '\0';
    return MLA_ERR_NOT_COMPILED;
}
