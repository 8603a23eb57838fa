/* libmla: safetensors files, the DeepSeek attention-layer weight loader and
 * the seeded weight generator (MLA.md sections 2, 5 and 7).
 * Included by mla/mla.h; conventions are those of mla.h.
 *
 * Errors: every call here takes an mla_context *ctx first. For calls that
 * touch only host memory ctx may be NULL; then only the status comes back.
 * When ctx is given, a failure records the refused item (a tensor name, a
 * header field, a path) in mla_context_error_param() and a sentence in
 * mla_context_error_detail(), as for every op. A failed call writes nothing
 * to its outputs. */
#ifndef MLA_MLA_WEIGHTS_H
#define MLA_MLA_WEIGHTS_H

#ifndef MLA_MLA_H
#error "include mla/mla.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------ safetensors */

/* A safetensors file open for reading: [8-byte little-endian header length
 * N][N bytes of JSON][data]. The header is parsed and validated at open; the
 * data is read on demand (files may be far larger than memory).
 *
 * File dtypes and the library dtype their bytes are read as:
 *   F64 F32 F16 BF16 -> the same; F8_E4M3 -> FP8_E4M3FN; F8_E8M0 -> E8M0;
 *   U8 -> U8; I8 -> U8 (raw bytes); I32, I64 -> the same.
 * MXFP4 checkpoints (AMD Quark, e.g. Kimi-K2.6-MXFP4; vLLM/SGLang's
 * QuarkW4A4MXFP4) store both the packed fp4 codes ([out, in/2], element 2i
 * in the low nibble) and the e8m0 scales ([out, in/32]) as U8; the layer
 * loader reinterprets them as FP4X2 and E8M0. Any other dtype string is
 * refused with MLA_ERR_DTYPE.
 *
 * Refused at open: a file shorter than 8 bytes or than its header
 * (MLA_ERR_FORMAT), malformed JSON or a missing / mistyped field
 * (MLA_ERR_FORMAT), an unknown dtype (MLA_ERR_DTYPE), data_offsets whose
 * length is not product(shape) * element size (MLA_ERR_SHAPE), offsets that
 * overlap, leave holes, or run past the data (MLA_ERR_FORMAT: the layout
 * safetensors itself requires), duplicate names (MLA_ERR_FORMAT), sizes that
 * overflow 64 bits (MLA_ERR_OVERFLOW). An unreadable file is MLA_ERR_IO. */
typedef struct mla_safetensors mla_safetensors;

typedef struct mla_safetensors_info {
    const char *name;    /* owned by the file handle */
    char file_dtype[12]; /* the header's dtype string, e.g. "F8_E4M3" */
    mla_dtype dtype;     /* what the bytes are read as (table above) */
    int32_t ndim;
    int64_t shape[MLA_MAX_DIMS];
    int64_t offset; /* absolute byte offset of the data in the file */
    int64_t bytes;
} mla_safetensors_info;

MLA_API mla_status mla_safetensors_open(mla_context *ctx, const char *path, mla_safetensors **out);
MLA_API void mla_safetensors_close(mla_safetensors *file);
/* Tensors in header order. */
MLA_API int64_t mla_safetensors_count(const mla_safetensors *file);
MLA_API mla_status mla_safetensors_info_at(const mla_safetensors *file, int64_t index,
                                           mla_safetensors_info *out);
/* 1 when the file holds a tensor of that name. */
MLA_API int mla_safetensors_has(const mla_safetensors *file, const char *name);
/* MLA_ERR_FORMAT (param: the name) when there is no such tensor. */
MLA_API mla_status mla_safetensors_find(mla_context *ctx, const mla_safetensors *file,
                                        const char *name, mla_safetensors_info *out);
/* The __metadata__ value of key, NULL when absent. */
MLA_API const char *mla_safetensors_metadata(const mla_safetensors *file, const char *key);
/* Bytes read from the file so far, its header included. */
MLA_API int64_t mla_safetensors_bytes_read(const mla_safetensors *file);

