"""Hugging Face checkpoints through the package: config.json parsing against
the C presets, directories written by the library's own generator (single
file and shards) read back tensor for tensor against the C generator's
safetensors file, the layer loader with tensor-parallel slices compared
byte for byte with the whole layer's rows and columns, refusals naming what
they refuse, the dump switch, and a sparse plan's top-k view."""

import json
import os
import sys

import numpy as np
import pytest

import libmla
from conftest import ROOT, TORCH, needs_torch

sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
import tp_layer  # noqa: E402

TP_CONFIG = tp_layer.TP_CONFIG  # 16 heads: the fp8 slices are whole blocks up to W 8

FP8 = tp_layer.FORMATS["fp8"]
PREFIX = "model.layers.%d.self_attn."


def refused(status, param, fn, *args, **kw):
    with pytest.raises(libmla.Error) as e:
        fn(*args, **kw)
    assert (e.value.status, e.value.param) == (status, param), str(e.value)
    assert e.value.detail
    return e.value


def fields(cfg):
    """A ModelConfig's fields (the name aside) as plain values."""
    out = {}
    for name, _ in cfg._fields_:
        v = getattr(cfg, name)
        if name != "name":
            out[name] = fields(v) if isinstance(v, libmla._types.Struct) else v
    return out


@pytest.fixture(scope="module")
def tp_dirs(tmp_path_factory):
    """{"bf16", "fp8"}: 2-layer checkpoints of TP_CONFIG in 3 shards."""
    base = tmp_path_factory.mktemp("tp")
    cfg = libmla.ModelConfig.from_hf(TP_CONFIG)
    out = {}
    for name, fm in (("bf16", None), ("fp8", FP8)):
        out[name] = str(base / name)
        libmla.checkpoint_generate(out[name], cfg, count=2, seed=3, formats=fm, shards=3)
    return out


def test_preset_json_parses_to_the_preset():
    names = libmla.model_config_presets()
    assert "DeepSeek-V3" in names and "test-tiny" in names
    for name in names:
        text = libmla.ModelConfig.preset_json(name)
        assert fields(libmla.ModelConfig.from_hf(text)) == fields(libmla.model_config(name)), name
        assert json.loads(text)["num_attention_heads"] == libmla.model_config(name).heads
    refused("MLA_ERR_INVALID_ARGUMENT", "name", libmla.model_config_preset_json, "nope")


def test_hf_config_sources_agree(tmp_path):
    text = libmla.model_config_preset_json("DeepSeek-V3")
    (tmp_path / "config.json").write_text(text)
    hcs = [libmla.hf_config(s) for s in (text, text.encode(), json.loads(text), tmp_path,
                                         str(tmp_path / "config.json"))]
    for hc in hcs:
        assert bytes(hc) == bytes(hcs[0])
    hc = hcs[0]
    assert hc.model.heads == 128 and hc.num_layers == 61 and hc.model_type == b"deepseek_v3"
    assert hc.quant_method == b"fp8" and list(hc.fp8_block) == [128, 128]
    assert libmla.ModelConfig.preset("DeepSeek-V3", heads=16).heads == 16


def test_hf_config_refusals_name_the_field(tmp_path):
    base = dict(TP_CONFIG)
    refused("MLA_ERR_FORMAT", "kv_lora_rank", libmla.hf_config,
            {k: v for k, v in base.items() if k != "kv_lora_rank"})
    scaling = dict(base["rope_scaling"])
    del scaling["factor"]
    refused("MLA_ERR_FORMAT", "rope_scaling.factor", libmla.hf_config,
            dict(base, rope_scaling=scaling))
    refused("MLA_ERR_UNSUPPORTED", "rope_scaling.type", libmla.hf_config,
            dict(base, rope_scaling={"type": "linear", "factor": 2}))
    refused("MLA_ERR_FORMAT", "config.json", libmla.hf_config, "{\"hidden_size\": ")
    refused("MLA_ERR_IO", "path", libmla.hf_config, tmp_path / "absent.json")


