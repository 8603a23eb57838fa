/* Reference fused RoPE + concat + cache write (mla_fused_rope_concat_cache):
 *
 *     q_cat[t, h, :L] = q_nope[t, h, :],  q_cat[t, h, L:] = RoPE(q_pe[t, h, :], q_pos[t])
 *     for every key token j < Tk (Tk >= T, each one rotated):
 *         k_rot = RoPE(k_pe[j, :], k_pos[j]);  cache[slots[j]] = [k_nope[j, :] | k_rot]
 *         k_pe_out[j, :] = k_rot                                         (if wanted)
 *
 * q_nope is the absorbed query of MLA.md section 2 step 4 (q_nope @ W_kc, L
 * dims per head, the output of mla_ref_batched_gemm), so q_cat is the query
 * the absorbed attention (core/ref/attention.c) scores with. This is one of
 * the three RoPE sites of the RoPE-once plan (MLA.md section 3).
 *
 * RoPE is mla_ref_rope_row (the arithmetic of mla_rope) giving fp32 values;
 * each value reaches q_cat and k_pe_out by one rounding from fp32 (BF16 RNE,
 * F32 exact, fp8 sat_fp8(fl(v / q_scale))), and the cache through the one
 * cache writer, mla_ref_cache_write_slot. So the cache bytes equal those of
 * mla_rope into an F32 buffer followed by mla_cache_write from it. */
#include <stdlib.h>

#include "core/checked.h"
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

/* One q_cat value: fp8 as sat_fp8(fl(v / q_scale)), other dtypes rounded once. */
static void store_q(const mla_tensor *q_cat, int64_t off, float v, float q_scale)
{
    if (q_cat->dtype == MLA_DTYPE_FP8_E4M3FN || q_cat->dtype == MLA_DTYPE_FP8_E4M3FNUZ) {
        const float q = v / q_scale;
        mla_ref_store_u8(q_cat, off, mla_f32_to_fp8(q, q_cat->dtype, MLA_SATURATE));
    } else {
        mla_ref_store_f32(q_cat, off, v, MLA_SATURATE);
    }
}

/* q_cat rows: nope copied, pe rotated by the token's position. */
static void write_q_cat(const mla_rope_cache_op_args *a, int64_t R, float *rot)
{
    const mla_tensor *qn = &a->q_nope, *qp = &a->q_pe, *qc = &a->q_cat;
    const int64_t T = qn->shape[0], H = qn->shape[1], L = qn->shape[2];
    for (int64_t t = 0; t < T; ++t) {
        const int64_t pos = mla_ref_load_index(&a->q_pos, t * a->q_pos.stride[0]);
        for (int64_t h = 0; h < H; ++h) {
            for (int64_t i = 0; i < L; ++i)
                store_q(qc, mla_ref_offset3(qc, t, h, i),
                        mla_ref_load_f32(qn, mla_ref_offset3(qn, t, h, i)), a->q_scale);
            mla_ref_rope_row(qp, mla_ref_offset3(qp, t, h, 0), qp->stride[2], &a->cos, &a->sin, pos,
                             a->style, R, rot);
            for (int64_t r = 0; r < R; ++r)
                store_q(qc, mla_ref_offset3(qc, t, h, L + r), rot[r], a->q_scale);
        }
    }
}

mla_status mla_ref_rope_cache(mla_context *ctx, const mla_rope_cache_op_args *a)
{
    const int64_t L = a->desc.kv_lora, R = a->desc.rope, Tk = a->k_nope.shape[0];
    float *row; /* [k_nope | k_rot]; R: q's rot too */
    MLA_TRY(mla_alloc_array(ctx, (void **)&row, L + R, 1, sizeof *row, "cache_desc"));
    write_q_cat(a, R, row + L);
    for (int64_t j = 0; j < Tk; ++j) {
        const int64_t pos = mla_ref_load_index(&a->k_pos, j * a->k_pos.stride[0]);
        float *k_rot = row + L;
        mla_ref_rope_row(&a->k_pe, mla_ref_offset2(&a->k_pe, j, 0), a->k_pe.stride[1], &a->cos,
                         &a->sin, pos, a->style, R, k_rot);
        if (a->k_pe_out.data)
            for (int64_t r = 0; r < R; ++r)
                mla_ref_store_f32(&a->k_pe_out, mla_ref_offset2(&a->k_pe_out, j, r), k_rot[r],
                                  MLA_SATURATE);
        const int64_t slot = mla_ref_load_index(&a->slots, j * a->slots.stride[0]);
        if (slot < 0) /* "do not write" */
            continue;
        for (int64_t i = 0; i < L; ++i)
            row[i] = mla_ref_load_f32(&a->k_nope, mla_ref_offset2(&a->k_nope, j, i));
        mla_ref_cache_write_slot(&a->desc, &a->cache, slot, row);
    }
    free(row);
    return MLA_OK;
}
