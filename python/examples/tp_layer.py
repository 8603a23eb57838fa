#!/usr/bin/env python3
"""One MLA layer with tensor parallelism over torch.distributed
(docs/TENSOR_PARALLEL.md): each process loads its rank's heads through
libmla's TP loader, runs mla_layer_forward on them on its own stream, and
all-reduces the partial o_proj outputs; a prefill, then decode steps, through
each rank's own paged latent cache (replicated: every rank writes the same
rows). The all-reduced y is compared with the unsliced layer's y.

    # one process per GPU (NCCL; RCCL on ROCm is the same torch API)
    torchrun --nproc_per_node 2 python/examples/tp_layer.py --device gpu
    # the same code path on the CPU: 2 processes, gloo all_reduce
    python3 python/examples/tp_layer.py --spawn 2 --backend gloo --device cpu
    # world sizes simulated in one process (ranks one after another, partials summed)
    python3 python/examples/tp_layer.py --simulate 1,2,4,8 --device cpu   # or gpu
    # a published checkpoint instead of the generated one
    torchrun --nproc_per_node 8 python/examples/tp_layer.py --device gpu \\
        --checkpoint /models/DeepSeek-V3 --layer 3 --act bf16 --splits 0

Without --checkpoint a seeded checkpoint of --config (a JSON file, or a
preset name; default the 16-head config of tests/test_tp_slice.c) is
generated with the library's generator. NCCL_NVLS_ENABLE=0 is set before the
process group starts: NVLink multicast stays off.

The bound (tests/test_tp_slice.c, restated). Rank r's heads are computed by
the same kernels on the same inputs as in the unsliced layer, so its W_vc
output o_r is the unsliced o restricted to its heads, and the replicated
parts (q_a, kv_a, the norms, the cache) are the same bits (checked here on
the cache). What differs is o_proj's reduction: the unsliced y_i = sum_k
o_k W[i, k] is one fp32 dot product of K = H v terms; the TP y_i is W dot
products of K / W terms each, summed by the all-reduce (fp32, any order). An
fp32 dot product of n terms is within gamma_{n+3} S_i of the exact sum in
any order (three more roundings for fp8 dequantization: conformance/bounds.c),
S_i = sum_k |o_k| |W[i, k]|, and a sum of W fp32 values is within
gamma_{W-1} sum_r |y_r,i| <= gamma_{W-1} (1 + gamma_{K/W+3}) S_i. So

    |y_TP,i - y_i| <= (gamma_{K+3} + gamma_{K/W+3} + gamma_{W-1} (1 + gamma_{K/W+3})) S_i.

S_i is bounded from what the script sees: o_lat[h, l] is a softmax-weighted
mean of the cached k_nope[t, l], so |o_lat[h, l]| <= (1 + (2n + 8) u) max_t
|k[t, l]| (n visible keys), and |o[h, j]| <= (1 + gamma_{L+3}) sum_l
max|o_lat[., l]| |W_vc[h, l, j]| (times (1 + 2^-8) per bf16 rounding of
o_lat and o with bf16 activations). The premise -- identical per-head bits --
holds when no kernel's reduction order depends on the number of heads: f32
activations (the GPU's f32 GEMMs are one fmaf chain per output, never split)
and the attention's split count fixed at 1 (--splits 1). The check gives a
verdict then; otherwise (--act bf16 or --splits 0, the engine's settings,
used for timing) it reports the ratio only. Negative control: the sum
without rank 0 lands far outside the bound.

Bad input raises libmla.Error naming it: heads or fp8 / MXFP4 blocks that
the world size does not divide (the C loader: options.world_size, the
tensor), weights of another rank or world size (weights.tp_rank,
weights.tp_world_size: LayerWeights.check_tp, from the loaded weights'
tp_rank / tp_world_size), ranks of one group that loaded different layers
or checkpoints (layer, config), a rank missing or twice in a simulated sum.
"""

import argparse
import contextlib
import hashlib
import os
import socket
import sys
import tempfile
import time

import numpy as np

try:
    import libmla
except ImportError:  # run from a source checkout
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import libmla

U32 = 2.0 ** -24

