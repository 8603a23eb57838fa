"""The Hugging Face drop-in (python/examples/hf_decode_check.py).

With transformers installed: a tiny random DeepseekV3ForCausalLM, prefill + 32
greedy decode steps, stock against libmla's attention on the CPU backend
(and the HIP backend with a GPU), default RoPE and YaRN: same tokens, logits
within the stated bound. Without transformers the same check runs on a small
causal LM built from test_adapter's transliterated DeepseekV3Attention, so
the stock / libmla runs and the bound's machinery (Jacobian, sources) are
exercised everywhere."""

import os
import sys
import types

import pytest

import libmla
from conftest import ROOT, gpu_available

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
import hf_decode_check as H  # noqa: E402
import test_adapter as TA  # noqa: E402

nn = torch.nn


class Rotary(nn.Module):
    """HF's rotary embedding: fp32 angles."""

    def __init__(self, inv, amp):
        super().__init__()
        self.register_buffer("inv_freq", torch.tensor(inv, dtype=torch.float32))
        self.attention_scaling = amp

    def forward(self, x, position_ids):
        freqs = position_ids[..., None].float() * self.inv_freq.float()
        emb = torch.cat((freqs, freqs), -1)
        return ((emb.cos() * self.attention_scaling).to(x.dtype),
                (emb.sin() * self.attention_scaling).to(x.dtype))


class TinyLM(nn.Module):
    """embed -> (RMSNorm, attention, residual) x layers -> RMSNorm -> lm_head."""

    def __init__(self, interleave, yarn, vocab=64, seed=0):
        super().__init__()
        base, inv, amp = TA.make_model(interleave, yarn, seed=seed)
        self.config = base.config
        self.config.vocab_size = vocab
        self.layers = base.layers
        self.model = nn.Module()
        self.model.rotary_emb = Rotary(inv, amp)
        g = torch.Generator().manual_seed(seed + 1)
        hid = self.config.hidden_size
        self.embed = nn.Embedding(vocab, hid, dtype=torch.float64)
        self.norms = nn.ModuleList([TA.RMSNorm(hid) for _ in range(len(self.layers) + 1)])
        self.lm_head = nn.Linear(hid, vocab, bias=False, dtype=torch.float64)
        with torch.no_grad():
            self.embed.weight.copy_(torch.randn(vocab, hid, generator=g, dtype=torch.float64))
            self.lm_head.weight.copy_(torch.randn(vocab, hid, generator=g, dtype=torch.float64)
                                      / hid ** 0.5)
        self.seen = 0

    def forward(self, input_ids, position_ids=None, use_cache=False, past_key_values=None):
        if past_key_values is None:
            for a in self.layers:
                a.past = None
            self.seen = 0
        if position_ids is None:
            n = input_ids.shape[1]
            position_ids = torch.arange(self.seen, self.seen + n,
                                        device=input_ids.device)[None].expand(
                input_ids.shape[0], n)
        self.seen += input_ids.shape[1]
        h = self.embed(input_ids)
        pe = self.model.rotary_emb(h, position_ids)
        for a, norm in zip(self.layers, self.norms):
            h = h + a(norm(h), pe, None)[0]
        return types.SimpleNamespace(logits=self.lm_head(self.norms[-1](h)),
                                     past_key_values=True if use_cache else None)


@pytest.mark.parametrize("interleave,yarn", [(True, False), (False, True)])
def test_drop_in_on_a_tiny_causal_lm(interleave, yarn):
    model = TinyLM(interleave, yarn).float()
    prompt = torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(9))
    passed, lines, ratio = H.check(model, model.config, prompt, 4, libmla.Context("cpu"))
    assert passed, "\n".join(lines)
    assert ratio > 1e-3, "\n".join(lines)  # the bound is not vacuous


def have_transformers():
    try:
        import transformers  # noqa: F401
        return True
    except ImportError:
        return False


@pytest.mark.skipif(not have_transformers(), reason="transformers is not installed")
@pytest.mark.parametrize("backend,rope", [("cpu", "default"), ("cpu", "yarn"),
                                          ("hip", "default"), ("hip", "yarn")])
def test_transformers_deepseek_v3(backend, rope, capsys):
    if backend == "hip" and not (gpu_available() and torch.cuda.is_available()):
        pytest.skip("no GPU")
    rc = H.main(["--backend", backend, "--rope", rope, "--steps", "32"])
    out = capsys.readouterr().out
    print(out)
    assert rc == 0, out
