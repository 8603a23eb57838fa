/* RMSNorm and the fused QK RMSNorm (MLA.md section 2, step 2):
 *
 *     y[t, d] = fl(fl(x[t, d] * r) * w[d]),  r = 1 / sqrtf(fl(sum_d x^2) / D + eps)
 *
 * in fp32 (1/sqrtf, correctly rounded under the build's flags, not a fast
 * rsqrt), then one rounding to y's dtype. The fused op's q_out may instead be
 * quantized from that fp32 row, with the formulas of the standalone
 * quantizers (core/format_bits.h): fp8 group 128 under MLA_FP8_SCALE_AITER,
 * or MXFP4 under the production rule.
 *
 * One wave per row: lane l takes chunks l, l + W, ... of 8 values (16-byte
 * loads where the row allows). Rows of at most kHold steps (V3's q and kv
 * latents) are loaded whole, at once, and held in registers for the output
 * pass: two memory round trips per row, which is what bounds a wave's time
 * when a row is its whole work (T = 1024 is 2048 rows: 16 waves per SM).
 * Longer rows: the sum pass issues several chunks' loads at once, reduces
 * with wave shuffles; the output pass reads the row again, from cache (HBM
 * sees each byte once either way). A quantization
 * group is 16 (fp8) or 4 (MXFP4) consecutive chunks, i.e. consecutive lanes
 * of one step: a team. Kernels are instantiated per (x dtype, y dtype,
 * access mode: wide when every row is contiguous and aligned, hip/chunk8.h);
 * both norms of the fused op share a launch when their dtypes agree (each
 * with its own blocks), else take one each.
 *
 * In place is safe: every lane reads its chunks before the reduction, and
 * after it reads each of its own chunks again just before writing it. */
#include "hip/chunk8.h"

namespace
{

constexpr int kUnroll = 4; /* sum-pass steps whose loads are issued together */
/* Rows of up to kHoldChunks chunks (V3's q_lora 1536: 6 steps of a wave32,
 * 3 of a wave64; kv_lora 512: 2 or 1) are held in registers, by a kernel of
 * their own (both paths in one kernel spilled scalar registers on gfx942). */
constexpr int kHoldChunks = 192;
constexpr int kHold = kHoldChunks / MLA_WAVE_SIZE;
constexpr int kFp8Team = 128 / kChunk; /* chunks per fp8 group */
constexpr int kFp4Team = 32 / kChunk;  /* chunks per MXFP4 block */
static_assert(MLA_WAVE_SIZE % kFp8Team == 0, "quantization teams must not straddle waves");

struct norm_job {
    const void *x, *w;
    void *y;
    void *scales; /* quantized y only */
    int64_t rows, D;
    int64_t xs0, xs1, ws, ys0, ys1, ss0, ss1;
    float eps;
    int32_t wdt;
};

template <int DT>
constexpr bool is_fp8_v = DT == MLA_DTYPE_FP8_E4M3FN || DT == MLA_DTYPE_FP8_E4M3FNUZ;

/* nbytes bytes of w at p, p + step, ... */
template <int MODE>
MLA_DEV void store_bytes_strided(uint8_t *p, int64_t step, const uint32_t w[4], int nbytes)
{
    if (MODE == kWide || (MODE == kAuto && step == 1)) {
        store_bytes<MODE>(p, w, nbytes);
        return;
    }
    if constexpr (MODE != kWide) {
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
            if (j < nbytes)
                p[j * step] = (uint8_t)(w[j / 4] >> (8 * (j % 4)));
    }
}

/* |y| maximum of the chunk as fp32 bits (NaN and inf compare above every
 * finite value), reduced over a team of `width` lanes. */
MLA_DEV uint32_t team_amax(const float y[kChunk], int n, int width)
{
    uint32_t amax = 0;
#pragma unroll
    for (int j = 0; j < kChunk; ++j) {
        const uint32_t a = mla_fb_bits(y[j]) & 0x7FFFFFFFu;
        amax = (j < n && a > amax) ? a : amax;
    }
    return team_max_u32(amax, width);
}

/* fp8 group 128 (MLA_FP8_SCALE_AITER): s = max(amax, 1e-10) / fp8_max,
 * codes sat(y * fl(1/s)). A group holding a NaN takes its largest NaN
 * pattern as amax where the host takes its last one: the codes agree, only
 * the NaN scale's payload may differ. */
template <int YT, int MODE>
MLA_DEV void quant_fp8(const norm_job &j, int64_t r, int64_t c, int n, const float y[kChunk],
                       int lane)
{
    constexpr int fnuz = YT == MLA_DTYPE_FP8_E4M3FNUZ;
    const uint32_t amax = team_amax(y, n, kFp8Team);
    if (n == 0)
        return;
    const float s = mla_fb_fp8_group_scale(mla_fb_float(amax), MLA_FB_FP8_RULE_AITER, fnuz);
    const float inv = mla_fb_div(1.0f, s);
    uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int k = 0; k < kChunk; ++k)
        w[k / 4] |= (uint32_t)mla_fb_fp8_group_code(y[k], s, inv, MLA_FB_FP8_RULE_AITER, fnuz)
                    << (8 * (k % 4));
    uint8_t *codes = static_cast<uint8_t *>(j.y) + r * j.ys0 + kChunk * c * j.ys1;
    store_bytes_strided<MODE>(codes, j.ys1, w, kChunk);
    if (lane % kFp8Team == 0)
        static_cast<float *>(j.scales)[r * j.ss0 + (c / kFp8Team) * j.ss1] = s;
}

