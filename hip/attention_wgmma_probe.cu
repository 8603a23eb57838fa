/* A check of the layouts hip/attention_wgmma.h assumes for wgmma (shared
 * memory in the 128-byte swizzle, descriptors, the register fragments), on
 * the GPU, with the body's own helpers: one warpgroup runs each of the
 * body's three products on small integers (exact in bf16 and fp32) and the
 * host compares every element with its own product. Not part of the
 * library: bench/run_gpu_attention.sh builds and runs it next to the
 * conformance run, so that a failing body comes with the layout at fault.
 *
 *   nvcc -std=c++17 -DMLA_STATIC_DEFINE -Iinclude -I. \
 *        -gencode=arch=compute_90a,code=sm_90a hip/attention_wgmma_probe.cu
 *
 * Prints one line per product (S = Q K^T from shared memory; O = P V with P
 * from registers; O = P V with P from shared memory) and one for the fp8
 * key conversion (every code, scales in and out of its fast route against
 * the fp32 route), and exits 1 on any mismatch. It runs in the wave-32 emulation too (hip/emu: the
 * launch rewritten as run.sh does, -D__CUDACC__), where it checks itself against the emulated
 * layouts. */
#include <stdio.h>
#include <stdlib.h>

#include "hip/attention_wgmma.h"

#if !MLA_ATT_WGMMA && defined(__CUDA_ARCH__)
#error "build for sm_90a (-gencode=arch=compute_90a,code=sm_90a)"
#endif

