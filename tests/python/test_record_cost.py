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