/* MXFP4, production rule: e8m0 scale of the 32-value block, two codes per
 * byte (element 2i in the low nibble). */
template <int MODE>
MLA_DEV void quant_fp4(const norm_job &j, int64_t r, int64_t c, int n, const float y[kChunk],
                       int lane)
{
    const uint32_t amax = team_amax(y, n, kFp4Team);
    if (n == 0)
        return;
    const uint8_t scale = mla_fb_mxfp4_scale_byte(amax, 1);
    const uint32_t mask = mla_fb_mxfp4_code_mask(amax);
    uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int k = 0; k < kChunk / 2; ++k)
        w[0] |= (uint32_t)(mla_fb_mxfp4_code(y[2 * k], scale, mask) |
                           (mla_fb_mxfp4_code(y[2 * k + 1], scale, mask) << 4))
                << (8 * k);
    uint8_t *codes = static_cast<uint8_t *>(j.y) + r * j.ys0 + (kChunk / 2) * c * j.ys1;
    store_bytes_strided<MODE>(codes, j.ys1, w, kChunk / 2);
    if (lane % kFp4Team == 0)
        static_cast<uint8_t *>(j.scales)[r * j.ss0 + (c / kFp4Team) * j.ss1] = scale;
}

/* Chunk c of row r from its x values: normalized, weighted, stored. Every
 * lane of the wave calls it with the same step (the quantizers shuffle);
 * n == 0 marks a lane past the row's end. */
template <int YT, int MODE>
MLA_DEV void emit(const norm_job &j, int64_t r, int64_t c, int n, const float x[kChunk], float inv,
                  int lane)
{
    float w[kChunk], y[kChunk];
    load8_any<MODE>(j.wdt, j.w, kChunk * c * j.ws, j.ws, n, w);
#pragma unroll
    for (int k = 0; k < kChunk; ++k)
        y[k] = (x[k] * inv) * w[k];
    if constexpr (is_fp8_v<YT>)
        quant_fp8<YT, MODE>(j, r, c, n, y, lane);
    else if constexpr (YT == MLA_DTYPE_FP4X2)
        quant_fp4<MODE>(j, r, c, n, y, lane);
    else if (n > 0)
        store8<YT, MODE>(j.y, r * j.ys0 + kChunk * c * j.ys1, j.ys1, n, y);
}

template <int MODE> MLA_DEV int chunk_n(const norm_job &j, int64_t c, int64_t nch)
{
    return c < nch ? mode_chunk_len<MODE>(j.D - kChunk * c) : 0;
}