/* Reads tensor `name` into dst: a contiguous tensor of the same shape whose
 * dtype is the read-as dtype, or any dtype of the same byte size with the
 * same number of bytes per row (U8 <-> FP4X2 / E8M0 reinterpretation).
 * dst may live in host memory (ctx may be NULL) or in the context's memory
 * (read through a bounded host buffer and mla_memcpy). */
MLA_API mla_status mla_safetensors_read(mla_context *ctx, mla_safetensors *file, const char *name,
                                        mla_tensor *dst);

/* A writer: tensors are added in order and written in that order (header
 * in insertion order, data section 8-byte aligned by padding the header with
 * spaces, as the format prescribes). The library dtype maps to the file
 * dtype by the table above; E8M0 and FP4X2 are written as U8 (Quark's
 * convention); FP8_E4M3FNUZ has no safetensors dtype (MLA_ERR_DTYPE). */
typedef struct mla_safetensors_writer mla_safetensors_writer;

MLA_API mla_status mla_safetensors_writer_create(mla_context *ctx, mla_safetensors_writer **out);
MLA_API void mla_safetensors_writer_destroy(mla_safetensors_writer *writer);
/* Copies the host bytes of a contiguous [shape] tensor of dtype. */
MLA_API mla_status mla_safetensors_writer_add(mla_context *ctx, mla_safetensors_writer *writer,
                                              const char *name, mla_dtype dtype, int32_t ndim,
                                              const int64_t *shape, const void *data);
/* The same without a copy: fill(user, name, buf, bytes) is called during
 * save to produce the bytes (nonzero return: the save fails with MLA_ERR_IO),
 * so a file larger than memory can be written one tensor at a time. */
typedef int (*mla_safetensors_fill_fn)(void *user, const char *name, void *buf, size_t bytes);
MLA_API mla_status mla_safetensors_writer_add_fill(mla_context *ctx, mla_safetensors_writer *writer,
                                                   const char *name, mla_dtype dtype, int32_t ndim,
                                                   const int64_t *shape,
                                                   mla_safetensors_fill_fn fill, void *user);
MLA_API mla_status mla_safetensors_writer_metadata(mla_context *ctx, mla_safetensors_writer *writer,
                                                   const char *key, const char *value);
MLA_API mla_status mla_safetensors_writer_save(mla_context *ctx, mla_safetensors_writer *writer,
                                               const char *path);

/* ---------------------------------------------------- DeepSeek layer weights */

/* How one projection weight is stored (and the form its GEMM consumes):
 *   BF16:      w BF16 [out, in]; scale.data NULL.
 *   FP8_BLOCK: w FP8_E4M3FN [out, in] + `*.weight_scale_inv` F32
 *              [ceil(out/128), ceil(in/128)] (weight = code * scale).
 *   MXFP4:     w FP4X2 [out, in/2] (file: `*.weight` U8) + scale E8M0
 *              [out, in/32] row-major (file: `*.weight_scale` U8), blocks
 *              of 32 along in; in % 32 == 0. */
typedef enum mla_weight_format {
    MLA_WEIGHT_BF16 = 0,
    MLA_WEIGHT_FP8_BLOCK = 1,
    MLA_WEIGHT_MXFP4 = 2,
    /* Made by the loader from an FP8_BLOCK kv_b_proj on request
     * (MLA_KV_B_FP8_TO_TENSOR), or read as such: w FP8_E4M3FN [out, in],
     * scale F32 [1, 1] (a kv_b_proj whose `*.weight_scale_inv` is [1, 1], as
     * per-tensor fp8 checkpoints and the dump of a converted layer store it). */
    MLA_WEIGHT_FP8_TENSOR = 3,
    MLA_WEIGHT_FORMAT_COUNT
} mla_weight_format;

MLA_API const char *mla_weight_format_name(mla_weight_format format);

