/* The combine of the HIP attention (hip/attention.hip): the rows the
 * attention blocks do not finish, after them in the same stream. */
#ifndef MLA_HIP_ATTENTION_FINISH_H
#define MLA_HIP_ATTENTION_FINISH_H

#include "hip/attention_traits.h"

namespace
{

/* The rows the attention blocks do not finish: a team of kTeam threads per
 * (row, head, column chunk of kTeam * VEC). Rows of a padding sequence (no
 * work item) get o = 0 and lse = -inf; rows of a sequence with several
 * splits the combine of their partials (weights e^(lse_i - max), empty
 * splits 0, sinks once); rows of a one-split sequence were written directly
 * and are left alone. A lane combines VEC consecutive columns (16-byte loads
 * of the partials when L is a multiple of 4), its loads over the splits
 * independent of each other (several in flight). */
constexpr int kTeam = 64;

template <int VEC>
__global__ __launch_bounds__(kThreads) void finish_kernel(att_desc d, int64_t teams)
{
    const int64_t team = (int64_t)blockIdx.x * (kThreads / kTeam) + threadIdx.x / kTeam;
    if (team >= teams)
        return;
    const int lane = (int)threadIdx.x % kTeam;
    const int32_t L = (int32_t)d.c.L, nch = (L + kTeam * VEC - 1) / (kTeam * VEC);
    const int64_t pair = team / nch;
    const int32_t chunk = (int32_t)(team - pair * nch);
    const int64_t row = pair / d.H, h = pair % d.H;
    /* the sequence of row: the last s with cu_q[s] <= row (empty sequences
     * share their cu_q with the next: the last of them owns the row) */
    int32_t lo = 0, hi = d.S; /* cu_q[lo] <= row < cu_q[hi] */
    while (hi - lo > 1) {
        const int32_t mid = (lo + hi) / 2;
        if (d.cu_q[(int64_t)mid * d.cus] <= row)
            lo = mid;
        else
            hi = mid;
    }
    const int32_t ns = d.splits[lo];
    if (ns == 1)
        return;
    float M = -INFINITY;
    const float *pl = nullptr, *po = nullptr;
    if (ns > 1) {
        pl = d.part_lse + (row * d.H + h) * d.max_splits;
        po = d.part_o + (row * d.H + h) * d.max_splits * (int64_t)d.c.L;
        for (int i = 0; i < ns; ++i)
            M = fmaxf(M, pl[i]);
    }
    float f = 0.0f, lse = -INFINITY;
    if (M != -INFINITY) {
        float W = 0.0f;
        for (int i = 0; i < ns; ++i)
            W += pl[i] == -INFINITY ? 0.0f : expf(pl[i] - M);
        float mm = M, scale = 1.0f;
        if (d.sinks) {
            const float sk = d.sinks[h * d.sks];
            mm = fmaxf(M, sk);
            scale = expf(M - mm);
            W = W * scale + expf(sk - mm);
        }
        f = scale / W;
        lse = mm + logf(W);
    }
    const int32_t col0 = (chunk * kTeam + lane) * VEC;
    float acc[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e)
        acc[e] = 0.0f;
    if (M != -INFINITY && col0 < L) {
        constexpr int U = 8; /* splits whose loads are in flight together */
        for (int i0 = 0; i0 < ns; i0 += U) {
            float wt[U], v[U][VEC];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int i = i0 + u < ns ? i0 + u : ns - 1;
                const float l = pl[i];
                wt[u] = (i0 + u >= ns || l == -INFINITY) ? 0.0f : expf(l - M);
                const float *src = po + (int64_t)i * d.c.L + col0;
                if constexpr (VEC == 4) {
                    const mla_u32x4 q = *reinterpret_cast<const mla_u32x4 *>(src);
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        v[u][e] = mla_fb_float(q.v[e]);
                } else {
#pragma unroll
                    for (int e = 0; e < VEC; ++e)
                        v[u][e] = src[e];
                }
            }
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int e = 0; e < VEC; ++e)
                    acc[e] += wt[u] == 0.0f ? 0.0f : wt[u] * v[u][e];
        }
    }
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
        const int32_t col = col0 + e;
        if (col >= L)
            continue;
        const float val = M != -INFINITY ? acc[e] * f : 0.0f;
        const int64_t off = row * d.os0 + h * d.os1 + (int64_t)col * d.os2;
        if (d.o_bf16)
            static_cast<uint16_t *>(d.o)[off] = (uint16_t)mla_fb_f32_to_bf16(val);
        else
            static_cast<float *>(d.o)[off] = val;
    }
    if (lane == 0 && chunk == 0 && d.lse)
        d.lse[row * d.lse0 + h * d.lse1] = lse;
}

} // namespace

#endif