/* A row of at most kHold steps (bf16 x, wide access, float y: the
 * quantizers' extra registers would spill): every chunk loaded at
 * once and its bits kept in registers for the output pass (two memory round trips per row instead
 * of one per step: at T = 1024 a row is a wave's whole work and latency, not bandwidth, bounded the
 * step-by-step version). */
template <int YT> MLA_DEV void norm_row_held(const norm_job &j, int64_t r, int lane)
{
    constexpr int W = MLA_WAVE_SIZE;
    const int64_t nch = (j.D + kChunk - 1) / kChunk, steps = (nch + W - 1) / W;
    const uint16_t *xrow = static_cast<const uint16_t *>(j.x) + r * j.xs0;
    uint32_t raw[kHold][4]; /* bf16 pairs: 4 registers a chunk */
#pragma unroll
    for (int k = 0; k < kHold; ++k) {
        const int64_t c = (int64_t)k * W + lane;
#pragma unroll
        for (int i = 0; i < 4; ++i)
            raw[k][i] = 0;
        if (k < steps && c < nch) {
            const mla_u32x4 q = *reinterpret_cast<const mla_u32x4 *>(xrow + kChunk * c);
#pragma unroll
            for (int i = 0; i < 4; ++i)
                raw[k][i] = q.v[i];
        }
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < kHold; ++k)
#pragma unroll
        for (int i = 0; i < kChunk; ++i) {
            const float v = unpack_value<MLA_DTYPE_BF16>(raw[k], i);
            ss += v * v;
        }
    ss = wave_sum(ss);
    const float inv = 1.0f / sqrtf(ss / (float)j.D + j.eps);
#pragma unroll
    for (int k = 0; k < kHold; ++k) {
        if (k >= steps)
            break;
        const int64_t c = (int64_t)k * W + lane;
        float t[kChunk];
#pragma unroll
        for (int i = 0; i < kChunk; ++i)
            t[i] = unpack_value<MLA_DTYPE_BF16>(raw[k], i);
        emit<YT, kWide>(j, r, c, chunk_n<kWide>(j, c, nch), t, inv, lane);
    }
}

template <int XT, int YT, int MODE> MLA_DEV void norm_row(const norm_job &j, int64_t r, int lane)
{
    constexpr int W = MLA_WAVE_SIZE;
    const int64_t nch = (j.D + kChunk - 1) / kChunk, steps = (nch + W - 1) / W;
    const int64_t xrow = r * j.xs0;
    /* Sum of squares: the first kUnroll steps' loads all in flight at once. */
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
        if (k >= steps)
            break;
        const int64_t c = (int64_t)k * W + lane;
        float t[kChunk];
        load8<XT, MODE>(j.x, xrow + kChunk * c * j.xs1, j.xs1, chunk_n<MODE>(j, c, nch), t);
#pragma unroll
        for (int i = 0; i < kChunk; ++i)
            ss += t[i] * t[i];
    }
    for (int64_t c = (int64_t)kUnroll * W + lane; c < nch; c += W) {
        float t[kChunk];
        load8<XT, MODE>(j.x, xrow + kChunk * c * j.xs1, j.xs1, chunk_n<MODE>(j, c, nch), t);
#pragma unroll
        for (int i = 0; i < kChunk; ++i)
            ss += t[i] * t[i];
    }
    ss = wave_sum(ss);
    const float inv = 1.0f / sqrtf(ss / (float)j.D + j.eps);

    /* The row again (this wave just read it: L1/L2 hits, not HBM traffic),
     * in steps uniform across the wave: the quantizers' teams shuffle. */
#pragma unroll 1
    for (int64_t s = 0; s < steps; ++s) {
        const int64_t c = s * W + lane;
        const int n = chunk_n<MODE>(j, c, nch);
        float t[kChunk];
        load8<XT, MODE>(j.x, xrow + kChunk * c * j.xs1, j.xs1, n, t);
        emit<YT, MODE>(j, r, c, n, t, inv, lane);
    }
}