def test_generated_directory_matches_the_c_generator(tp_dirs, tmp_path):
    cfg = libmla.ModelConfig.from_hf(TP_CONFIG)
    single = str(tmp_path / "one.safetensors")
    libmla.weights_generate(single, cfg, 0, 2, seed=3)
    f = libmla.SafetensorsFile(single)
    with libmla.Checkpoint(tp_dirs["bf16"]) as ck:
        assert ck.config.num_layers == 2 and ck.config.model.heads == 16
        index = ck.index
        assert sorted(index) == sorted(f.names) == ck.names and len(ck) == len(index)
        assert sorted(set(index.values())) == ["model-0000%d-of-00003.safetensors" % k
                                               for k in (1, 2, 3)]
        assert ck.bytes_read == 0  # open reads config.json and the index only
        for name in f.names:
            assert ck.info(name)[:2] == f.info(name)[:2]
            assert np.array_equal(ck.read(name), f.read(name)), name
        assert ck.bytes_read > 0 and name in ck and "x" not in ck
        refused("MLA_ERR_FORMAT", "x", ck.read, "x")
        refused("MLA_ERR_FORMAT", "x", ck.shard, "x")


def test_loading_one_layer_reads_that_layer(tp_dirs):
    ck = libmla.Checkpoint(tp_dirs["bf16"])
    total = sum(os.path.getsize(os.path.join(tp_dirs["bf16"], s)) for s in set(ck.index.values()))
    layer1 = [n for n in ck.names if n.startswith(PREFIX % 1)]
    data = sum(np.prod(ck.info(n)[1]) * 2 for n in layer1)
    before = ck.bytes_read  # the headers info() opened
    w = ck.load_layer(1)
    assert data <= ck.bytes_read - before <= data + 1024 and ck.bytes_read < total * 0.75
    assert (w.rank, w.world_size, w.layer, w.config.heads) == (0, 1, 1, 16)
    assert np.array_equal(w.host("o_proj"), ck.read(PREFIX % 1 + "o_proj.weight"))
    w.close()
    ck.close()
    refused("MLA_ERR_INVALID_ARGUMENT", "Checkpoint", ck.load_layer, 1)


def part(a, r, rows, cols):
    """Rank r's block of rows (or columns) of a: the r-th of its ``rows``-row
    (``cols``-column) slices."""
    return a[r * rows:(r + 1) * rows] if rows else a[:, r * cols:(r + 1) * cols]