/* One format per projection (the generator's choice; what the loader found). */
typedef struct mla_layer_weight_formats {
    mla_weight_format q_a_proj; /* unused without q_lora */
    mla_weight_format q_b_proj; /* q_proj without q_lora */
    mla_weight_format kv_a_proj_with_mqa;
    mla_weight_format kv_b_proj;
    mla_weight_format o_proj;
    mla_weight_format idx_wq_b; /* the V3.2 indexer's projections */
    mla_weight_format idx_wk;
    mla_weight_format idx_weights_proj;
} mla_layer_weight_formats;

/* A loaded attention layer. One allocation in context memory holds every
 * tensor; free it with mla_layer_weights_free.
 *
 * W_kc and W_vc (MLA.md section 2) in the form their GEMMs consume:
 * - kv_b_proj BF16 or FP8_BLOCK: w_kc [H, nope, L] and w_vc [H, L, v] are
 *   strided views of kv_b_proj.w (no copy) for mla_batched_gemm; fp8 block
 *   scales stay in kv_b_proj.scale.
 * - kv_b_proj MXFP4: w_vc_fp4 is a view of kv_b_proj: codes [H, v, L/2]
 *   (rows nope .. nope+v of head h, packed along L) and scales [H, v, L/32]
 *   ROW_MAJOR, ready for mla_batched_gemm_a16wfp4 (x = o_lat [H, T, L]).
 *   The absorb contracts over nope, which the checkpoint does not pack, so
 *   w_kc_fp4 ([H, L, nope/2] codes + [H, L, nope/32] scales, ROW_MAJOR) is
 *   made at load: kv_b_proj's W_kc rows are dequantized and re-quantized
 *   along nope with options->kc_rule. This is a deliberate load-time
 *   transform (like aiter's weight preshuffle) and the only one the loader
 *   does; w_kc / w_vc are then empty (data NULL). */
typedef struct mla_layer_weights_ex {
    mla_layer_weights base;           /* what mla_prepare takes */
    mla_layer_weight_formats formats; /* as found in the file */
    mla_tensor w_kc;                  /* [H, nope, L] view; data NULL for MXFP4 */
    mla_tensor w_vc;                  /* [H, L, v] view; data NULL for MXFP4 */
    mla_mxfp4_operand w_kc_fp4;       /* MXFP4 kv_b_proj only (made at load) */
    mla_mxfp4_operand w_vc_fp4;       /* MXFP4 kv_b_proj only (a view) */
    int32_t has_indexer;              /* cfg->index_heads > 0 */
    mla_indexer_weights indexer;      /* k_norm weight and bias converted to F32 */
    void *storage;                    /* the allocation (context memory) */
    int64_t storage_bytes;
    float kv_b_tensor_scale; /* FP8_TENSOR kv_b_proj: its scale on the host (mla_batched_gemm's
                                w_scale); 1 otherwise */
    /* The config these weights are for: the loader's cfg with heads = cfg->heads /
     * world_size (what mla_plan_create takes for this rank). */
    mla_model_config config;
    int32_t tp_rank, tp_world_size; /* the slice loaded (0 of 1: the whole layer) */
    mla_mxfp4_rule kc_rule;         /* the rule w_kc_fp4 was made with */
} mla_layer_weights_ex;

/* What the loader does with an FP8_BLOCK kv_b_proj. W_kc and W_vc are
 * per-head views of it, which 128 x 128 block scales do not factor into
 * (mla_batched_gemm takes one scale per tensor), so a layer that runs the
 * absorb on fp8 checkpoints asks for one of the conversions:
 *   KEEP:      as stored (block scales in kv_b_proj.scale).
 *   TO_BF16:   dequantized, rounded to bf16 (format BF16).
 *   TO_TENSOR: dequantized and re-quantized with one scale for the tensor,
 *              as SGLang's block_quant_to_tensor_quant does: s = 448 / amax
 *              in fp32, code = sat_e4m3fn(x * s), stored scale 1 / s
 *              (format FP8_TENSOR; kv_b_tensor_scale holds it).
 * Both are deliberate load-time transforms, opt-in; other formats of
 * kv_b_proj are left as they are. */
