/* Per-target facts the kernels are written against, selected by the
 * compiler's target macros (ggml's vendors/ headers show the idea).
 *
 * MLA_WAVE_SIZE is the wave (warp) width of the code being compiled: 64 on
 * gfx9 (gfx90a, gfx942, gfx950), 32 on NVIDIA and on AMD targets that run
 * wave32. Device code must use it instead of a literal. The AMD host pass
 * serves every --offload-arch at once and so cannot know the device's value;
 * there it is MLA_WAVE_SIZE_MAX, and host code uses only that bound (block
 * sizes are multiples of it, so they hold whole waves on every target).
 *
 * Matrix-unit wrappers (MFMA on gfx9, mma on NVIDIA) belong here too, each
 * next to a plain-FMA path that is always correct; gfx950-only builtins go
 * behind `#if defined(__gfx950__)`. */
#ifndef MLA_HIP_VENDOR_H
#define MLA_HIP_VENDOR_H

#include "hip/hip_compat.h"

#define MLA_WAVE_SIZE_MAX 64

#if defined(__CUDACC__)
#define MLA_WAVE_SIZE 32
#elif defined(__HIP_DEVICE_COMPILE__) && defined(__GFX9__)
#define MLA_WAVE_SIZE 64
#elif defined(__HIP_DEVICE_COMPILE__)
#define MLA_WAVE_SIZE 32 /* gfx10/gfx11/gfx12 compile for wave32 by default */
#else
#define MLA_WAVE_SIZE MLA_WAVE_SIZE_MAX
#endif

#if MLA_WAVE_SIZE_MAX % MLA_WAVE_SIZE != 0
#error "MLA_WAVE_SIZE_MAX must be a multiple of every wave size"
#endif

/* Launch bounds with a floor of resident blocks per multiprocessor, for a
 * kernel where ptxas' own register target would spill (it caps registers at
 * 64K / (threads * blocks) instead). HIP's second argument means minimum
 * waves per execution unit, so AMD takes the block size alone. */
#if defined(__CUDACC__)
#define MLA_LAUNCH_BOUNDS_BLOCKS(threads, blocks) __launch_bounds__(threads, blocks)
#else
#define MLA_LAUNCH_BOUNDS_BLOCKS(threads, blocks) __launch_bounds__(threads)
#endif

#endif
