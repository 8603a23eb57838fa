/* What every body of the HIP attention (hip/attention.hip) shares: the
 * block size and column chunks, the per-vendor geometry of the matrix
 * bodies, the kernel's descriptor (att_desc: everything the host worked out
 * for the call), the block record (att_blk: one (work item, row tile,
 * column chunk)) and the shared-memory layout of the synchronous bodies. */
#ifndef MLA_HIP_ATTENTION_TRAITS_H
#define MLA_HIP_ATTENTION_TRAITS_H

#include "hip/device_sync.h" /* first: the runtime headers select MLA_HD's device form */

#include "core/attention_plan.h"
#include "hip/cache_chunk.h"
#include "hip/mfma.h"

namespace
{

constexpr int kThreads = 256;
constexpr int kColChunk = 512;    /* O columns per block (matrix bodies) */
constexpr int kColChunkFma = 128; /* O columns per block (plain launches) */
constexpr int kNKFma = 16;        /* keys per tile of the plain body */
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

/* The geometry of the host's vendor (the device pass of that vendor uses the
 * same constants; a device without the matrix unit runs the plain body on
 * the same tiles). NVIDIA's matrix body (hip/attention_nv.h) has its own
 * tiles; kTM there is the plain body's. */
#if defined(__CUDACC__)
constexpr int kTM = 16, kNW = 8; /* the plain body's rows; the matrix body's warps */
constexpr int64_t kSmemMax = 227 * 1024;
/* L + R the matrix body takes: its key rows, two tiles, in shared memory */
constexpr int kMaxDimsMatrix = 640;
#else
constexpr int kTM = 32, kNKMat = 32, kNW = 4, kTK = 8, kKSW = 18;
[[maybe_unused]] constexpr int kCTW = 4; /* O column tiles per wave */
constexpr int64_t kSmemMax = 64 * 1024;  /* gfx942's LDS */
/* L + R the matrix body takes: every wave runs all kKSW of its k-steps
 * (no per-step test: loop-invariant conditions become scalar registers that
 * gfx9 would spill), over q fragments and key rows zero beyond L + R */
constexpr int kMaxDimsMatrix = kNW * kTK * kKSW; /* 576 */
#endif

/* member functions of the per-path structs (MLA_DEV is static) */
#define MLA_ATT_MEMBER __device__ __forceinline__

enum { KIND_FMA = 0, KIND_NV = 1, KIND_AMD = 2 };
enum { PATH_FMA = 0, PATH_MATRIX = 1 };

/* numbers, not the enum: the preprocessor compares them */
#if defined(MLA_HAVE_MMA_BF16) || defined(MLA_EMU_MATRIX_NV)
#define MLA_ATT_MATRIX_KIND 1 /* KIND_NV */
#elif defined(MLA_HAVE_MFMA_BF16) || defined(MLA_EMU_MATRIX_AMD)
#define MLA_ATT_MATRIX_KIND 2 /* KIND_AMD */
#else
#define MLA_ATT_MATRIX_KIND 0 /* KIND_FMA */
#endif

struct att_desc {
    cache_dev c;
    const uint8_t *q;
    const int32_t *table, *ctx_lens, *cu_q, *topk, *splits;
    const float *sinks;
    void *o;
    float *lse;
    float *part_o, *part_lse;
    const mla_attention_work *work;
    /* element strides, 32-bit (the host refuses larger ones): fewer scalar
     * registers for the kernel's uniform values */
    int32_t qs0, qs1, qs2, bts0, bts1, cls, cus, tks0, tks1, sks, os0, os1, os2, lse0, lse1;
    int32_t q_dtype, paged, sparse, o_bf16;
    int32_t max_splits, S, H, HT, JT, NHT, NJT, NCC, num_items;
    int32_t D, DP, KS, nope_chunks, cpk;
    /* chunk c of a key part (nope / rope) starts (c >> sh) * ts + (c & (2^sh
     * - 1)) * cb bytes after the part's first byte (key_ref); rope_bf16: the
     * rope part holds bf16 (bf16 caches, FP8_SCALED) */
    int32_t n_ts, n_sh, n_cb, r_ts, r_sh, r_cb, rope_bf16, tok_bytes;
    /* NVIDIA body (hip/attention_nv.h): raw key row bytes (fp8 caches) and
     * where FP8_SCALED's scales sit in it; cp.async usable; f32 q (hi + lo) */
    int32_t rb, raw_so, async, qsplit;
    int32_t bulk;  /* > 0: bytes of a token, copied by one bulk copy (sm_90+) */
    int32_t bs_sh; /* log2 of the block size when a power of two, else -1 */
    float ss2;     /* score scale, log2 units */
    float kso;     /* output factor: k_scale of fp8 NORMAL / SHUFFLED, else 1 */
};

/* What a block works on. Rows r < TM of the tile: query row j0 + r / HT,
 * head h0 + r % HT. */
struct att_blk {
    int32_t s, n_s, c_s, j0, h0, c0, split, direct;
    int32_t kv_lo, kv_hi;
    int32_t v, jt, live; /* the kernel's cursor (attention_kernel); live: a block to run */
    int64_t row0;        /* first global row of the sequence */
    const int32_t *trow; /* the sequence's block-table row (paged) */
    const int32_t *krow; /* the tile's top-k row (sparse) */
};

/* Shared memory of a block, in bytes from the start. */
struct att_smem {
    int32_t desc, blk, orow, sp, ps, as, fs, kp, kb, ks, ks_bytes, total;
};

static __host__ __device__ inline int32_t align16(int32_t v) { return (v + 15) / 16 * 16; }

/* The plain and gfx9 bodies: one key tile with its positions KP and cache
 * blocks KB. */
static __host__ __device__ inline att_smem smem_layout(int TM, int NK, int NPART, int DP)
{
    att_smem s;
    /* the kernel's descriptor and block record, read from shared memory
     * (vector registers) instead of being held in scalar registers, which
     * gfx9 runs out of; per-row output addresses */
    s.desc = 0;
    s.blk = align16((int)sizeof(att_desc));
    s.orow = s.blk + align16((int)sizeof(att_blk));
    s.sp = s.orow + align16(TM * 8);
    s.ps = s.sp + align16(NPART * TM * NK * 4);
    const int ps_bytes = TM * NK * 4 > TM * (NK + 8) * 2 ? TM * NK * 4 : TM * (NK + 8) * 2;
    s.as = s.ps + align16(ps_bytes);
    s.fs = s.as + align16(TM * 4);
    s.kp = s.fs + align16(TM * 4);
    s.kb = s.kp + align16(NK * 4);
    s.ks = s.kb + align16(NK * 16);
    s.ks_bytes = align16(NK * DP * 2);
    s.total = s.ks + s.ks_bytes;
    return s;
}

} // namespace

#endif
