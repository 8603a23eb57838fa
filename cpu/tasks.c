/* The CPU backend's task loop: independent tasks on an OpenMP team, each
 * thread with its own scratch. */
#include <stdlib.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "core/checked.h"
#include "cpu/cpu_kernels.h"

mla_status mla_cpu_run_tasks(mla_context *ctx, int nt, int64_t tasks, int64_t per,
                             const char *what, void (*task)(const void *arg, int64_t k, float *buf),
                             const void *arg)
{
    float *bufs;
    MLA_TRY(mla_alloc_array(ctx, (void **)&bufs, nt, per, sizeof(float), what));
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(dynamic) if (nt > 1)
#endif
    for (int64_t k = 0; k < tasks; ++k) {
        int id = 0;
#if defined(MLA_HAVE_OPENMP)
        id = omp_get_thread_num();
#endif
        task(arg, k, bufs + id * per);
    }
    free(bufs);
    return MLA_OK;
}