typedef enum mla_kv_b_fp8 {
    MLA_KV_B_FP8_KEEP = 0,
    MLA_KV_B_FP8_TO_BF16 = 1,
    MLA_KV_B_FP8_TO_TENSOR = 2,
    MLA_KV_B_FP8_COUNT
} mla_kv_b_fp8;

/* Tensor parallelism (docs/CHECKPOINTS.md): with world_size W > 1, rank r
 * loads heads [r H/W, (r+1) H/W): the rows of those heads in q_b_proj (or
 * q_proj) and kv_b_proj, the columns of o_proj that read their v outputs,
 * and the matching rows / columns of their fp8 block scales or MXFP4 scales.
 * q_a_proj, kv_a_proj_with_mqa, the norms and the V3.2 indexer are
 * replicated (every rank writes the same latent cache and picks the same
 * top-k). mla_layer_forward on the slice gives rank r's partial o_proj
 * output; their sum over the ranks is the whole layer's y (the caller's
 * all-reduce). Refused: W < 1 or rank outside [0, W) (options.world_size,
 * options.rank), H % W != 0 (options.world_size), an fp8 projection whose
 * slice does not start and end on its 128 x 128 blocks or an MXFP4 o_proj
 * whose column slice does not on its 32-value blocks (the tensor's name,
 * MLA_ERR_SHAPE): a block scale cannot be split between ranks. An FP8_BLOCK
 * kv_b_proj converted TO_TENSOR gets one scale per rank's slice. */
typedef struct mla_layer_load_options {
    mla_mxfp4_rule kc_rule; /* rule of the W_kc re-quantization; PRODUCTION by default */
    const char *prefix;     /* NULL: "model.layers.<layer>.self_attn."; else used as given */
    mla_kv_b_fp8 kv_b_fp8;  /* KEEP by default */
    int32_t rank;           /* tensor-parallel rank, 0 by default */
    int32_t world_size;     /* tensor-parallel ranks; 0 or 1: the whole layer */
    /* 1: find and check every tensor and fill out's descriptors, formats and
     * config (data NULL, no storage, the W_kc / W_vc views empty) without
     * allocating or reading any tensor's bytes: what `mla weights inspect` shows.
     * Free nothing after it. */
    int32_t check_only;
} mla_layer_load_options;

MLA_API void mla_layer_load_options_default(mla_layer_load_options *out);

/* Loads layer `layer` of cfg from file (names of MLA.md section 2 under the
 * prefix: q_a_proj, q_a_layernorm, q_b_proj (or q_proj without q_lora),
 * kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj, and with
 * cfg->index_heads > 0 indexer.wq_b, indexer.wk, indexer.k_norm.weight /
 * .bias, indexer.weights_proj; each projection's `.weight` plus its
 * `.weight_scale_inv` (fp8) or `.weight_scale` (MXFP4)). Every shape is
 * checked against cfg. A missing tensor is MLA_ERR_FORMAT, a mis-shaped one
 * MLA_ERR_SHAPE, an unusable dtype MLA_ERR_DTYPE, each naming the tensor.
 * options may be NULL (defaults). */
MLA_API mla_status mla_layer_weights_load(mla_context *ctx, mla_safetensors *file,
                                          const mla_model_config *cfg, int64_t layer,
                                          const mla_layer_load_options *options,
                                          mla_layer_weights_ex *out);
/* The same for a checkpoint split into shards (model-0000k-of-0000n):
 * each tensor is taken from the first of the count files that holds it,
 * so a layer whose tensors straddle two shards loads whole. */
MLA_API mla_status mla_layer_weights_load_shards(mla_context *ctx, mla_safetensors *const *files,
                                                 int32_t count, const mla_model_config *cfg,
                                                 int64_t layer,
                                                 const mla_layer_load_options *options,
                                                 mla_layer_weights_ex *out);
MLA_API void mla_layer_weights_free(mla_context *ctx, mla_layer_weights_ex *weights);

