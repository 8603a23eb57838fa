"""Tensor parallelism through the package (python/examples/tp_layer.py,
docs/TENSOR_PARALLEL.md): world sizes 1, 2, 4, 8 simulated in one process
(every rank's slice loaded by libmla's TP loader, run one after another
through its own paged latent cache, a prefill then decode steps, the partial
outputs summed) against the unsliced layer within the bound of
tests/test_tp_slice.c, on the CPU (NumPy and torch) and on one GPU; the same
as two real processes with torch.distributed's gloo all_reduce; and the bad
input: world sizes that do not divide, a rank's weights in another rank's
process, a rank missing from a sum."""

import os
import subprocess
import sys

import numpy as np
import pytest

import libmla
from conftest import ROOT, TORCH, needs_torch, needs_torch_gpu

sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
import tp_layer  # noqa: E402

EXAMPLE = os.path.join(ROOT, "python", "examples", "tp_layer.py")


@pytest.fixture(scope="module")
def ckdirs(tmp_path_factory):
    base = tmp_path_factory.mktemp("tp")
    return {w: tp_layer.generate(str(base / w), weights=w) for w in ("bf16", "fp8")}


def assert_within(rep, worlds):
    assert sorted(rep) == sorted(worlds)
    for W, r in rep.items():
        assert r["cache_same"], W
        assert r["worst"] <= 1.0, (W, r)
        if W > 1:  # the negative control: a sum missing rank 0 is far outside
            assert r["dropped"] > 10, (W, r)
        else:
            assert r["worst"] == 0.0  # the whole layer through the TP path: the same bits


@pytest.mark.parametrize("backend,weights,worlds", [("cpu", "bf16", (1, 2, 4, 8)),
                                                    ("cpu", "fp8", (1, 2, 4, 8)),
                                                    ("reference", "bf16", (1, 8))])
def test_simulated_world_sizes(ckdirs, backend, weights, worlds):
    with libmla.Context(backend, threads=1) as ctx:
        rep = tp_layer.simulate(ckdirs[weights], worlds, ctx, tp_layer.Arrays(),
                                tp_layer.Schedule(), log=lambda s: None)
    assert_within(rep, worlds)


@needs_torch
def test_simulated_with_torch_tensors(ckdirs):
    with libmla.Context("cpu", threads=1) as ctx:
        rep = tp_layer.simulate(ckdirs["bf16"], (2, 8), ctx, tp_layer.Arrays(TORCH, "cpu"),
                                tp_layer.Schedule(batch=3, prefill=4, decode=2, block_size=4),
                                log=lambda s: None)
    assert_within(rep, (2, 8))


def test_simulated_sparse_layer(tmp_path):
    """test-tiny-indexer: the V3.2 indexer is replicated, so every rank
    attends to the same top-k (its index cache is the same bits too)."""
    d = str(tmp_path / "idx")
    libmla.checkpoint_generate(d, "test-tiny-indexer", count=2)
    with libmla.Context("cpu", threads=1) as ctx:
        rep = tp_layer.simulate(d, (1, 2, 4), ctx, tp_layer.Arrays(), tp_layer.Schedule(),
                                log=lambda s: None)
    assert_within(rep, (1, 2, 4))


def test_bf16_activations_are_reported(ckdirs):
    lines = []
    with libmla.Context("cpu", threads=1) as ctx:
        rep = tp_layer.simulate(ckdirs["bf16"], (2,), ctx, tp_layer.Arrays(),
                                tp_layer.Schedule(), act="bf16", splits=0, log=lines.append)
    assert "no verdict" in lines[0] and rep[2]["cache_same"]
    assert rep[2]["worst"] < rep[2]["dropped"]


@needs_torch_gpu
@pytest.mark.parametrize("weights", ["bf16", "fp8"])
def test_simulated_world_sizes_on_gpu(ckdirs, weights):
    with libmla.Context("hip") as ctx:
        rep = tp_layer.simulate(ckdirs[weights], (1, 2, 4, 8), ctx,
                                tp_layer.Arrays(TORCH, "cuda:0"), tp_layer.Schedule(),
                                log=print)
    assert_within(rep, (1, 2, 4, 8))


def run_example(*args, timeout=180):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, EXAMPLE, *args], env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def gloo_available():
    try:
        import torch.distributed as dist
        return dist.is_available() and dist.is_gloo_available()
    except ImportError:
        return False


@pytest.mark.skipif(TORCH is None or not gloo_available(), reason="needs torch with gloo")
def test_two_processes_with_gloo(ckdirs):
    out = run_example("--spawn", "2", "--backend", "gloo", "--device", "cpu", "--threads", "1",
                      "--checkpoint", ckdirs["fp8"], "--decode", "3")
    assert "world size 2 (gloo, cpu): decode step" in out and "caches identical" in out
    line = [s for s in out.splitlines() if "against the unsliced layer" in s][0]
    assert float(line.split("worst element at ")[1].split()[0]) <= 1.0 and "no verdict" not in line


