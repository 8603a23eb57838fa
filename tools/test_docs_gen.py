#!/usr/bin/env python3
"""Unit test of tools/docs_gen.py's prefill and CPU-peer tables (tools/docs_peer.py) on small
synthetic runs: the cells, the plan's 10% rule, both floors met and unmet, the pairing of
the peer's rows by `record --peer`, and `record --cpu-run`'s medians over rounds.

    python3 tools/test_docs_gen.py     # exit 0 pass, 1 fail, 77 skipped (a module missing)
"""
import contextlib
import io
import json
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import docs_gen
    import docs_peer
except ImportError as ex:  # ctest's SKIP_RETURN_CODE
    print(f"test_docs_gen: skipped ({ex})")
    sys.exit(77)

MM = 1000.0  # GFLOP/s: the synthetic runs' matmul ceiling


def prefill_row(B, T, H, form, t, flops, plan):
    return {"op": "prefill", "form": form, "batch": B, "tokens": T, "heads": H, "cache": "bf16",
            "status": "ok", "note": "", "median_s": t, "min_s": t, "flops": flops,
            "bytes": 1 << 20, "plan_form": plan}


def prefill_run():
    """Three shapes: the floor's (T 4096, 128 heads) met at batch 1 and unmet at batch 4, and
    a short one where the plan's absorbed choice is 1.5x the expanded form's time."""
    rows = [
        prefill_row(1, 256, 16, "absorbed", 3e-3, 1e9, "absorbed"),
        prefill_row(1, 256, 16, "expanded", 2e-3, 1e9, "absorbed"),
        prefill_row(1, 4096, 128, "absorbed", 2.0, 1e12, "expanded"),
        prefill_row(1, 4096, 128, "expanded", 1.0, 0.6e12, "expanded"),  # 60% of MM
        prefill_row(4, 4096, 128, "absorbed", 8.0, 4e12, "expanded"),
        prefill_row(4, 4096, 128, "expanded", 4.0, 1.6e12, "expanded"),  # 40% of MM
    ]
    return {"bench": "prefill", "backend": "hip", "device": "test GPU", "unix_time": 1000,
            "ceilings": {"copy_gbs": 100.0, "matmul_gflops": MM}, "rows": rows,
            "_file": "bench/results/test/prefill.json"}


def peer_json(path):
    rows = [{"op": "prefill", "form": "expanded (torch SDPA)", "batch": B, "tokens": T,
             "heads": H, "status": "ok", "median_s": t, "how": "F.sdpa"}
            for B, T, H, t in ((1, 256, 16, 4e-3), (1, 4096, 128, 1.0), (4, 4096, 128, 3.0))]
    Path(path).write_text(json.dumps({"bench": "peer_torch_prefill", "torch": "2.x",
                                      "device": "test GPU", "rows": rows}))


def write_cpu_round(d, ratios, ours_us, demo_ms, layer_ms):
    """One round of run_cpu.sh's output (native only): two decode rows whose PyTorch time is
    `ratios` times ours."""
    d.mkdir(parents=True)
    keys = [(1, 1024, 16, "bf16"), (4, 1024, 16, "bf16")]
    ours = [{"batch": b, "context": c, "heads": h, "cache": k, "status": "ok", "flops": 1e9,
             "median_s": ours_us * 1e-6, "ratio": 0.5, "cpu_s": 2 * ours_us * 1e-6}
            for b, c, h, k in keys]
    peer = [dict(o, median_s=o["median_s"] * r, cpu_s=o["cpu_s"] * r, compute="f32")
            for o, r in zip(ours, ratios)]
    ceil = {"copy_gbs": 10.0, "matmul_gflops": 80.0, "matmul_how": "cblas_sgemm"}
    (d / "decode_native.json").write_text(json.dumps(
        {"bench": "decode", "device": "host CPU", "unix_time": 5000, "ceilings": ceil,
         "rows": ours}))
    (d / "peer_decode_native.json").write_text(json.dumps({"rows": peer}))
    (d / "demo_native.txt").write_text(f"decode: median step {demo_ms} ms\n")
    (d / "layer_native.txt").write_text(f"x\ndecode: median step {layer_ms} ms (torch)\n")


