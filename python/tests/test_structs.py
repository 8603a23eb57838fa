"""The Python mirrors against the C headers: every MLA_API function has a
prototype here, and every struct has the C compiler's size and offsets."""

import os
import re
import shutil
import subprocess

import pytest

import libmla
from libmla import _lib, _types

from conftest import ROOT

HEADERS = os.path.join(ROOT, "include", "mla")


def header_text():
    out = ""
    for f in sorted(os.listdir(HEADERS)):
        if f.endswith(".h"):
            with open(os.path.join(HEADERS, f)) as fh:
                out += fh.read()
    out = re.sub(r"/\*.*?\*/", "", out, flags=re.S)
    return re.sub(r"^\s*#.*$", "", out, flags=re.M)


def test_every_entry_point_has_a_prototype():
    declared = set(re.findall(r"MLA_API[^;{}()]*?\b(mla_\w+)\s*\(", header_text()))
    assert len(declared) > 100
    missing = declared - set(_lib._PROTOTYPES)
    extra = set(_lib._PROTOTYPES) - declared
    assert not missing, "declare these in libmla/_lib.py _PROTOTYPES: %s" % sorted(missing)
    assert not extra, "not in the headers: %s" % sorted(extra)


def test_every_struct_is_mirrored():
    declared = set(re.findall(r"typedef struct (mla_\w+) \{", header_text()))
    assert declared == set(_types.C_STRUCTS)


def test_struct_layout_matches_the_compiler(tmp_path):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "mla/mla.h"',
             "int main(void) {"]
    expect = []
    for cname, cls in _types.C_STRUCTS.items():
        lines.append('printf("%%zu\\n", sizeof(%s));' % cname)
        expect.append(("sizeof %s" % cname, _types.ctypes.sizeof(cls)))
        for field, _ in cls._fields_:
            lines.append('printf("%%zu\\n", offsetof(%s, %s));' % (cname, field))
            expect.append(("%s.%s" % (cname, field), getattr(cls, field).offset))
    lines.append("return 0; }")
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", os.path.join(ROOT, "include"), str(src), "-o", str(exe)],
                   check=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    assert len(got) == len(expect)
    bad = [(what, want, int(g)) for (what, want), g in zip(expect, got) if int(g) != want]
    assert not bad, "ctypes mirror differs from C (what, python, C): %s" % bad


def test_defaults_filled_by_c_read_back():
    cfg = libmla.model_config("test-tiny")
    assert (cfg.heads, cfg.kv_lora, cfg.rope, cfg.nope, cfg.v) == (4, 128, 16, 32, 32)
    assert cfg.name == b"test-tiny"
    cd = libmla.cache_desc(8, 16, cfg.kv_lora, cfg.rope)
    d = libmla.attention_desc(cfg, cd)
    assert d.heads == 4 and d.cache.block_size == 16 and d.next_n == 1 and d.paged == 1
    assert abs(d.softmax_scale - libmla.softmax_scale(cfg)) < 1e-7
    o = libmla.layer_options(cfg, cd)
    assert o.act == libmla.DType.BF16 and o.index_cache.ue8m0 == 1
    assert o.index_cache.num_blocks == 8


def test_enums_match_the_library_names():
    lib = _lib.lib()
    texts = [_lib.status_name(s) for s in libmla.Status]
    assert len(set(texts)) == len(texts) and texts[0] == "ok"
    for d in libmla.DType:
        assert libmla.dtype_of(lib.mla_dtype_name(d).decode()) == d
        assert libmla._tensor.dtype_size(d) == lib.mla_dtype_size(d)
    for b in libmla.Backend:
        assert lib.mla_backend_name(b).decode().upper() == b.name
    for op in libmla.Op:
        assert lib.mla_op_name(op).decode() != "unknown"


def test_tuning_round_trips_through_the_context(cpu):
    knobs = cpu.tuning
    assert len(knobs) == 10 and knobs["hip_attention"] == "auto"
    cpu.set_tuning(hip_attention="mma", hip_gemm_splits=4)
    assert cpu.tuning["hip_attention"] == "mma" and cpu.tuning["hip_gemm_splits"] == "4"
    with pytest.raises(libmla.Error):
        cpu.set_tuning(hip_att_row_groups=3)
    assert cpu.tuning["hip_att_row_groups"] == "auto"
    cpu.set_tuning(hip_attention="auto", hip_gemm_splits="auto")
    assert cpu.tuning == knobs