/* Field by field, so that the chosen job's fields are plain selects. */
MLA_DEV norm_job pick(const norm_job &a, const norm_job &b, bool second)
{
    norm_job j;
    j.x = second ? b.x : a.x;
    j.w = second ? b.w : a.w;
    j.y = second ? b.y : a.y;
    j.scales = second ? b.scales : a.scales;
    j.rows = second ? b.rows : a.rows;
    j.D = second ? b.D : a.D;
    j.xs0 = second ? b.xs0 : a.xs0;
    j.xs1 = second ? b.xs1 : a.xs1;
    j.ws = second ? b.ws : a.ws;
    j.ys0 = second ? b.ys0 : a.ys0;
    j.ys1 = second ? b.ys1 : a.ys1;
    j.ss0 = second ? b.ss0 : a.ss0;
    j.ss1 = second ? b.ss1 : a.ss1;
    j.eps = second ? b.eps : a.eps;
    j.wdt = second ? b.wdt : a.wdt;
    return j;
}

/* Blocks [0, blocks0) do the rows of j0, the others those of j1 (none when
 * there is one job): a block's job is fixed, so only its fields stay live.
 * On NVIDIA two resident blocks per SM: ptxas' default target spilled the
 * f16 -> fp8/fp4 variants at 64 registers. */
template <int XT, int YT, int MODE, bool HOLD>
__global__ MLA_LAUNCH_BOUNDS_BLOCKS(MLA_HIP_BLOCK, 2) void rmsnorm_kernel(norm_job j0, norm_job j1,
                                                                          unsigned blocks0)
{
    constexpr int W = MLA_WAVE_SIZE;
    const bool second = blockIdx.x >= blocks0;
    const norm_job j = pick(j0, j1, second);
    const int64_t block = second ? blockIdx.x - blocks0 : blockIdx.x;
    const int64_t blocks = second ? gridDim.x - blocks0 : blocks0;
    const int lane = (int)(threadIdx.x % W);
    const int wave = mla_wave_uniform((int)(threadIdx.x / W)), waves = blockDim.x / W;
    for (int64_t row = block * waves + wave; row < j.rows; row += blocks * waves)
        if constexpr (HOLD)
            norm_row_held<YT>(j, row, lane);
        else
            norm_row<XT, YT, MODE>(j, row, lane);
}

/* x's dtype, y's dtype, the job, and whether its rows take wide accesses
 * (contiguous, aligned, whole chunks). */
struct norm_call {
    int32_t xdt, ydt;
    bool wide;
    norm_job job;
};

norm_call make_call(const mla_tensor &x, const mla_tensor &w, const mla_tensor &y, float eps)
{
    norm_call c = {x.dtype,
                   y.dtype,
                   x.shape[1] % kChunk == 0 && wide_ok(x, 1) && wide_ok(y, 1) && wide_ok(w, 0),
                   {}};
    norm_job &j = c.job;
    j.x = x.data;
    j.w = w.data;
    j.y = y.data;
    j.rows = x.shape[0];
    j.D = x.shape[1];
    j.xs0 = x.stride[0];
    j.xs1 = x.stride[1];
    j.ws = w.stride[0];
    j.ys0 = y.stride[0];
    j.ys1 = y.stride[1];
    j.eps = eps;
    j.wdt = w.dtype;
    return c;
}

mla_status check_memory(mla_context *ctx, const mla_tensor *const *t, const char *const *names,
                        int n)
{
    for (int i = 0; i < n; ++i) {
        mla_status st = mla_hip_check_tensor_memory(ctx, t[i], names[i]);
        if (st != MLA_OK)
            return st;
    }
    return MLA_OK;
}

/* f(dtype_tag<dt>{}) for every y dtype: the floats, the fp8s, FP4X2. */
template <typename F> mla_status with_norm_out(int dt, F &&f)
{
    if (dt == MLA_DTYPE_FP4X2)
        return f(dtype_tag<MLA_DTYPE_FP4X2>{});
    if (dt == MLA_DTYPE_FP8_E4M3FN || dt == MLA_DTYPE_FP8_E4M3FNUZ)
        return with_cache_dtype(dt, f);
    return with_float(dt, f);
}

