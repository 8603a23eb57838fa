/* Asynchronous copies into shared memory on NVIDIA (sm_80+ cp.async; sm_90+
 * bulk copies completing on an mbarrier, the mbarrier itself and the proxy
 * fence between ordinary stores and the copy engine's writes), each with
 * its CPU emulation for hip/emu. Only the NVIDIA device pass and the wave-32
 * emulation have them (MLA_IDX_MMA_NV). */
#ifndef MLA_HIP_NV_COPY_H
#define MLA_HIP_NV_COPY_H

#include "hip/device_sync.h"

/* cp.async (sm_80+): BYTES (4, 8 or 16) from global src to shared dst without
 * registers, zero-filled when !valid; commit closes a group, wait<N> returns
 * once at most N of this thread's groups are still in flight. Only the
 * issuing thread reads what it copied. The emulation copies at once. */
#if MLA_IDX_MMA_NV
template <int BYTES> MLA_DEV void cp_async(void *dst, const void *src, bool valid)
{
#if MLA_IDX_EMU
    if (valid)
        memcpy(dst, src, BYTES);
    else
        memset(dst, 0, BYTES);
#else
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    const int n = valid ? BYTES : 0;
    if constexpr (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(n) : "memory");
    else if constexpr (BYTES == 8)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(d), "l"(src), "r"(n) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(d), "l"(src), "r"(n) : "memory");
#endif
}

/* The 16-byte copy with an L2 policy of evict-first: the key cache streams
 * through once per call (far more bytes than the L2 holds), and the logits
 * the call writes should outlive it there, for the top-k that reads them
 * next. */
MLA_DEV void cp_async16_stream(void *dst, const void *src, bool valid)
{
#if MLA_IDX_EMU
    cp_async<16>(dst, src, valid);
#else
    uint64_t pol;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(d),
                 "l"(src), "r"(valid ? 16 : 0), "l"(pol)
                 : "memory");
#endif
}

MLA_DEV void cp_async_commit()
{
#if !MLA_IDX_EMU
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

template <int N> MLA_DEV void cp_async_wait()
{
#if !MLA_IDX_EMU
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

/* Bulk copies (sm_90+): one thread moves BYTES (a multiple of 16, both
 * addresses 16-byte aligned) from global to shared memory, completing as
 * transaction bytes on an mbarrier. A phase of the mbarrier ends when its
 * `count` arrivals (init) have come and every byte announced by
 * arrive_expect_tx has landed; waiters test the parity of the phase they
 * wait for (a wait for parity p returns once the phase of parity p is over:
 * at once for p = 1 on a fresh barrier). The emulation keeps the count, the
 * pending arrivals, the bytes and the phase of each barrier and really
 * waits; its copies land at their issue. */
#if MLA_IDX_EMU || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
#define MLA_IDX_BULK 1
#if MLA_IDX_EMU
struct mla_emu_mbar {
    uint32_t count = 0, pending = 0, phase = 0;
    int64_t tx = 0;
};
struct mla_emu_mbars {
    std::mutex m;
    std::condition_variable cv;
    std::map<const void *, mla_emu_mbar> bars;
};
inline mla_emu_mbars mla_emu_mb;

/* arrivals and bytes landed (negative: announced) on bar; the phase ends
 * when no arrival and no byte is outstanding */
static inline void mla_emu_mbar_update(const void *bar, uint32_t arrivals, int64_t landed)
{
    std::lock_guard<std::mutex> lk(mla_emu_mb.m);
    mla_emu_mbar &b = mla_emu_mb.bars[bar];
    b.pending -= arrivals;
    b.tx -= landed;
    if (b.pending == 0 && b.tx == 0) {
        b.phase ^= 1u;
        b.pending = b.count;
        mla_emu_mb.cv.notify_all();
    }
}
#endif

MLA_DEV void mbar_init(uint64_t *bar, uint32_t count)
{
#if MLA_IDX_EMU
    std::lock_guard<std::mutex> lk(mla_emu_mb.m);
    mla_emu_mbar &b = mla_emu_mb.bars[bar];
    b.count = b.pending = count;
    b.phase = 0;
    b.tx = 0;
#else
    asm volatile(
        "mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"((uint32_t)__cvta_generic_to_shared(bar)),
        "r"(count)
        : "memory");
#endif
}

/* Makes this thread's earlier mbar_init visible to the copy engine's
 * arrivals and transactions (the other threads: after a barrier). */
MLA_DEV void mbar_init_fence()
{
#if !MLA_IDX_EMU
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

/* This thread's arrival, announcing BYTES still to land in the phase. */
MLA_DEV void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes)
{
#if MLA_IDX_EMU
    mla_emu_mbar_update(bar, 1, -(int64_t)bytes);
#else
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                     (uint32_t)__cvta_generic_to_shared(bar)),
                 "r"(bytes)
                 : "memory");
#endif
}