/* ------------------------------------------------ Hugging Face checkpoints */

/* config.json of a DeepSeek-V2 / V3 / V3.2 or Kimi-K2 checkpoint
 * (docs/CHECKPOINTS.md). model: the attention layer's config, all heads
 * (name: the model_type, or the directory's name when read by
 * mla_checkpoint_open). Required: hidden_size, num_attention_heads,
 * q_lora_rank (null: no q compression), kv_lora_rank, qk_nope_head_dim,
 * qk_rope_head_dim, v_head_dim, rope_theta (or rope_parameters.rope_theta),
 * rms_norm_eps, max_position_embeddings, num_hidden_layers; rope_scaling
 * (or rope_parameters) null, "default", or of type yarn / deepseek_yarn with
 * factor and original_max_position_embeddings (beta_fast 32, beta_slow 1,
 * mscale 1, mscale_all_dim 0 when absent, as DeepSeek's and transformers'
 * code agree); the V3.2 index_n_heads, index_head_dim, index_topk all or
 * none (deepseek_v32 needs them); quantization_config optional (fp8: fmt
 * e4m3, weight_block_size [128, 128]). Unknown keys are ignored (a config
 * has dozens the attention does not read). Refused, param naming the field
 * ("rope_scaling.factor"): a missing or mistyped field (MLA_ERR_FORMAT), a
 * value out of range (MLA_ERR_OUT_OF_RANGE), fields that contradict each
 * other (qk_head_dim, an indexer without q_lora, mscale without
 * mscale_all_dim: MLA_ERR_FORMAT), what the library cannot honour (another
 * rope type, rope_interleave false, YaRN without truncation, another fp8
 * block: MLA_ERR_UNSUPPORTED); malformed JSON or a duplicate key
 * (MLA_ERR_FORMAT, param "config.json"). */
typedef struct mla_hf_config {
    mla_model_config model;
    int64_t num_layers;      /* num_hidden_layers */
    char model_type[32];     /* "deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", ... */
    char quant_method[16];   /* quantization_config.quant_method; "" without one */
    int64_t fp8_block[2];    /* fp8: weight_block_size; 0, 0 otherwise */
} mla_hf_config;

MLA_API mla_status mla_hf_config_parse(mla_context *ctx, const char *text, size_t len,
                                       mla_hf_config *out);
/* Reads and parses a config.json file (MLA_ERR_IO, param "path", when it
 * cannot be read). */
MLA_API mla_status mla_hf_config_load(mla_context *ctx, const char *path, mla_hf_config *out);
/* config.json text of a preset (mla_model_config_preset): the published
 * model's fields for the real models, the same form for the test configs;
 * NULL for an unknown name. Parsing it gives the preset (tests/test_hf_config.c). */
MLA_API const char *mla_model_config_preset_json(const char *name);

/* A checkpoint directory as Hugging Face publishes it: config.json, and
 * either model.safetensors.index.json ({"weight_map": {tensor: shard}})
 * with its shards, or one model.safetensors. Open reads config.json and the
 * index and checks that every shard the index names exists; a shard is
 * opened (its header read) only when a tensor of it is asked for, and only
 * the asked tensors' bytes are read, so loading layer N of a 700 GB
 * checkpoint reads layer N. Refused: dir not a directory, config.json or
 * both index and model.safetensors missing (MLA_ERR_IO, the file named), a
 * malformed index (MLA_ERR_FORMAT, "model.safetensors.index.json"), a shard
 * named in it absent (MLA_ERR_IO, the shard's name), a shard name with ".."
 * or starting with '/' (MLA_ERR_FORMAT), config.json refused as above. */
typedef struct mla_checkpoint mla_checkpoint;