# H 16: at world size 8 every fp8 slice is whole 128 x 128 blocks (2 heads:
# 2 (nope + R) = 2 (nope + v) = 256 rows, 2 v = 128 columns).
TP_CONFIG = {
    "model_type": "deepseek_v3", "hidden_size": 256, "num_attention_heads": 16,
    "num_hidden_layers": 2, "q_lora_rank": 128, "kv_lora_rank": 128, "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 64, "v_head_dim": 64, "max_position_embeddings": 64,
    "rms_norm_eps": 1e-6, "rope_theta": 10000,
    "rope_scaling": {"type": "yarn", "factor": 4, "original_max_position_embeddings": 16,
                     "mscale": 1.0, "mscale_all_dim": 1.0},
}
FORMATS = {"bf16": None,
           "fp8": {p: "fp8_block" for p in ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa",
                                            "kv_b_proj", "o_proj")}}


def gamma(n):
    return n * U32 / (1.0 - n * U32)


def fail(param, detail, code=libmla.Status.ERR_INVALID_ARGUMENT):
    raise libmla.Error(code, param, detail)


# ------------------------------------------------------------ the checkpoint

def model_config(spec):
    """A ModelConfig from a preset name, a config.json path or None (TP_CONFIG)."""
    if spec is None:
        return libmla.ModelConfig.from_hf(TP_CONFIG)
    if os.path.exists(spec):
        return libmla.ModelConfig.from_hf(spec)
    return libmla.model_config(spec)


def generate(directory, config=None, weights="bf16", layer=1, seed=3):
    """A seeded checkpoint directory (2 shards) holding layers 0 .. layer."""
    libmla.checkpoint_generate(directory, model_config(config), count=layer + 1, seed=seed,
                               formats=FORMATS[weights], shards=2)
    return directory


def load(ckdir, layer, rank, world, ctx):
    """Rank ``rank``'s heads of ``world`` (an fp8 kv_b_proj becomes bf16: the
    absorb's per-head views take no 128 x 128 block scales)."""
    return libmla.load_checkpoint(ckdir, layer, rank=rank, world_size=world, ctx=ctx,
                                  kv_b_fp8="to_bf16")


# --------------------------------------------------------------- the steps