class Prefill(unittest.TestCase):
    def setUp(self):
        self.run = prefill_run()
        with tempfile.TemporaryDirectory() as tmp:
            peer_json(Path(tmp) / "peer.json")
            docs_gen.add_peer(self.run, Path(tmp) / "peer.json")
        self.head, rows, self.pts, self.bars = docs_peer.prefill_rows(self.run)
        self.rows = {(r[0], r[1], r[2]): dict(zip(self.head, r)) for r in rows}

    def test_peer_pairs_both_forms(self):
        self.assertEqual(self.run["peer"]["how"], "F.sdpa")
        self.assertTrue(all("peer_median_s" in r for r in self.run["rows"]))

    def test_cells(self):
        self.assertEqual(len(self.rows), 3)  # one table row per shape
        r = self.rows[(4096, 1, 128)]
        self.assertEqual(r["expanded us"], "1000000")
        self.assertEqual(r["expanded of matmul"], "60.0%")
        self.assertEqual(r["absorbed of matmul"], "50.0%")
        self.assertEqual(r["plan's choice"], "expanded")
        self.assertEqual(r["within 10%"], "yes")
        self.assertEqual(r["SDPA / expanded"], "1.00")
        self.assertEqual(len(self.bars), 6)

    def test_floor(self):
        self.assertEqual(self.rows[(4096, 1, 128)]["floor"], "met")
        bad = self.rows[(4096, 4, 128)]["floor"]
        self.assertTrue(bad.startswith("unmet"), bad)
        self.assertIn("40.0% of matmul", bad)
        self.assertIn("0.75x SDPA", bad)
        self.assertEqual(self.rows[(256, 1, 16)]["floor"], "")  # not the floor's shape
        notes = "\n".join(docs_peer.prefill_notes(self.run))
        self.assertIn("): unmet.", notes)

    def test_plan_slack(self):
        r = self.rows[(256, 1, 16)]
        self.assertEqual(r["plan's choice"], "absorbed")
        self.assertEqual(r["within 10%"], "no: 1.50x the expanded form's time")
        self.assertEqual(r["SDPA / expanded"], "2.00")

    def test_rounding_at_the_floor(self):
        self.assertEqual(docs_peer.speedup(2.996), "2.99")  # not "3.00" beside "unmet"
        run = prefill_run()
        run["rows"][3]["flops"] = 0.54996e12  # 54.996% of MM: below the 55% floor
        head, rows, _, _ = docs_peer.prefill_rows(run)
        floor = dict(zip(head, rows[1]))["floor"]
        self.assertIn("54.9% of matmul < 55.0%", floor)

    def test_no_peer(self):
        run = prefill_run()
        head, rows, _, _ = docs_peer.prefill_rows(run)
        cells = {(r[0], r[1]): dict(zip(head, r)) for r in rows}
        self.assertEqual(cells[(4096, 1)]["floor"], "unmet: no SDPA time")
        self.assertEqual(cells[(4096, 1)]["SDPA us"], "-")


class CpuPeer(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        out = Path(self.tmp.name)
        (out / "machine.txt").write_text(
            "model name\t: Test CPU\n2\nfma avx2 avx512f \n" + "ab" * 20 + "\ntorch 1.13\n")
        # row 1: ratios 4, 5, 2 -> median 4 (met); row 2: 2, 1, 3 -> median 2 (unmet)
        for i, (r1, r2, us_, demo) in enumerate(((4, 2, 100, 1.0), (5, 1, 300, 3.0),
                                                 (2, 3, 200, 2.0)), 1):
            write_cpu_round(out / f"r{i}", (r1, r2), us_, demo, 3 * demo)
        self.run = docs_peer.cpu_run(out)
        self.run["_file"] = "bench/results/test/cpu_peer.json"

    def tearDown(self):
        self.tmp.cleanup()

    def test_medians(self):
        s = self.run["isas"]["native"]
        self.assertEqual(self.run["rounds"], 3)
        self.assertEqual(list(self.run["isas"]), ["native"])
        self.assertAlmostEqual(s["rows"][0]["median_s"], 200e-6)
        self.assertAlmostEqual(s["rows"][0]["peer_ratio"], 4.0)
        self.assertAlmostEqual(s["rows"][1]["peer_ratio"], 2.0)
        self.assertAlmostEqual(s["rows"][1]["cpu_time_ratio"], 2.0)
        self.assertEqual((s["demo_step_ms"], s["layer_step_ms"]), (2.0, 6.0))
        self.assertEqual(self.run["machine"]["cpu_model"], "Test CPU")
        self.assertEqual(self.run["machine"]["flags"], "fma avx2 avx512f")
        self.assertEqual(self.run["unix_time"], 5000)

    def test_table(self):
        lines = docs_peer.cpu_peer_lines(self.run)
        rows = [ln for ln in lines if ln.startswith("| 1 ") or ln.startswith("| 4 ")]
        self.assertEqual(len(rows), 2)
        self.assertTrue(rows[0].endswith("| 4.00 | 4.00 | met |"), rows[0])
        self.assertTrue(rows[1].endswith("| 2.00 | 2.00 | unmet |"), rows[1])
        text = "\n".join(lines)
        self.assertIn("median decode step 2.000 ms", text)
        self.assertIn("layer step (`peer_torch.py --layer`) 6.000 ms; PyTorch / ours 3.00", text)
        self.assertIn("Test CPU, 2 logical CPUs", text)

    def test_cpu_table_prints(self):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            docs_peer.cpu_table.main(self.tmp.name)
        self.assertIn("4.00x", buf.getvalue())


class Blocks(unittest.TestCase):
    def test_results_block(self):
        prefill = prefill_run()
        cpu = CpuPeer("test_table")
        cpu.setUp()
        try:
            targets = [("test", {"title": "Test target"},
                        {"prefill": prefill, "cpu_peer": cpu.run})]
            plots = {}
            res = "\n".join(docs_gen.perf_blocks(targets, plots)["results"])
        finally:
            cpu.tearDown()
        self.assertIn("#### Attention prefill, both forms (`mla bench prefill`)", res)
        self.assertIn("- **Floor** (T = 4096, 128 heads", res)
        self.assertIn("#### CPU decode and layer step vs PyTorch-CPU", res)
        self.assertEqual([p.name for p in plots], ["perf-test-prefill.png"])


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False).result.wasSuccessful() else 1)