/* This thread's arrival (release: its earlier memory accesses are seen by
 * the threads the phase's end releases). */
MLA_DEV void mbar_arrive(uint64_t *bar)
{
#if MLA_IDX_EMU
    mla_emu_mbar_update(bar, 1, 0);
#else
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(
                     (uint32_t)__cvta_generic_to_shared(bar))
                 : "memory");
#endif
}

/* An arrival on bar once this thread's cp.async copies so far have landed
 * (cp.async.mbarrier.arrive.noinc: it counts as one of the phase's
 * arrivals). */
MLA_DEV void cp_async_mbar_arrive(uint64_t *bar)
{
#if MLA_IDX_EMU
    mla_emu_mbar_update(bar, 1, 0);
#else
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(
                     (uint32_t)__cvta_generic_to_shared(bar))
                 : "memory");
#endif
}

MLA_DEV void mbar_wait(uint64_t *bar, uint32_t parity)
{
#if !MLA_IDX_EMU
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(bar);
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.b32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(a), "r"(parity)
                     : "memory");
#else
    std::unique_lock<std::mutex> lk(mla_emu_mb.m);
    mla_emu_mb.cv.wait(lk, [&] { return mla_emu_mb.bars[bar].phase != (parity & 1u); });
#endif
}

/* Orders this thread's generic shared-memory accesses before its (and,
 * after a barrier, any thread's) later bulk copies into the same bytes, and
 * its stores before reads of the async proxy (wgmma operands). */
MLA_DEV void fence_proxy_async()
{
#if !MLA_IDX_EMU
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

MLA_DEV void bulk_copy(void *dst, const void *src, uint32_t bytes, uint64_t *bar)
{
#if MLA_IDX_EMU
    memcpy(dst, src, bytes);
    mla_emu_mbar_update(bar, 0, bytes);
#else
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
        "[%3];" ::"r"((uint32_t)__cvta_generic_to_shared(dst)),
        "l"(src), "r"(bytes), "r"((uint32_t)__cvta_generic_to_shared(bar))
        : "memory");
#endif
}

/* BYTES at src (global memory) into the L2 ahead of their loads, by this
 * thread alone: one prefetch per 128-byte line (the bulk prefetch takes a
 * warp-uniform address, so lanes with their own keys would run one at a
 * time); no effect on results. */
MLA_DEV void prefetch_l2(const void *src, uint32_t bytes)
{
#if MLA_IDX_EMU
    (void)src, (void)bytes;
#else
    const char *p = static_cast<const char *>(src);
    for (uint32_t o = 0; o < bytes; o += 128)
        asm volatile("prefetch.L2 [%0];" ::"l"(p + o));
    asm volatile("prefetch.L2 [%0];" ::"l"(p + bytes - 1)); /* the last line */
#endif
}
#else
#define MLA_IDX_BULK 0
#endif
#endif

#endif