MLA_API mla_status mla_checkpoint_open(mla_context *ctx, const char *dir, mla_checkpoint **out);
MLA_API void mla_checkpoint_close(mla_checkpoint *ck);
MLA_API const mla_hf_config *mla_checkpoint_config(const mla_checkpoint *ck);
/* The index's tensors, sorted by name; shard: the file name within dir. */
MLA_API int64_t mla_checkpoint_tensor_count(const mla_checkpoint *ck);
MLA_API mla_status mla_checkpoint_tensor_at(const mla_checkpoint *ck, int64_t index,
                                            const char **name, const char **shard);
/* The shard holding tensor `name` (opened on first use) and the tensor's
 * entry there. MLA_ERR_FORMAT (param: the name) when the index has no such
 * tensor or its shard does not hold it. */
MLA_API mla_status mla_checkpoint_find(mla_context *ctx, mla_checkpoint *ck, const char *name,
                                       mla_safetensors **file, mla_safetensors_info *info);
/* Bytes read from the shards so far (their headers included). */
MLA_API int64_t mla_checkpoint_bytes_read(const mla_checkpoint *ck);
/* mla_layer_weights_load for layer `layer` of the checkpoint with its own
 * config: layer < num_hidden_layers, or a layer the index holds attention
 * tensors of (DeepSeek-V3's multi-token-prediction layer 61). */
MLA_API mla_status mla_layer_weights_load_checkpoint(mla_context *ctx, mla_checkpoint *ck,
                                                     int64_t layer,
                                                     const mla_layer_load_options *options,
                                                     mla_layer_weights_ex *out);

/* -------------------------------------------------------------- generator */

/* Progress of a long call: done of total units (bytes), called from the
 * caller's thread between pieces of work. */
typedef void (*mla_progress_fn)(void *user, int64_t done, int64_t total);

/* Writes seeded random weights of layers first .. first + count - 1 of cfg
 * to a safetensors file with DeepSeek's names, each projection in its
 * format (formats NULL: all BF16). Values are scaled like real checkpoints:
 * projections ~ N(0, 1/in) (std 1/sqrt(in), so activations stay O(1)),
 * norm weights 1 + N(0, 0.05^2), the indexer's k_norm bias N(0, 0.05^2).
 * fp8 weights get one e4m3fn scale per 128 x 128 block (amax / 448); MXFP4
 * weights are quantized along in with the production rule. Value i of a
 * tensor depends only on (seed, tensor name, i): a counter-based generator
 * (splitmix64's mixer), so the file is the same on every machine. The
 * metadata records the config name, seed and formats. */
MLA_API mla_status mla_weights_generate(mla_context *ctx, const char *path,
                                        const mla_model_config *cfg, int64_t first, int64_t count,
                                        uint64_t seed, const mla_layer_weight_formats *formats);

typedef struct mla_generate_options {
    int64_t first, count; /* layers first .. first + count - 1; 0 and 1 by default */
    uint64_t seed;
    const mla_layer_weight_formats *formats; /* NULL: all BF16 */
    int32_t shards;     /* 1: one model.safetensors; n > 1: n shards and the index */
    int64_t num_layers; /* config.json's num_hidden_layers; 0: first + count */
    mla_progress_fn progress; /* NULL, or called after each tensor (bytes written, of all) */
    void *progress_user;
} mla_generate_options;

MLA_API void mla_generate_options_default(mla_generate_options *out);
/* The same weights as a checkpoint directory in the Hugging Face layout
 * (mla_checkpoint_open reads it back): dir (created when absent) gets
 * config.json (cfg's fields, with quantization_config fp8 when a weight is
 * FP8_BLOCK), and the tensors in model.safetensors, or spread in order over
 * model-0000k-of-0000n.safetensors with model.safetensors.index.json (tensor
 * k of N in shard k * n / N: a layer may straddle two shards); one file
 * removes an index left in dir by an earlier call. A failed call removes
 * the files it wrote. */
MLA_API mla_status mla_checkpoint_generate(mla_context *ctx, const char *dir,
                                           const mla_model_config *cfg,
                                           const mla_generate_options *options);

#ifdef __cplusplus
}
#endif

#endif /* MLA_MLA_WEIGHTS_H */
