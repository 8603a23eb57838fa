#!/usr/bin/env python3
"""A checkpoint directory written by Hugging Face transformers' own code, read by libmla.

Builds a tiny random DeepseekV3ForCausalLM (transformers' DeepseekV3Config), saves it
with save_pretrained (bf16, sharded: model-0000k-of-0000n.safetensors and
model.safetensors.index.json), then, when --mla is given:
  1. `mla weights inspect DIR --json`: every layer must load (exit 0);
  2. `mla demo --model DIR --layer 1 --tp 1/2`: the rank's layer against the float64
     reference (exit 0 within its bound);
  3. `mla op layer` on layer 0 for a causal prefill of T tokens, against transformers'
     own DeepseekV3Attention in float32 on the same x: the relative error is printed
     (a smoke check of the conventions, interleaved RoPE, YaRN, softmax scale, head
     layout: a wrong one is O(1); the bf16 weights are the same values in both, the
     library keeps q_cat and the latent cache in bf16, a relative error near 1e-2).
Run where transformers and torch are installed (the GPU machine):
  python3 tools/hf_checkpoint.py --out /tmp/hf-deepseek --mla build/gpu/apps/mla
"""
import argparse
import json
import os
import subprocess
import sys


def save_npy(path, array):
    import numpy as np
    np.save(path, np.ascontiguousarray(array))


def build(out, shard):
    import torch
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    torch.manual_seed(0)
    cfg = DeepseekV3Config(
        vocab_size=256, hidden_size=256, intermediate_size=512, moe_intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=8,
        n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2, n_group=1,
        topk_group=1, first_k_dense_replace=1, q_lora_rank=96, kv_lora_rank=128,
        qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
        max_position_embeddings=4096, rms_norm_eps=1e-6, rope_theta=10000.0,
        rope_scaling={"type": "yarn", "rope_type": "yarn", "factor": 4.0,
                      "original_max_position_embeddings": 512, "beta_fast": 32,
                      "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0})
    model = DeepseekV3ForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(out, max_shard_size=shard)
    print("wrote", out, sorted(os.listdir(out)))
    return model


def hf_attention(model, x):
    """transformers' layer-0 attention of x [1, T, hidden] (float32), causal prefill."""
    import torch
    m = model.float()
    T = x.shape[1]
    pos = torch.arange(T)[None]
    attn = m.model.layers[0].self_attn
    mask = torch.full((T, T), float("-inf")).triu(1)[None, None]
    with torch.no_grad():
        emb = m.model.rotary_emb(x, pos)
        out = attn(hidden_states=x, position_embeddings=emb, attention_mask=mask)
    return (out[0] if isinstance(out, tuple) else out)[0]


def run(cmd):
    print("+", " ".join(cmd))
    return subprocess.run(cmd, text=True, capture_output=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="checkpoint directory to write")
    ap.add_argument("--mla", help="the mla executable: also check the directory with it")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--shard", default="300KB", help="save_pretrained's max_shard_size")
    ap.add_argument("--tokens", type=int, default=20)
    a = ap.parse_args()
    model = build(a.out, a.shard)
    if not a.mla:
        return 0
    failed = 0
    r = run([a.mla, "weights", "inspect", a.out, "--json"])
    print(r.stdout[-2000:], r.stderr[-2000:])
    if r.returncode != 0 or json.loads(r.stdout)["refused"] != 0:
        failed += 1
    r = run([a.mla, "demo", "--backend", a.backend, "--model", a.out, "--layer", "1", "--tp",
             "1/2", "--context", "100", "--prefill", "8", "--batch", "2", "--steps", "2",
             "--no-ceilings"])
    print(r.stdout[-3000:], r.stderr[-2000:])
    failed += r.returncode != 0

    import numpy as np
    import torch
    T, hid = a.tokens, model.config.hidden_size
    torch.manual_seed(1)
    x = torch.randn(1, T, hid)
    want = hf_attention(model, x).numpy()
    d = os.path.join(a.out, "oracle")
    os.makedirs(d, exist_ok=True)
    nb = (T + 15) // 16
    save_npy(f"{d}/x.npy", x[0].numpy().astype(np.float32))
    save_npy(f"{d}/pos.npy", np.arange(T, dtype=np.int64))
    save_npy(f"{d}/bt.npy", np.arange(nb, dtype=np.int32)[None])
    save_npy(f"{d}/lens.npy", np.array([T], dtype=np.int32))
    save_npy(f"{d}/cu.npy", np.array([0, T], dtype=np.int32))
    r = run([a.mla, "op", "layer", "--backend", a.backend, "--param", f"weights={a.out}",
             "--param", "layer=0", "--param", "y_dtype=f32", "--in", f"x={d}/x.npy",
             "--in", f"positions={d}/pos.npy", "--in", f"slots={d}/pos.npy",
             "--in", f"block_table={d}/bt.npy", "--in", f"context_lens={d}/lens.npy",
             "--in", f"cu_q_lens={d}/cu.npy", "--out", f"y={d}/y.npy",
             "--out", f"cache={d}/cache.npy"])
    print(r.stdout[-2000:], r.stderr[-2000:])
    if r.returncode != 0:
        return 1
    got = np.load(f"{d}/y.npy")
    rel = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
    print(f"mla op layer against transformers' DeepseekV3Attention: max |diff| / max |y| = "
          f"{rel:.3g}")
    failed += not rel < 5e-2  # smoke threshold: a convention error is O(1)
    print("FAILED" if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