namespace
{

/* small integers, exact in bf16 */
uint16_t bf16_of(int v) { return mla_fb_f32_to_bf16((float)v); }
int val_q(int r, int k) { return (r * 7 + k * 3) % 9 - 4; }
int val_k(int n, int k) { return (n * 5 + k * 11) % 7 - 3; }
int val_p(int r, int k) { return (r + 2 * k) % 5 - 2; }
int val_v(int k, int n) { return (k * 3 + n * 13) % 9 - 4; }

/* Q (64 x 64), K (64 keys x 64 dims), P (64 x 64 keys), V (64 keys x 256
 * dims) in global memory, row-major bf16; out: S (64 x 64), O from
 * registers, O from shared memory (64 x 256 each), f32 row-major. */
__global__ __launch_bounds__(128, 1) void probe_kernel(const uint16_t *q, const uint16_t *k,
                                                       const uint16_t *p, const uint16_t *v,
                                                       float *s_out, float *o_rs, float *o_ss)
{
#if MLA_ATT_WGMMA
    MLA_IDX_SMEM(unsigned char, smem);
    const uint32_t a = wg_addr(smem);
    unsigned char *base = smem + ((1024u - (a & 1023u)) & 1023u);
    unsigned char *Q = base, *K = base + kWgBlockBytes, *P = K + kWgBlockBytes;
    unsigned char *V = P + kWgBlockBytes; /* 4 blocks of 64 dims, as a key stage's first four */
    const int tid = (int)threadIdx.x;
    /* stage every tile as the body does: 8-value chunks at wg_chunk_at */
    for (int it = tid; it < 64 * 8; it += 128) {
        const int r = it / 8, c = it % 8;
        for (int e = 0; e < 8; ++e) {
            reinterpret_cast<uint16_t *>(Q + wg_chunk_at(r, 8 * c))[e] = q[r * 64 + 8 * c + e];
            reinterpret_cast<uint16_t *>(K + wg_chunk_at(r, 8 * c))[e] = k[r * 64 + 8 * c + e];
            reinterpret_cast<uint16_t *>(P + wg_chunk_at(r, 8 * c))[e] = p[r * 64 + 8 * c + e];
        }
    }
    for (int it = tid; it < 64 * 32; it += 128) {
        const int r = it / 32, c = it % 32;
        for (int e = 0; e < 8; ++e)
            reinterpret_cast<uint16_t *>(V + wg_chunk_at(r, 8 * c))[e] = v[r * 256 + 8 * c + e];
    }
    fence_proxy_async();
    __syncthreads();
    const int w = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;

    float sc[32];
    for (int e = 0; e < 32; ++e)
        sc[e] = 0.0f;
    const uint64_t dq = wg_kdesc(wg_addr(Q)), dk = wg_kdesc(wg_addr(K));
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
        wg_ss_64x64(sc, dq + (uint64_t)(2 * kk), dk + (uint64_t)(2 * kk), kk);
    wg_commit();
    wg_wait<0>();
    wg_pin(sc);
    for (int e = 0; e < 32; ++e)
        s_out[(16 * w + g + 8 * ((e % 4) / 2)) * 64 + 8 * (e / 4) + 2 * t + e % 2] = sc[e];

    /* P's A fragments, as the score warpgroup builds them from its scores */
    uint32_t pa[4][4];
    for (int kk = 0; kk < 4; ++kk)
        for (int i = 0; i < 4; ++i) {
            const int row = 16 * w + g + 8 * (i % 2), key = 16 * kk + 8 * (i / 2) + 2 * t;
            pa[kk][i] = (uint32_t)p[row * 64 + key] | (uint32_t)p[row * 64 + key + 1] << 16;
        }
    float o[128];
    for (int e = 0; e < 128; ++e)
        o[e] = 0.0f;
    const uint64_t dv = wg_vdesc(wg_addr(V));
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
        wg_rs_64x256(o, pa[kk], dv + (uint64_t)((16 * 128 * kk) >> 4), 1);
    wg_commit();
    wg_wait<0>();
    wg_pin(o);
    for (int kk = 0; kk < 4; ++kk)
        wg_pin(pa[kk]);
    for (int e = 0; e < 128; ++e)
        o_rs[(16 * w + g + 8 * ((e % 4) / 2)) * 256 + 8 * (e / 4) + 2 * t + e % 2] = o[e];

    for (int e = 0; e < 128; ++e)
        o[e] = 0.0f;
    const uint64_t dp = wg_kdesc(wg_addr(P));
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
        wg_ss_64x256(o, dp + (uint64_t)(2 * kk), dv + (uint64_t)((16 * 128 * kk) >> 4), 1);
    wg_commit();
    wg_wait<0>();
    wg_pin(o);
    for (int e = 0; e < 128; ++e)
        o_ss[(16 * w + g + 8 * ((e % 4) / 2)) * 256 + 8 * (e / 4) + 2 * t + e % 2] = o[e];
#else
    (void)q, (void)k, (void)p, (void)v, (void)s_out, (void)o_rs, (void)o_ss;
#endif
}

/* The key conversion of the fp8 caches (nv_fp8x16_bf16): every code of
 * both e4m3 flavours times each scale of probe_scale (FP8_SCALED; index 0 is
 * NORMAL, no scale), 16 codes a thread; out[f][s][c] the bf16 bits. */
constexpr int kNScales = 14;

MLA_HD float probe_scale(int i)
{
    const float s[kNScales] = {1.0f,   1.0f,   0.25f,   0x1p-20f, 0x1p-126f, 0x1p-127f, 0x1p-140f,
                               0x1p7f, 0x1p8f, 0x1p30f, 0.3f,     -2.0f,     0.0f,      INFINITY};
    return s[i];
}

__global__ void convert_kernel(uint16_t *out)
{
#if MLA_ATT_WGMMA
    const int f = (int)blockIdx.x / kNScales, s = (int)blockIdx.x % kNScales;
    const int c0 = 16 * (int)threadIdx.x; /* 16 threads: codes 0..255 */
    uint32_t x[4];
    for (int j = 0; j < 4; ++j)
        x[j] = (uint32_t)(c0 + 4 * j) * 0x01010101u + 0x03020100u;
    mla_u32x4 lo, hi;
    if (f == 0)
        nv_fp8x16_bf16<MLA_DTYPE_FP8_E4M3FN>(x, probe_scale(s), s != 0, lo, hi);
    else
        nv_fp8x16_bf16<MLA_DTYPE_FP8_E4M3FNUZ>(x, probe_scale(s), s != 0, lo, hi);
    uint16_t *o = out + ((size_t)blockIdx.x * 256 + (size_t)c0);
    for (int j = 0; j < 8; ++j) {
        const uint32_t w = j < 4 ? lo.v[j] : hi.v[j - 4];
        o[2 * j] = (uint16_t)(w & 0xFFFFu);
        o[2 * j + 1] = (uint16_t)(w >> 16);
    }
#else
    (void)out;
#endif
}

/* The conversion against the fp32 route on the host: code value times
 * the scale in fp32, rounded to bf16; NaN where the host has NaN. */
int report_convert(const uint16_t *got)
{
    int bad = 0;
    for (int f = 0; f < 2; ++f)
        for (int s = 0; s < kNScales; ++s)
            for (int c = 0; c < 256; ++c) {
                const float v =
                    f ? mla_fb_e4m3fnuz_to_f32((uint8_t)c) : mla_fb_e4m3fn_to_f32((uint8_t)c);
                const float w = s ? v * probe_scale(s) : v;
                const uint16_t g = got[(f * kNScales + s) * 256 + c], want = mla_fb_f32_to_bf16(w);
                const bool ok = w != w ? (g & 0x7FFFu) > 0x7F80u : g == want;
                if (!ok && bad++ == 0)
                    printf("fp8 -> bf16 %s code 0x%02x scale %g: 0x%04x, want 0x%04x\n",
                           f ? "e4m3fnuz" : "e4m3fn", c, (double)probe_scale(s), g, want);
            }
    if (bad)
        printf("%-32s FAIL %d of %d\n", "fp8 codes -> bf16 keys", bad, 2 * kNScales * 256);
    else
        printf("%-32s pass (%d values exact)\n", "fp8 codes -> bf16 keys", 2 * kNScales * 256);
    return bad != 0;
}

int report(const char *what, const float *got, const float *want, int n, int cols)
{
    int bad = 0, first = -1;
    for (int i = 0; i < n; ++i)
        if (got[i] != want[i] && bad++ == 0)
            first = i;
    if (bad)
        printf("%-32s FAIL %d of %d, first at row %d col %d: %g, want %g\n", what, bad, n,
               first / cols, first % cols, got[first], want[first]);
    else
        printf("%-32s pass (%d values exact)\n", what, n);
    return bad != 0;
}

} // namespace

