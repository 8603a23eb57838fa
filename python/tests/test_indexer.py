"""The DSA indexer: LayerNorm, Hadamard, the fp8 K cache in both layouts,
paged logits and top-k against NumPy, the head weights bit for bit, and the
planned search against its two ops."""

import numpy as np
import pytest

import libmla

U24 = 2.0 ** -24


def test_layernorm_hadamard(cpu, ref, rng):
    x = rng.standard_normal((5, 128)).astype(np.float32)
    w = rng.standard_normal(128).astype(np.float32)
    b = rng.standard_normal(128).astype(np.float32)
    y = libmla.layernorm(x, w, b, 1e-6, ctx=cpu)
    x64 = x.astype(np.float64)
    n = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-6)
    want = n * w + b
    # two fp32 sums of D terms, a handful of roundings, relative to |n w| + |b|
    assert np.all(np.abs(y - want) <= (2 * 128 + 16) * U24 * (np.abs(n * w) + np.abs(b)))
    h = np.array([[1.0]])
    for _ in range(7):
        h = np.block([[h, h], [h, -h]])
    want = x64 @ h / np.sqrt(128)
    # 7 butterfly stages and the scaling, each rounding once
    bound = (7 + 1) * U24 * (np.abs(x64) @ np.abs(h)) / np.sqrt(128)
    for ctx in (cpu, ref):
        assert np.all(np.abs(libmla.hadamard(x, ctx=ctx) - want) <= bound)


@pytest.mark.parametrize("block_size", [1, 16])
def test_k_cache_roundtrip(cpu, ref, rng, block_size):
    desc = libmla.indexer_cache_desc(64 // block_size, block_size)
    assert libmla.indexer_layout_for(block_size) == (
        libmla.IndexerLayout.NORMAL if block_size == 1 else libmla.IndexerLayout.SHUFFLE)
    k = rng.standard_normal((10, 128)).astype(np.float32)
    slots = np.array([0, 1, 2, 9, 20, 33, 34, 50, 62, 63], np.int64)
    caches = []
    for ctx in (cpu, ref):
        cache = np.zeros((desc.num_blocks, libmla.indexer_cache_block_bytes(desc)), np.uint8)
        libmla.indexer_k_cache_write(desc, cache, k, slots, ctx=ctx)
        caches.append(cache)
    assert np.array_equal(caches[0], caches[1])
    nb = desc.num_blocks
    table = np.arange(nb, dtype=np.int32)[None, :]
    codes, scales = libmla.indexer_k_gather(desc, caches[0], table, np.array([0, 64], np.int32),
                                            ctx=cpu)
    for t, s in enumerate(slots):
        amax = max(np.abs(k[t]).max(), 1e-4)
        sc = 2.0 ** np.ceil(np.log2(amax / 448.0))  # ue8m0
        assert scales[s] == np.float32(sc)
        want = [libmla.f32_to_fp8(float(np.float32(v) / np.float32(sc))) for v in k[t]]
        assert list(codes[s]) == want


def test_logits_topk_search(cpu, ref, rng):
    B, Hi, bs, nb = 2, 4, 16, 8
    desc = libmla.indexer_cache_desc(nb, bs)
    k = rng.standard_normal((nb * bs, 128)).astype(np.float32)
    cache = np.zeros((nb, libmla.indexer_cache_block_bytes(desc)), np.uint8)
    libmla.indexer_k_cache_write(desc, cache, k, np.arange(nb * bs), ctx=cpu)
    table = np.array([[3, 1, 0, 2], [4, 7, 6, 5]], np.int32)
    lens = np.array([50, 37], np.int32)
    q = np.array([[[libmla.f32_to_fp8(float(v)) for v in row] for row in qb]
                  for qb in rng.standard_normal((B, Hi, 128))], np.uint8)
    w = rng.standard_normal((B, Hi)).astype(np.float32)
    logits = libmla.indexer_logits(desc, cache, q, w, table, lens, 1, ctx=cpu)
    assert logits.shape == (B, 50)
    kc, ks = libmla.indexer_k_gather(desc, cache, np.array([[0, 1, 2, 3, 4, 5, 6, 7]], np.int32),
                                     np.array([0, nb * bs], np.int32), ctx=cpu)
    kv = np.array([[libmla.fp8_to_f32(int(c)) for c in r] for r in kc], np.float64)
    qv = np.array([[[libmla.fp8_to_f32(int(c)) for c in r] for r in qb] for qb in q], np.float64)
    for b in range(B):
        slots = np.array([table[b, t // bs] * bs + t % bs for t in range(lens[b])])
        dots = np.einsum("hd,nd->hn", qv[b], kv[slots])
        want = ks[slots] * (w[b][:, None] * np.maximum(dots, 0)).sum(0)
        mag = ks[slots] * (np.abs(w[b])[:, None] * np.einsum("hd,nd->hn", np.abs(qv[b]),
                                                              np.abs(kv[slots]))).sum(0)
        assert np.all(np.abs(logits[b, :lens[b]] - want) <= (128 + Hi + 4) * U24 * mag + 1e-30)
        assert np.all(np.isneginf(logits[b, lens[b]:]))
    idx = libmla.topk(logits, lens, 8, ctx=cpu)
    for b in range(B):
        order = sorted(range(lens[b]), key=lambda n: (-logits[b, n], n))[:8]
        assert list(idx[b]) == sorted(order)
    assert np.array_equal(libmla.topk(logits, lens, 8, ctx=ref), idx)
    plan = libmla.IndexerPlan(desc, table, lens, 1, ctx=cpu)
    assert plan.max_len == 50
    l2, i2 = plan.search(cache, q, w, 8)
    assert np.array_equal(l2, logits) and np.array_equal(i2, idx)


def test_head_weights_bit_exact(cpu, rng):
    w = rng.standard_normal((3, 8)).astype(np.float32)
    s = rng.random((3, 8)).astype(np.float32)
    got = libmla.indexer_head_weights(w, s, ctx=cpu)
    want = (w * s) * np.float32(128 ** -0.5) * np.float32(8 ** -0.5)
    assert np.array_equal(got, want.astype(np.float32))