@needs_torch_gpu
def test_world_size_1_with_nccl(ckdirs):
    import torch.distributed as dist
    if not dist.is_nccl_available():
        pytest.skip("torch without NCCL")
    out = run_example("--spawn", "1", "--device", "gpu", "--checkpoint", ckdirs["bf16"])
    assert "world size 1 (nccl, hip)" in out and "worst element at 0 of the bound" in out


# --------------------------------------------------------------- bad input

def refused(status, param, fn, *args, **kw):
    with pytest.raises(libmla.Error) as e:
        fn(*args, **kw)
    assert (e.value.status, e.value.param) == (status, param), str(e.value)
    return e.value


def test_world_sizes_that_do_not_divide(ckdirs, cpu):
    refused("MLA_ERR_INVALID_ARGUMENT", "options.world_size", tp_layer.load, ckdirs["bf16"], 1, 0,
            3, cpu)
    # 1 head a rank: o_proj's 64 columns cut its 128 x 128 fp8 blocks
    refused("MLA_ERR_SHAPE", "model.layers.1.self_attn.o_proj.weight", tp_layer.load,
            ckdirs["fp8"], 1, 0, 16, cpu)
    assert tp_layer.load(ckdirs["bf16"], 1, 15, 16, cpu).config.heads == 1  # bf16 splits


def test_a_slice_with_a_whole_layer_plan(ckdirs, cpu):
    whole = tp_layer.load(ckdirs["bf16"], 1, 0, 1, cpu)
    run = tp_layer.LayerRunner(whole, tp_layer.Schedule(), tp_layer.Arrays())
    run.prepare(0)
    run.w = tp_layer.load(ckdirs["bf16"], 1, 1, 2, cpu)
    e = refused("MLA_ERR_SHAPE", "weights.o_proj", run.forward, 0, tp_layer.Schedule().x(0, 256))
    assert "[256, 512]" in e.detail


def test_a_sum_needs_every_rank_once(ckdirs, cpu):
    w = [tp_layer.load(ckdirs["bf16"], 1, r, 2, cpu) for r in (0, 1)]
    y = [np.ones((2, 3), np.float32), np.ones((2, 3), np.float32)]
    assert np.array_equal(tp_layer.sum_partials(y, w), np.full((2, 3), 2.0))
    e = refused("MLA_ERR_INVALID_ARGUMENT", "weights.tp_rank", tp_layer.sum_partials, y,
                [w[0], w[0]])
    assert "[0, 0]" in e.detail
    w4 = tp_layer.load(ckdirs["bf16"], 1, 1, 4, cpu)
    refused("MLA_ERR_INVALID_ARGUMENT", "weights.tp_world_size", tp_layer.sum_partials, y,
            [w[0], w4])


class FakeGroup:
    """torch.distributed's calls check_group makes, for a group whose other
    members hold the given (rank, world size, layer, config digest)."""

    def __init__(self, rank, rows):
        self.rank, self.rows = rank, rows

    def get_rank(self):
        return self.rank

    def get_world_size(self):
        return len(self.rows)

    def all_gather(self, out, mine):
        for i, t in enumerate(out):
            t.copy_(mine if i == self.rank else TORCH.tensor(self.rows[i], dtype=TORCH.int64))


@needs_torch
def test_group_check_names_the_mismatch(ckdirs, cpu):
    w = [tp_layer.load(ckdirs["bf16"], 1, r, 2, cpu) for r in (0, 1)]
    good = [[0, 2, 1, 0], [1, 2, 1, 0]]

    def group(rank, other):
        rows = [list(r) for r in good]
        rows[rank] = [0, 0, 0, 0]  # replaced by the process's own
        rows[1 - rank] = other
        return FakeGroup(rank, rows)

    digest = tp_layer.config_digest(w[0].config)
    check = tp_layer.check_group
    check(w[0], 1, group(0, [1, 2, 1, digest]), TORCH, "cpu")
    # process 0 holding rank 1's heads
    e = refused("MLA_ERR_INVALID_ARGUMENT", "weights.tp_rank", check, w[1], 1,
                group(0, [1, 2, 1, digest]), TORCH, "cpu")
    assert "process 0 holds rank 1's heads" in e.detail
    # the other process loaded rank 0 as well
    refused("MLA_ERR_INVALID_ARGUMENT", "weights.tp_rank", check, w[0], 1,
            group(0, [0, 2, 1, digest]), TORCH, "cpu")
    # weights for world size 4 in a group of 2
    refused("MLA_ERR_INVALID_ARGUMENT", "weights.tp_world_size", check, w[0], 1,
            group(0, [1, 4, 1, digest]), TORCH, "cpu")
    refused("MLA_ERR_INVALID_ARGUMENT", "layer", check, w[0], 1, group(0, [1, 2, 0, digest]),
            TORCH, "cpu")
    refused("MLA_ERR_INVALID_ARGUMENT", "config", check, w[0], 1, group(0, [1, 2, 1, 5]),
            TORCH, "cpu")