class Schedule:
    """B sequences: a chunked prefill of P tokens each, then D decode steps of
    one token each; sequence b's cache blocks are taken from the end of the
    pool backwards (a paged cache whose blocks are not in sequence order)."""

    def __init__(self, batch=2, prefill=5, decode=3, block_size=16, seed=11):
        self.B, self.P, self.D, self.bs, self.seed = batch, prefill, decode, block_size, seed
        self.max_context = prefill + decode
        self.mb = -(-self.max_context // block_size)
        self.num_blocks = batch * self.mb
        self.table = np.arange(self.num_blocks, dtype=np.int32)[::-1].reshape(batch, self.mb).copy()

    def steps(self):
        """0 is the prefill; 1 .. D the decode steps."""
        return range(self.D + 1)

    def tokens(self, step):
        return self.B * (self.P if step == 0 else 1)

    def batch(self, step):
        """The step's index data (NumPy): positions, slots, context_lens, cu_q_lens, next_n."""
        n = self.P if step == 0 else 1
        first = 0 if step == 0 else self.P + step - 1
        pos = np.tile(np.arange(first, first + n), (self.B, 1))
        blocks = np.take_along_axis(self.table, pos // self.bs, 1)
        return dict(positions=pos.reshape(-1).astype(np.int32),
                    slots=(blocks * self.bs + pos % self.bs).reshape(-1).astype(np.int64),
                    context_lens=np.full(self.B, first + n, np.int32),
                    cu_q_lens=np.arange(0, self.B * n + 1, n, dtype=np.int32), next_n=n)

    def x(self, step, hidden):
        """The step's input, the same on every rank (f32 in [-1, 1))."""
        rng = np.random.default_rng(self.seed * 1000 + step)
        return rng.uniform(-1, 1, (self.tokens(step), hidden)).astype(np.float32)


class Arrays:
    """NumPy arrays (torch None) or torch tensors on ``device``."""

    def __init__(self, torch=None, device="cpu"):
        self.torch, self.device = torch, device
        self.cuda = torch is not None and str(device).startswith("cuda")

    def put(self, a):
        if self.torch is None:
            return a
        return self.torch.from_numpy(np.ascontiguousarray(a)).to(self.device)

    def zeros(self, shape):
        if self.torch is None:
            return np.zeros(shape, np.uint8)
        return self.torch.zeros(shape, dtype=self.torch.uint8, device=self.device)

    def act(self, x, act):
        """x (NumPy f32) in the activation dtype."""
        if act == "f32":
            return self.put(x)
        if self.torch is None:
            return libmla.bf16(libmla.convert(x, dtype="bf16"))
        return self.put(x).to(self.torch.bfloat16)

    def host(self, t):
        return np.asarray(t) if self.torch is None else t.cpu().numpy()

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)


class LayerRunner:
    """One rank's layer (or the unsliced one): its weights, its own latent
    cache (all of it: every rank writes every row), a plan for the prefill
    and one for the decode steps (updated per step), each on the context's
    stream (a HIP context follows torch's current stream)."""

    def __init__(self, weights, sched, arrays, *, act="f32", splits=1):
        self.w, self.sched, self.arr, self.act = weights, sched, arrays, act
        ctx, cfg = weights.ctx, weights.config
        self.plan = libmla.Plan(cfg, ctx.target, ctx=ctx,
                                weight_dtype=libmla.DType(weights.struct.base.o_proj.w.dtype))
        self.cd = libmla.cache_desc(sched.num_blocks, sched.bs, cfg.kv_lora, cfg.rope)
        self.cache = arrays.zeros((sched.num_blocks, libmla.cache_block_bytes(self.cd)))
        self.opt = libmla.layer_options(cfg, self.cd, act=act, num_splits=splits)
        self.index_cache = None  # V3.2: the indexer's K cache, replicated like the latent one
        self.max_context = sched.max_context
        if cfg.index_heads > 0:
            ic = self.opt.index_cache
            self.index_cache = arrays.zeros((ic.num_blocks, libmla.indexer_cache_block_bytes(ic)))
            # the plan's logits rows are max_context long and must hold the top-k
            self.max_context = max(self.max_context, cfg.index_topk)
        cos, sin = libmla.rope_table(cfg, sched.max_context)
        self.cos, self.sin = arrays.put(cos), arrays.put(sin)
        self.table = arrays.put(sched.table)
        self.plans = {}

    def _batch(self, step):
        b = self.sched.batch(step)
        out = {k: self.arr.put(v) for k, v in b.items() if k != "next_n"}
        out.update(next_n=b["next_n"], block_table=self.table)
        if step:
            out["cu_q_lens"] = None  # decode: next_n tokens per sequence
        return out

    def prepare(self, step):
        """Plans (or re-plans) the step; host work, kept out of the timing."""
        kind = "prefill" if step == 0 else "decode"
        b = self._batch(step)
        if kind not in self.plans:
            self.plans[kind] = libmla.LayerPlan(
                self.plan, self.cd, self.opt, max_context=self.max_context, cos=self.cos,
                sin=self.sin, cache=self.cache, index_cache=self.index_cache, ctx=self.w.ctx,
                **b)
        else:
            self.plans[kind].update(**b)
        return self.plans[kind]

    def forward(self, step, x):
        """This rank's partial y [T, hidden] (f32) for the prepared step."""
        lp = self.plans["prefill" if step == 0 else "decode"]
        return lp.forward(self.w, x, dtype="f32")

    def cache_digest(self):
        self.arr.sync()
        return hashlib.sha256(self.arr.host(self.cache).tobytes()).hexdigest()


# ---------------------------------------------------------------- the bound

def _abs_rows(w, name, rows=1024):
    """|W| of a loaded BF16 or FP8_BLOCK projection in float64, ``rows`` rows
    at a time (a DeepSeek-V3 o_proj is 117 M values)."""
    fmt = w.formats[name]
    if fmt not in (libmla.WeightFormat.BF16, libmla.WeightFormat.FP8_BLOCK):
        fail("weights." + name, "the bound is derived for bf16 and fp8 block-scaled %s, not %s"
             % (name, fmt.name.lower()), libmla.Status.ERR_UNSUPPORTED)
    a = w.host(name)
    if fmt == libmla.WeightFormat.FP8_BLOCK:
        scale = w.host(name + ".scale").astype(np.float64)
        table = np.abs([libmla.fp8_to_f32(c) for c in range(256)])
    for r0 in range(0, a.shape[0], rows):  # rows: whole 128-row scale blocks
        blk = a[r0:r0 + rows]
        if fmt == libmla.WeightFormat.BF16:
            yield np.abs((blk.astype(np.uint32) << 16).view(np.float32)).astype(np.float64)
        else:
            s = np.repeat(scale[r0 // 128:(r0 + rows) // 128], 128, 0)[:blk.shape[0]]
            yield table[blk] * np.repeat(s, 128, 1)[:, :blk.shape[1]]


def _abs_matvec(w, name, v):
    """|W| @ v for a loaded projection."""
    return np.concatenate([blk @ v for blk in _abs_rows(w, name)])


def split_bound(whole, runner, world):
    """The bound of the module docstring for every output column i: [hidden].
    whole: the unsliced weights; runner: the unsliced layer after the steps
    (its cache holds every key any step saw)."""
    cfg = whole.config
    H, L, nope, v = cfg.heads, cfg.kv_lora, cfg.nope, cfg.v
    sched = runner.sched
    lens = np.full(sched.B, sched.max_context, np.int32)
    rows = libmla.cache_gather(runner.cd, runner.arr.host(runner.cache), sched.table, lens,
                               ctx=libmla.default_context())
    kmax = np.abs(rows[:, :L].astype(np.float64)).max(0)
    att = 1.0 + (2.0 * sched.max_context + 8.0) * U32
    u_act = 2.0 ** -8 if runner.act == "bf16" else 0.0
    # kv_b_proj rows h (nope + v) + nope + j are W_vc[h, :, j]
    w_vc_k = _abs_matvec(whole, "kv_b_proj", kmax).reshape(H, nope + v)[:, nope:]
    o_max = (1 + gamma(L + 3)) * (1 + u_act) ** 2 * att * w_vc_k  # [H, v]
    S = _abs_matvec(whole, "o_proj", o_max.reshape(-1))
    K = H * v
    g = gamma(K + 3) + gamma(K / world + 3) + gamma(world - 1) * (1 + gamma(K / world + 3))
    return g * S


def verdict_holds(act, splits):
    """The bound's premise: no reduction order depends on the head count."""
    return act == "f32" and splits == 1


def sum_partials(partials, weights):
    """sum_r y_r in float64, once the weights show ranks 0 .. W-1 of one
    world size W, each once (a missing or repeated rank is a wrong sum)."""
    W = weights[0].world_size
    for w in weights:
        w.check_tp(w.rank, W)
    ranks = sorted(w.rank for w in weights)
    if ranks != list(range(W)):
        fail("weights.tp_rank", "the partials are of ranks %s; a sum of world size %d needs "
             "each of 0 .. %d once" % (ranks, W, W - 1))
    return sum(np.asarray(p, np.float64) for p in partials)


# ------------------------------------------------------- one process, all ranks

def simulate(ckdir, worlds, ctx, arrays, sched, *, layer=1, act="f32", splits=1, log=print):
    """World sizes ``worlds`` in one process: every rank of each, one after
    another, on ctx; their partial outputs summed and compared with the
    unsliced layer's. Returns {W: report} with the worst error / bound ratio,
    the ratio without rank 0 (W > 1), the cache check and decode times."""
    whole = load(ckdir, layer, 0, 1, ctx)
    ref = LayerRunner(whole, sched, arrays, act=act, splits=splits)
    want = []
    for s in sched.steps():
        ref.prepare(s)
        want.append(arrays.host(ref.forward(s, arrays.act(sched.x(s, whole.config.hidden), act))))
    ref_digest = ref.cache_digest()
    cfg = whole.config
    out = {}
    for W in worlds:
        bound = split_bound(whole, ref, W)
        weights, partials, times, same_cache = [], [], [], True
        for r in range(W):
            w = load(ckdir, layer, r, W, ctx)
            w.check_tp(r, W)
            run = LayerRunner(w, sched, arrays, act=act, splits=splits)
            ys = []
            for s in sched.steps():
                run.prepare(s)
                x = arrays.act(sched.x(s, cfg.hidden), act)
                arrays.sync()
                t0 = time.perf_counter()
                y = run.forward(s, x)
                arrays.sync()
                if s > 1:  # decode steps after the first
                    times.append(time.perf_counter() - t0)
                ys.append(arrays.host(y))
            same_cache &= run.cache_digest() == ref_digest
            weights.append(w)
            partials.append(ys)
        worst = dropped = 0.0
        for s in sched.steps():
            got = sum_partials([p[s] for p in partials], weights)
            worst = max(worst, float((np.abs(got - want[s]) / bound).max()))
            if W > 1:
                rest = got - partials[0][s]
                dropped = max(dropped, float((np.abs(rest - want[s]) / bound).max()))
        step_us = 1e6 * W * float(np.mean(times)) if times else float("nan")
        out[W] = dict(worst=worst, dropped=dropped, cache_same=same_cache, step_us=step_us)
        log("world size %d (simulated, %s): worst element at %.3g of the bound%s; without rank 0"
            " at %.3g; caches %s; decode step %.1f us (%d ranks one after another)"
            % (W, ctx.backend.name.lower(), worst,
               "" if verdict_holds(act, splits) else " (no verdict: act %s, splits %d)"
               % (act, splits), dropped, "identical" if same_cache else "DIFFER", step_us, W))
        for w in weights:
            w.close()
    return out


# ------------------------------------------------- one process per rank

def agreed(fn, dist, torch, device):
    """fn() on every rank; when it raises on one, every rank raises (none is
    left waiting in a collective the failed one never reaches)."""
    err, out = None, None
    try:
        out = fn()
    except libmla.Error as e:
        err = e
    flag = torch.tensor([0 if err is None else 1 + dist.get_rank()], device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    if err is not None:
        raise err
    if int(flag):
        fail("rank", "rank %d failed (its error is in its output)" % (int(flag) - 1))
    return out


def config_digest(cfg):
    """48 bits of a hash of the config's values (its name aside: the
    directory's name, which the same checkpoint may have under two paths)."""
    cfg = type(cfg).from_buffer_copy(cfg)
    cfg.name = b""
    return int(hashlib.sha256(repr(cfg).encode()).hexdigest()[:12], 16)


def check_group(weights, layer, dist, torch, device):
    """Every process holds its own rank's slice of the same layer of the
    same model: the weights' tp_rank is the process's rank, their
    tp_world_size the group's size, and the layer and config agree over the
    group. Every rank judges the same gathered data, so all raise alike."""
    rank, world = dist.get_rank(), dist.get_world_size()
    digest = config_digest(weights.config)
    mine = torch.tensor([weights.rank, weights.world_size, int(layer), digest], dtype=torch.int64,
                        device=device)
    every = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    every = [t.cpu().tolist() for t in every]
    for r, (w_rank, w_world, _, _) in enumerate(every):
        if w_world != world:
            fail("weights.tp_world_size", "rank %d holds weights for world size %d; the group "
                 "has %d processes" % (r, w_world, world))
        if w_rank != r:
            fail("weights.tp_rank", "process %d holds rank %d's heads" % (r, w_rank))
    if len({e[2] for e in every}) > 1:
        fail("layer", "the ranks loaded layers %s" % [e[2] for e in every])
    if len({e[3] for e in every}) > 1:
        fail("config", "the ranks loaded different models (their configs differ)")
    weights.check_tp(rank, world)


class Timer:
    """Elapsed times of marked points: CUDA events on the current stream, or
    the host clock."""

    def __init__(self, torch, cuda):
        self.torch, self.cuda = torch, cuda

    def mark(self):
        if self.cuda:
            e = self.torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def seconds(self, a, b):
        return a.elapsed_time(b) / 1e3 if self.cuda else b - a


def worker(rank, world, args, ckdir):
    """One process of the group (torchrun or mp.spawn)."""
    os.environ["NCCL_NVLS_ENABLE"] = "0"  # never NVLink multicast
    import torch
    import torch.distributed as dist
    gpu = args.device == "gpu"
    local = int(os.environ.get("LOCAL_RANK", rank))
    device = torch.device("cuda", local) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
    backend = args.backend or ("nccl" if gpu else "gloo")
    dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        if ckdir is None:
            ckdir = args.workdir or os.path.join(tempfile.gettempdir(), "libmla-tp-layer")
            agreed(lambda: generate(ckdir, args.config, args.weights, args.layer)
                   if local == 0 else None, dist, torch, device)
        ctx = libmla.Context("hip", device=local) if gpu else libmla.Context(
            "cpu", threads=args.threads)
        stream = torch.cuda.Stream(device) if gpu else None
        with torch.cuda.stream(stream) if gpu else contextlib.nullcontext():
            _run_rank(rank, world, args, ckdir, ctx, torch, dist, device)
        ctx.close()
    finally:
        dist.destroy_process_group()


def _run_rank(rank, world, args, ckdir, ctx, torch, dist, device):
    arrays = Arrays(torch, device)
    sched = Schedule(args.batch, args.prefill, args.decode, args.block_size)
    weights = agreed(lambda: load(ckdir, args.layer, rank, world, ctx), dist, torch, device)
    check_group(weights, args.layer, dist, torch, device)
    run = LayerRunner(weights, sched, arrays, act=args.act, splits=args.splits)
    timer = Timer(torch, arrays.cuda)
    hidden = weights.config.hidden
    ys, marks = [], []
    for s in sched.steps():
        run.prepare(s)
        x = arrays.act(sched.x(s, hidden), args.act)
        t0 = timer.mark()
        y = run.forward(s, x)
        t1 = timer.mark()
        dist.all_reduce(y)  # sum of the partial o_proj outputs
        t2 = timer.mark()
        ys.append(y)
        marks.append((t0, t1, t2))
    arrays.sync()
    fwd = [timer.seconds(a, b) for a, b, _ in marks[2:]]
    red = [timer.seconds(b, c) for _, b, c in marks[2:]]
    # the slowest rank sets the step: max over ranks of the means
    t = torch.tensor([np.mean(fwd) if fwd else 0.0, np.mean(red) if red else 0.0],
                     dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    digest = torch.tensor(list(bytes.fromhex(run.cache_digest())), dtype=torch.uint8,
                          device=device)
    digests = [torch.empty_like(digest) for _ in range(world)]
    dist.all_gather(digests, digest)
    same_cache = all(torch.equal(d, digests[0]) for d in digests)
    got = [arrays.host(y) for y in ys]

    def report():
        if rank != 0:
            return
        f, r = float(t[0]), float(t[1])
        step = f + r
        print("world size %d (%s, %s): decode step %.1f us (forward %.1f us, all_reduce %.1f us "
              "= %.0f%%), %d sequences, act %s, splits %d; caches %s"
              % (world, dist.get_backend(), ctx.backend.name.lower(), 1e6 * step, 1e6 * f,
                 1e6 * r, 100 * r / step if step else 0, sched.B, args.act, args.splits,
                 "identical" if same_cache else "DIFFER"), flush=True)
        if not same_cache:
            fail("cache", "the ranks' latent caches differ: the replicated path is not")
        if args.check:
            check_against_whole(ckdir, args, ctx, arrays, sched, got, world, run.cache_digest())

    agreed(report, dist, torch, device)
    weights.close()


def check_against_whole(ckdir, args, ctx, arrays, sched, got, world, digest):
    """The all-reduced y of every step against the unsliced layer run in
    this process on the same device; raises when it leaves the bound."""
    whole = load(ckdir, args.layer, 0, 1, ctx)
    ref = LayerRunner(whole, sched, arrays, act=args.act, splits=args.splits)
    want = []
    for s in sched.steps():
        ref.prepare(s)
        want.append(arrays.host(ref.forward(s, arrays.act(sched.x(s, whole.config.hidden),
                                                          args.act))))
    bound = split_bound(whole, ref, world)
    worst = max(float((np.abs(g.astype(np.float64) - w) / bound).max())
                for g, w in zip(got, want))
    same = ref.cache_digest() == digest
    holds = verdict_holds(args.act, args.splits)
    print("world size %d against the unsliced layer: worst element at %.3g of the bound%s; "
          "cache %s" % (world, worst, "" if holds else " (no verdict: act %s, splits %d)"
                        % (args.act, args.splits), "identical" if same else "DIFFERS"),
          flush=True)
    whole.close()
    if not same:
        fail("cache", "the TP rank's latent cache differs from the unsliced layer's")
    if holds and worst > 1.0:
        fail("y", "the TP output leaves the bound (%.3g of it)" % worst,
             libmla.Status.ERR_OUT_OF_RANGE)
    return worst


# ---------------------------------------------------------------------- main

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(world, args, ckdir):
    """``world`` processes on this host, one per rank (multiprocessing's spawn:
    each starts clean, as torchrun's do; this process never imports torch)."""
    import multiprocessing
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(_free_port()))
    mp = multiprocessing.get_context("spawn")
    procs = [mp.Process(target=worker, args=(r, world, args, ckdir)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    bad = [r for r, p in enumerate(procs) if p.exitcode != 0]
    if bad:
        fail("rank", "rank(s) %s exited with %s" % (bad, [procs[r].exitcode for r in bad]))


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cpu", "gpu"), default="gpu")
    p.add_argument("--backend", choices=("nccl", "gloo"), default=None,
                   help="torch.distributed backend (default: nccl on GPUs, gloo on the CPU)")
    p.add_argument("--spawn", type=int, default=0, metavar="W",
                   help="start W processes here (instead of torchrun)")
    p.add_argument("--simulate", default=None, metavar="W,W,...",
                   help="world sizes run in this one process, ranks one after another")
    p.add_argument("--checkpoint", default=None, help="a Hugging Face checkpoint directory")
    p.add_argument("--config", default=None,
                   help="generated checkpoint: a preset name or config.json (default: 16 heads)")
    p.add_argument("--weights", choices=sorted(FORMATS), default="bf16",
                   help="generated checkpoint: projection format")
    p.add_argument("--workdir", default=None, help="where the generated checkpoint goes")
    p.add_argument("--layer", type=int, default=1)
    p.add_argument("--batch", type=int, default=2, help="sequences")
    p.add_argument("--prefill", type=int, default=5, help="prefill tokens per sequence")
    p.add_argument("--decode", type=int, default=3, help="decode steps")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--act", choices=("f32", "bf16"), default="f32")
    p.add_argument("--splits", type=int, default=1,
                   help="attention split-KV cap (1: the bound's premise; 0: the library's choice)")
    p.add_argument("--threads", type=int, default=0, help="CPU backend: OpenMP threads per rank")
    p.add_argument("--no-check", dest="check", action="store_false",
                   help="skip the comparison with the unsliced layer")
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    try:
        return run(args)
    except libmla.Error as e:  # a refusal: one line naming it, exit 2
        print("tp_layer.py: %s" % e, file=sys.stderr)
        return 2


def run(args):
    if args.simulate:
        worlds = [int(w) for w in args.simulate.split(",")]
        gpu = args.device == "gpu"
        torch = None
        if gpu:
            import torch
        ctx = libmla.Context("hip") if gpu else libmla.Context("cpu", threads=args.threads)
        arrays = Arrays(torch, "cuda:0" if gpu else "cpu")
        with tempfile.TemporaryDirectory() as tmp:
            ckdir = args.checkpoint or generate(os.path.join(tmp, "ck"), args.config,
                                                args.weights, args.layer)
            sched = Schedule(args.batch, args.prefill, args.decode, args.block_size)
            rep = simulate(ckdir, worlds, ctx, arrays, sched, layer=args.layer, act=args.act,
                           splits=args.splits)
        holds = verdict_holds(args.act, args.splits)
        bad = [w for w, r in rep.items() if not r["cache_same"] or (
            holds and (r["worst"] > 1 or (w > 1 and r["dropped"] <= 1)))]
        return 1 if bad else 0
    if args.spawn:
        with tempfile.TemporaryDirectory() as tmp:
            ckdir = args.checkpoint or generate(os.path.join(tmp, "ck"), args.config,
                                                args.weights, args.layer)
            spawn(args.spawn, args, ckdir)
        return 0
    # torchrun: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
    worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args, args.checkpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
