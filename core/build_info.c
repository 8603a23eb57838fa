/* What this build contains. MLA_HAVE_* and the HIP strings come from CMake. */
#include "core/backend.h"
#include "mla_build_config.h"

#ifndef MLA_HIP_PLATFORM_NAME
#define MLA_HIP_PLATFORM_NAME ""
#endif
#ifndef MLA_GPU_TARGETS_STR
#define MLA_GPU_TARGETS_STR ""
#endif
#ifndef MLA_CPU_ISA_STR
#define MLA_CPU_ISA_STR "portable C"
#endif

#if defined(MLA_HAVE_OPENMP)
#define HAS_OPENMP 1
#else
#define HAS_OPENMP 0
#endif
#if defined(MLA_HAVE_OPENBLAS)
#define HAS_OPENBLAS 1
#else
#define HAS_OPENBLAS 0
#endif
#if defined(MLA_HAVE_SLEEF)
#define HAS_SLEEF 1
#else
#define HAS_SLEEF 0
#endif
#if defined(MLA_HAVE_HIP)
#define HAS_HIP 1
#else
#define HAS_HIP 0
#endif

static const mla_build_info build_info = {
    MLA_VERSION_STRING, MLA_C_COMPILER_STRING, HAS_OPENMP,           HAS_OPENBLAS, HAS_SLEEF,
    HAS_HIP,            MLA_HIP_PLATFORM_NAME, MLA_GPU_TARGETS_STR, MLA_CPU_ISA_STR,
};

const mla_build_info *mla_build_info_get(void) { return &build_info; }

void mla_version(int *major, int *minor, int *patch)
{
    if (major)
        *major = MLA_VERSION_MAJOR;
    if (minor)
        *minor = MLA_VERSION_MINOR;
    if (patch)
        *patch = MLA_VERSION_PATCH;
}

const char *mla_version_string(void) { return MLA_VERSION_STRING; }

int mla_backend_compiled(mla_backend backend)
{
    return backend == MLA_BACKEND_AUTO || mla_backend_find(backend) != NULL;
}