/* One launch for the rows of a and b (both of a's dtypes; wide: both
 * take wide accesses): a wave per row up to the device's fill, each job its
 * own blocks. */
/* The job's rows fit norm_row_held (kHold steps on every wave size). */
bool held(const norm_job &j) { return (j.D + kChunk - 1) / kChunk <= kHoldChunks; }

mla_status launch(mla_context *ctx, const norm_call &a, const norm_job &b, bool wide)
{
    const unsigned blocks0 = mla_hip_grid_blocks(ctx, a.job.rows * MLA_WAVE_SIZE, MLA_HIP_BLOCK);
    const unsigned blocks1 =
        b.rows ? mla_hip_grid_blocks(ctx, b.rows * MLA_WAVE_SIZE, MLA_HIP_BLOCK) : 0;
    hipStream_t stream = mla_hip_state_of(ctx)->stream;
    return with_float(a.xdt, [&](auto xt) {
        return with_norm_out(a.ydt, [&](auto yt) {
            return with_access(wide, [&](auto m) {
                constexpr int XT = decltype(xt)::value, YT = decltype(yt)::value;
                constexpr int M = decltype(m)::value;
                if constexpr (XT == MLA_DTYPE_BF16 && M == kWide && !is_fp8_v<YT> &&
                              YT != MLA_DTYPE_FP4X2) {
                    if (held(a.job) && (b.rows == 0 || held(b))) {
                        rmsnorm_kernel<XT, YT, M, true>
                            <<<blocks0 + blocks1, MLA_HIP_BLOCK, 0, stream>>>(a.job, b, blocks0);
                        return mla_hip_check_launch(ctx, "rmsnorm kernel launch");
                    }
                }
                rmsnorm_kernel<XT, YT, M, false>
                    <<<blocks0 + blocks1, MLA_HIP_BLOCK, 0, stream>>>(a.job, b, blocks0);
                return mla_hip_check_launch(ctx, "rmsnorm kernel launch");
            });
        });
    });
}

} // namespace

mla_status mla_hip_rmsnorm(mla_context *ctx, const mla_rmsnorm_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const mla_tensor *t[] = {&a->x, &a->w, &a->y};
    const char *names[] = {"x", "w", "y"};
    mla_status st = check_memory(ctx, t, names, 3);
    if (st != MLA_OK)
        return st;
    const norm_call c = make_call(a->x, a->w, a->y, a->eps);
    return launch(ctx, c, norm_job{}, c.wide);
}

mla_status mla_hip_qk_rmsnorm(mla_context *ctx, const mla_qk_rmsnorm_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const int32_t qd = a->q_out.dtype;
    const bool quant =
        qd == MLA_DTYPE_FP4X2 || qd == MLA_DTYPE_FP8_E4M3FN || qd == MLA_DTYPE_FP8_E4M3FNUZ;
    const mla_tensor *t[] = {&a->q, &a->q_w, &a->kv, &a->kv_w, &a->q_out, &a->kv_out, &a->q_scales};
    const char *names[] = {"q", "q_w", "kv", "kv_w", "q_out", "kv_out", "q_scales"};
    mla_status st = check_memory(ctx, t, names, quant ? 7 : 6);
    if (st != MLA_OK)
        return st;
    norm_call q = make_call(a->q, a->q_w, a->q_out, a->q_eps);
    if (quant) {
        q.job.scales = a->q_scales.data;
        q.job.ss0 = a->q_scales.stride[0];
        q.job.ss1 = a->q_scales.stride[1];
    }
    const norm_call kv = make_call(a->kv, a->kv_w, a->kv_out, a->kv_eps);
    if (q.xdt == kv.xdt && q.ydt == kv.ydt)
        return launch(ctx, q, kv.job, q.wide && kv.wide);
    st = launch(ctx, q, norm_job{}, q.wide);
    return st == MLA_OK ? launch(ctx, kv, norm_job{}, kv.wide) : st;
}
