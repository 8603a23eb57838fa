/* The HIP entry points of a build without the HIP backend. */
#include "core/backend.h"

const mla_backend_ops *mla_hip_ops(void) { return NULL; }

int mla_gpu_count(void) { return 0; }

mla_status mla_gpu_name(int device, char *buf, size_t len)
{
    (void)device;
    if (buf && len)
        buf[0] = '\0';
    return MLA_ERR_NOT_COMPILED;
}
