/* Reference Hadamard rotation of the DSA indexer's q and k (MLA.md section 6):
 *
 *     y[t, h, :] = x[t, h, :] @ H_D / sqrt(D),   H_D[i, j] = (-1)^popcount(i & j)
 *
 * H_D is Sylvester's (H_1 = [1], H_2n = [[H_n, H_n], [H_n, -H_n]]), whose
 * entry (i, j) is the sign above. float64: the signed sum over i (i
 * ascending), divided by sqrt(D), rounded once to y's dtype. Each row is read
 * whole before it is written, so y may be x (in place). */
#include <stdlib.h>

#include "core/checked.h"
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

/* H_D[i, j] of the Sylvester construction: -1 when i & j has an odd number
 * of set bits (each doubling step flips the sign of the lower-right block). */
static double sylvester(int64_t i, int64_t j)
{
    return (__builtin_popcountll((unsigned long long)(i & j)) & 1) ? -1.0 : 1.0;
}

mla_status mla_ref_hadamard(mla_context *ctx, const mla_hadamard_args *a)
{
    const mla_tensor *x = &a->x, *y = &a->y;
    const int64_t T = x->shape[0], H = x->shape[1], D = x->shape[2];
    double *row;
    MLA_TRY(mla_alloc_array(ctx, (void **)&row, D, 1, sizeof *row, "x"));
    const double norm = sqrt((double)D);
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t h = 0; h < H; ++h) {
            for (int64_t i = 0; i < D; ++i)
                row[i] = mla_ref_load_f64(x, mla_ref_offset3(x, t, h, i));
            for (int64_t j = 0; j < D; ++j) {
                double acc = 0.0;
                for (int64_t i = 0; i < D; ++i)
                    acc += row[i] * sylvester(i, j);
                mla_ref_store_f64(y, mla_ref_offset3(y, t, h, j), acc / norm, MLA_SATURATE);
            }
        }
    }
    free(row);
    return MLA_OK;
}