int main()
{
    uint16_t hq[64 * 64], hk[64 * 64], hp[64 * 64], hv[64 * 256];
    float ws[64 * 64] = {}, wo[64 * 256] = {};
    for (int r = 0; r < 64; ++r)
        for (int c = 0; c < 64; ++c) {
            hq[r * 64 + c] = bf16_of(val_q(r, c));
            hk[r * 64 + c] = bf16_of(val_k(r, c));
            hp[r * 64 + c] = bf16_of(val_p(r, c));
        }
    for (int r = 0; r < 64; ++r)
        for (int c = 0; c < 256; ++c)
            hv[r * 256 + c] = bf16_of(val_v(r, c));
    for (int r = 0; r < 64; ++r)
        for (int n = 0; n < 64; ++n)
            for (int kk = 0; kk < 64; ++kk)
                ws[r * 64 + n] += (float)(val_q(r, kk) * val_k(n, kk));
    for (int r = 0; r < 64; ++r)
        for (int n = 0; n < 256; ++n)
            for (int kk = 0; kk < 64; ++kk)
                wo[r * 256 + n] += (float)(val_p(r, kk) * val_v(kk, n));
    void *dq, *dk, *dp, *dv, *ds, *drs, *dss;
    hipMalloc(&dq, sizeof hq);
    hipMalloc(&dk, sizeof hk);
    hipMalloc(&dp, sizeof hp);
    hipMalloc(&dv, sizeof hv);
    hipMalloc(&ds, sizeof ws);
    hipMalloc(&drs, sizeof wo);
    hipMalloc(&dss, sizeof wo);
    hipMemcpyAsync(dq, hq, sizeof hq, hipMemcpyHostToDevice, 0);
    hipMemcpyAsync(dk, hk, sizeof hk, hipMemcpyHostToDevice, 0);
    hipMemcpyAsync(dp, hp, sizeof hp, hipMemcpyHostToDevice, 0);
    hipMemcpyAsync(dv, hv, sizeof hv, hipMemcpyHostToDevice, 0);
    const int smem = 1024 + 7 * kWgBlockBytes;
#if !MLA_IDX_EMU
    cudaFuncSetAttribute(probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
#endif
    probe_kernel<<<1, 128, smem, 0>>>(static_cast<const uint16_t *>(dq),
                                      static_cast<const uint16_t *>(dk),
                                      static_cast<const uint16_t *>(dp),
                                      static_cast<const uint16_t *>(dv), static_cast<float *>(ds),
                                      static_cast<float *>(drs), static_cast<float *>(dss));
    static float gs[64 * 64], grs[64 * 256], gss[64 * 256];
    hipMemcpyAsync(gs, ds, sizeof gs, hipMemcpyDeviceToHost, 0);
    hipMemcpyAsync(grs, drs, sizeof grs, hipMemcpyDeviceToHost, 0);
    hipMemcpyAsync(gss, dss, sizeof gss, hipMemcpyDeviceToHost, 0);
    const hipError_t err = hipStreamSynchronize(0);
    if (err != hipSuccess || hipGetLastError() != hipSuccess) {
        printf("probe kernel: %s\n", hipGetErrorString(err));
        return 1;
    }
    void *dc;
    static uint16_t gc[2 * kNScales * 256];
    hipMalloc(&dc, sizeof gc);
    convert_kernel<<<2 * kNScales, 16, 0, 0>>>(static_cast<uint16_t *>(dc));
    hipMemcpyAsync(gc, dc, sizeof gc, hipMemcpyDeviceToHost, 0);
    if (hipStreamSynchronize(0) != hipSuccess || hipGetLastError() != hipSuccess) {
        printf("convert kernel failed\n");
        return 1;
    }
    int bad = report("S = Q K^T (SS, K-major)", gs, ws, 64 * 64, 64);
    bad |= report("O = P V (RS, V MN-major)", grs, wo, 64 * 256, 256);
    bad |= report("O = P V (SS, V MN-major)", gss, wo, 64 * 256, 256);
    bad |= report_convert(gc);
    return bad;
}
