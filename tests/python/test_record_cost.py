"""bench/record_cost.py's statistics: the added cost per round against the
same round's baseline, and the bootstrap over whole rounds that keeps that
pairing; and its refusal without a GPU."""

import importlib.util
import os
import random
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "record_cost.py")
_spec = importlib.util.spec_from_file_location("record_cost", SCRIPT)
rc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rc)


def drifting_rounds(n, added, seed=7):
    """Rounds whose machine drifts (each round's baseline 30-60 us) while the
    profiler adds `added` ns (plus 1% noise) to that round's own baseline."""
    rng = random.Random(seed)
    rounds = []
    for _ in range(n):
        base = rng.uniform(30_000, 60_000)
        rounds.append({"none": base, "torch cuda": base + 10_000 * rng.uniform(0.99, 1.01),
                       "tprof record": base + added * rng.uniform(0.99, 1.01)})
    return rounds


class PairedBootstrapTest(unittest.TestCase):
    def test_the_pairing_removes_the_drift_between_rounds(self):
        rounds = drifting_rounds(15, 2_000)
        point, low, high = rc.paired_bootstrap(rounds, rc.median_added("tprof record", "none"), 2000, 1)
        self.assertAlmostEqual(point, 2_000, delta=30)
        self.assertLess(low, point)
        self.assertGreater(high, point)
        self.assertLess(high - low, 100)  # 2 us added, inside 30 us of drift
        # Resampling the two modes' rounds independently (no pairing), the
        # drift swamps it: the interval spans many us.
        rng = random.Random(1)
        diffs = sorted(rc.statistics.median(rng.choice(rounds)["tprof record"] for _ in rounds)
                       - rc.statistics.median(rng.choice(rounds)["none"] for _ in rounds) for _ in range(2000))
        self.assertGreater(diffs[1949] - diffs[50], 5_000)

    def test_ratio_of_added_and_its_interval(self):
        rounds = drifting_rounds(15, 2_000)
        point, low, high = rc.paired_bootstrap(
            rounds, rc.ratio_of_added("tprof record", "none", "torch cuda", "none"), 2000, 1)
        self.assertAlmostEqual(point, 0.2, delta=0.01)
        self.assertLessEqual(low, point)
        self.assertGreaterEqual(high, point)
        self.assertLess(high, 0.5)

    def test_same_seed_same_interval_and_constant_rounds_collapse(self):
        rounds = drifting_rounds(15, 3_000)
        stat = rc.median_added("tprof record", "none")
        self.assertEqual(rc.paired_bootstrap(rounds, stat, 500, 3), rc.paired_bootstrap(rounds, stat, 500, 3))
        flat = [{"none": 100.0, "tprof record": 150.0}] * 5
        self.assertEqual(rc.paired_bootstrap(flat, stat, 500, 3), (50.0, 50.0, 50.0))
        with self.assertRaises(ValueError):
            rc.paired_bootstrap([], stat)

    def test_a_baseline_that_adds_nothing_gives_no_ratio(self):
        rounds = [{"a": 10.0, "b": 10.0, "base": 10.0}] * 3
        self.assertEqual(rc.ratio_of_added("a", "base", "b", "base")(rounds), float("inf"))


class TablesTest(unittest.TestCase):
    def test_main_pairs_rounds_and_prints_both_comparisons(self):
        # The children stubbed: each round's machine drifts; torch (CUDA)
        # adds 10 us, tprof record 2 us, torch (CPU + CUDA) 20 us over 10
        # events, the C++ floor 1 us and tprof's Profiler 1.1 us over 11.
        rng = random.Random(3)
        bases = [rng.uniform(30_000, 60_000) for _ in range(6)]
        state = {"calls": []}

        def py_result(argv, what):
            mode = "tprof record" if argv[1] == "record" else argv[argv.index("--inner") + 1]
            state["calls"].append(mode)
            if mode == "info":
                return {"torch": "t", "cuda": "c", "gpu": "g", "capability": "9.0", "memory_gib": 1}, 0, ""
            base = bases[(len(state["calls"]) - 2) // 6]  # this round's machine
            add = {"none": 0, "torch cuda": 10_000, "tprof record": 2_000, "none ops": 500, "torch ops": 20_500}
            events = {"torch cuda": 4.0, "torch ops": 10.0}.get(mode)
            return {"ns_per_step": base + add[mode], "events_per_step": events}, 0, ""

        def cpp_result(argv):
            state["calls"].append("C++")
            return {"none": 20_000.0, "floor": 21_000.0, "tprof": 21_100.0, "tprof_events_per_step": 11.0}

        saved = (rc.py_result, rc.cpp_result, rc.find_binary, rc.machine_info, rc.trace_events_per_step, sys.argv)
        rc.py_result, rc.cpp_result = py_result, cpp_result
        rc.find_binary = lambda *a: "/bin/true"
        rc.machine_info = lambda *a: ["machine"]
        rc.trace_events_per_step = lambda *a: 4.0
        sys.argv = [SCRIPT, "--sizes", "64", "--rounds", "6", "--bootstrap", "200"]
        import contextlib
        import io
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc.main()
        finally:
            rc.py_result, rc.cpp_result, rc.find_binary, rc.machine_info, rc.trace_events_per_step, sys.argv = saved
        text = out.getvalue()
        # Each round runs every mode once, in a rotating order; each is
        # measured against the same round's none, so the drift drops out.
        self.assertEqual(state["calls"][0], "info")
        self.assertEqual(len(state["calls"]), 1 + 6 * 6)
        self.assertIn("64x64 bf16, 3000 timed steps, 6 rounds", text)
        self.assertIn("tprof record / torch.profiler (CUDA), added per step: 0.20 [0.20, 0.20]  (target <= 0.5: met)",
                      text)
        self.assertIn("torch ops                   ", text)
        self.assertIn("C++ tprof Profiler / CUPTI floor, added per step: 1.10 [1.10, 1.10]", text)
        self.assertIn("added ns per recorded event: torch.profiler (CPU + CUDA) 2000, tprof::Profiler (CPU + CUDA) 100",
                      text)


class RefusalTest(unittest.TestCase):
    def test_without_torch_or_a_gpu_it_says_why_and_exits_2(self):
        try:
            import torch  # noqa: F401
            if torch.cuda.is_available():
                self.skipTest("a GPU is here: the benchmark would run")
        except ImportError:
            pass
        p = subprocess.run([sys.executable, SCRIPT, "--rounds", "2"], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("record_cost: needs PyTorch with CUDA and a GPU", p.stderr)

    def test_bad_arguments_exit_2(self):
        p = subprocess.run([sys.executable, SCRIPT, "--rounds", "1"], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--rounds at least 2", p.stderr)
        p = subprocess.run([sys.executable, SCRIPT, "--sizes", "x"], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn("take integers", p.stderr)


if __name__ == "__main__":
    unittest.main()