@pytest.mark.parametrize("fmt", ["bf16", "fp8"])
def test_tp_slices_are_the_whole_layers_rows_and_columns(tp_dirs, cpu, fmt):
    kv = dict(kv_b_fp8="to_bf16")
    whole = libmla.load_checkpoint(tp_dirs[fmt], 1, ctx=cpu, **kv)
    c = whole.config
    qk, dv = c.nope + c.rope, c.nope + c.v
    for W in (2, 4, 8):
        Hl = c.heads // W
        for r in range(W):
            w = libmla.load_checkpoint(tp_dirs[fmt], 1, rank=r, world_size=W, ctx=cpu, **kv)
            assert (w.rank, w.world_size, w.config.heads) == (r, W, Hl)
            assert fields(w.config) == dict(fields(c), heads=Hl)
            for name, rows, cols in (("q_b_proj", Hl * qk, 0), ("kv_b_proj", Hl * dv, 0),
                                     ("o_proj", 0, Hl * c.v)):
                assert np.array_equal(w.host(name), part(whole.host(name), r, rows, cols))
                if fmt == "fp8" and name != "kv_b_proj":  # (kv_b_proj: to bf16)
                    # the 128 x 128 block scales go with the rows / columns
                    assert w.formats[name] == libmla.WeightFormat.FP8_BLOCK
                    assert np.array_equal(w.host(name + ".scale"),
                                          part(whole.host(name + ".scale"), r, rows // 128,
                                               cols // 128))
            for rep in ("q_a_proj", "kv_a_proj_with_mqa", "kv_a_layernorm"):
                assert np.array_equal(w.host(rep), whole.host(rep))
            w.check_tp(r, W)
            refused("MLA_ERR_INVALID_ARGUMENT", "weights.tp_rank", w.check_tp, (r + 1) % W, W)
            refused("MLA_ERR_INVALID_ARGUMENT", "weights.tp_world_size", w.check_tp, r, 2 * W)
            w.close()


def test_tp_refusals_name_what_does_not_divide(tmp_path, cpu):
    tiny = libmla.model_config("test-tiny")  # H 4, nope 32, R 16, v 32
    d = str(tmp_path / "fp8")
    libmla.checkpoint_generate(d, tiny, formats=dict(q_b_proj="fp8_block"))
    load = libmla.load_checkpoint
    for rank, world, status, param in (
            (0, 3, "MLA_ERR_INVALID_ARGUMENT", "options.world_size"),
            (0, 8, "MLA_ERR_INVALID_ARGUMENT", "options.world_size"),
            (2, 2, "MLA_ERR_OUT_OF_RANGE", "options.rank"),
            (-1, 2, "MLA_ERR_OUT_OF_RANGE", "options.rank"),
            # 2 heads of 48 q_b_proj rows: 96, not whole 128-row blocks
            (1, 2, "MLA_ERR_SHAPE", PREFIX % 0 + "q_b_proj.weight")):
        refused(status, param, load, d, rank=rank, world_size=world, ctx=cpu)
    libmla.checkpoint_generate(d, tiny, formats=dict(o_proj="fp8_block"))
    refused("MLA_ERR_SHAPE", PREFIX % 0 + "o_proj.weight", load, d, rank=0, world_size=4,
            ctx=cpu)
    libmla.checkpoint_generate(d, tiny, formats=dict(o_proj="mxfp4"))
    assert load(d, rank=3, world_size=4, ctx=cpu).formats["o_proj"] == libmla.WeightFormat.MXFP4


def test_check_only_reads_nothing(tp_dirs, cpu):
    ck = libmla.Checkpoint(tp_dirs["fp8"], ctx=cpu)
    w = ck.load_layer(0, rank=1, world_size=2, check_only=True)
    assert w.struct.storage is None and w.struct.storage_bytes > 0
    assert w.struct.base.o_proj.w.shape[1] == 8 * 64 and w.config.heads == 8
    assert ck.bytes_read < 64 * 1024  # the shards' headers
    refused("MLA_ERR_INVALID_ARGUMENT", "name", w.host, "o_proj")
    w.close()


def test_checkpoint_refusals(tmp_path, cpu):
    refused("MLA_ERR_IO", "dir", libmla.Checkpoint, tmp_path / "absent",
            ctx=cpu)
    d = tmp_path / "ck"
    libmla.checkpoint_generate(d, "test-tiny", shards=2, progress=lambda done, total: None)
    (d / "model-00002-of-00002.safetensors").unlink()
    refused("MLA_ERR_IO", "model-00002-of-00002.safetensors", libmla.Checkpoint, d, ctx=cpu)
    seen = []
    libmla.checkpoint_generate(d, "test-tiny", progress=lambda done, total: seen.append(done))
    assert seen and seen == sorted(seen)

    def stop(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # raised after the C call returns
        libmla.checkpoint_generate(d, "test-tiny", progress=stop)


def _layer_step(ctx, cfg, weights, S, ctx_len, cache_state=None, dense=0):
    """One sequence: a step of S new tokens ending at position ctx_len - 1."""
    cd = libmla.cache_desc(8, 16, cfg.kv_lora, cfg.rope)
    opt = libmla.layer_options(cfg, cd, act="f32", dense=dense)
    if cache_state is None:
        cache = libmla.empty_cache(cd, ctx=ctx)
        icd = opt.index_cache
        icache = np.zeros((icd.num_blocks, libmla.indexer_cache_block_bytes(icd)), np.uint8)
        cache_state = (cache, icache if cfg.index_heads and not dense else None)
    cache, icache = cache_state
    pos = np.arange(ctx_len - S, ctx_len, dtype=np.int32)
    lp = libmla.LayerPlan(libmla.Plan(cfg, ctx=ctx), cd, opt, positions=pos,
                          slots=pos.astype(np.int64),
                          block_table=np.arange(8, dtype=np.int32)[None], max_context=128,
                          context_lens=np.array([ctx_len], np.int32),
                          cu_q_lens=np.array([0, S], np.int32), cos=libmla.rope_table(cfg)[0],
                          sin=libmla.rope_table(cfg)[1], cache=cache, index_cache=icache, ctx=ctx)
    x = np.random.default_rng(ctx_len).standard_normal((S, cfg.hidden)).astype(np.float32)
    return lp, lp.forward(weights, x), cache_state


@pytest.mark.parametrize("kind", ["numpy", pytest.param("torch", marks=needs_torch)])
def test_sparse_plan_topk_view(tmp_path, cpu, kind):
    cfg = libmla.model_config("test-tiny-indexer")  # index_topk 64
    d = tmp_path / "idx"
    libmla.checkpoint_generate(d, cfg)
    w = libmla.load_checkpoint(d, ctx=cpu)
    state = None
    if kind == "torch":  # the workspace is allocated like the cache: a torch tensor
        cd = libmla.cache_desc(8, 16, cfg.kv_lora, cfg.rope)
        icd = libmla.layer_options(cfg, cd).index_cache
        state = (TORCH.zeros((8, libmla.cache_block_bytes(cd)), dtype=TORCH.uint8),
                 TORCH.zeros((8, libmla.indexer_cache_block_bytes(icd)), dtype=TORCH.uint8))
    lp, y, state = _layer_step(cpu, w.config, w, 20, 20, state)
    assert lp.sparse and y.shape == (20, cfg.hidden)
    top = lp.topk()
    assert tuple(top.shape) == (20, 64) and str(top.dtype).endswith("int32")
    assert type(top) is type(state[0])
    top = np.asarray(top)
    assert np.array_equal(lp.topk(copy=True), top)
    for t in range(20):  # token t sees positions 0..t, fewer than top-k: all of them
        assert sorted(top[t][top[t] >= 0]) == list(range(t + 1)) and np.all(top[t][t + 1:] == -1)
    lp2, _, _ = _layer_step(cpu, w.config, w, 50, 70, state)
    top = np.asarray(lp2.topk())
    for t in range(50):  # 64 of the 21 + t visible positions once they are more
        n = 21 + t
        sel = top[t][top[t] >= 0]
        assert len(sel) == min(n, 64) and len(set(sel)) == len(sel) and sel.max() < n
    dense, _, _ = _layer_step(cpu, w.config, w, 4, 4, dense=1)
    refused("MLA_ERR_INVALID_ARGUMENT", "lp", dense.topk)


def test_dump_switch_writes_a_replay_folder(tmp_path, cpu):
    assert cpu.dump_status == ""
    d = tmp_path / "ck"
    libmla.checkpoint_generate(d, "test-tiny")
    w = libmla.load_checkpoint(d, ctx=cpu)
    cpu.set_dump(["layer", "convert"], tmp_path / "dump", 2)
    assert "layer" in cpu.dump_status
    _, y, _ = _layer_step(cpu, w.config, w, 3, 3)
    folders = sorted(os.listdir(tmp_path / "dump"))
    assert len(folders) == 1 and folders[0].endswith("-layer")
    got = set(os.listdir(tmp_path / "dump" / folders[0]))
    assert {"replay.sh", "manifest.txt", "config.json", "weights.safetensors",
            "out.y.npy"} <= got
    assert np.array_equal(np.load(tmp_path / "dump" / folders[0] / "out.y.npy"), y)
    assert folders[0] in cpu.dump_status
    cpu.set_dump(None)
    assert cpu.dump_status == ""
    cpu.set_dump("no_such_op", tmp_path / "dump2")
    assert "no_such_op" in cpu.dump_status
