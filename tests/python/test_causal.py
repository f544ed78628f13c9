"""The causal model from Python (docs/python.md, "Critical path and
what-if"): HolisticTraceAnalysis' critical_path_analysis and
overlay_critical_path_analysis on TraceAnalysis and Trace, and
Trace.whatif, on HTA's cuda_event_sync test trace (the figures
docs/critical-path.md lists for it) and a tprof-captured H100 trace."""

import gzip
import os
import tempfile
import unittest

import numpy as np

import tprof
from support import data

EVENT_SYNC = data("public", "hta", "critical_path", "cuda_event_sync", "event_sync_trace.json.gz")
H100 = data("gpu", "h100-tprof", "64_bf16_warm_eager.json")
HTA_BOUNDS = {"cpu_bound", "data_loading", "gpu_communication_bound", "gpu_compute_bound",
              "gpu_kernel_kernel_overhead", "gpu_kernel_launch_overhead"}


def critical_marks(t):
    """Events of `t` with args critical == 1, and its critical_path flow events (ph, args)."""
    ev = t.events()
    marked, flows = [], []
    for i in range(len(t)):
        if ev["name"].iat[i] == "critical_path" and ev["cat"].iat[i] == "critical_path":
            flows.append((ev["ph"].iat[i], t.args(i)))
        elif t.args(i).get("critical") == 1:
            marked.append(i)
    return marked, flows


class CriticalPathTest(unittest.TestCase):
    def check_path(self, cp):
        # The path's time by bound type sums to its length (the step's time),
        # and HTA's summary to 100 %.
        self.assertEqual(int(cp.summary_ns().sum()), cp.length_ns)
        self.assertEqual(int(cp.path["dur_ns"].sum()) + cp.unexplained_ns, cp.length_ns)
        self.assertAlmostEqual(float(cp.summary().sum()), 100.0, places=6)
        self.assertLessEqual(set(cp.summary().index) - {""}, HTA_BOUNDS)
        self.assertEqual(list(cp.path.columns), ["event_idx", "name", "type", "bound_by", "start_ns", "dur_ns"])
        starts = cp.path["start_ns"].to_numpy()
        self.assertTrue(np.all(starts[1:] >= starts[:-1]))  # oldest first
        b = cp.get_critical_path_breakdown()
        self.assertEqual(len(b), len(cp.path))
        self.assertAlmostEqual(float(b["duration"].sum()), cp.path["dur_ns"].sum() / 1000.0)
        self.assertFalse(b["bound_by"].isna().any())

    def test_event_sync_step_matches_the_documented_breakdown(self):
        analyzer = tprof.TraceAnalysis(trace_files={0: EVENT_SYNC})
        cp, success = analyzer.critical_path_analysis(rank=0, annotation="ProfilerStep", instance_id=0)
        self.assertTrue(success)
        self.assertEqual((cp.kind, cp.step), ("step", 100))
        self.check_path(cp)
        # docs/critical-path.md, "cuda_event_sync": the step's 3154 µs.
        self.assertEqual(cp.length_ns, 3_154_000)
        self.assertEqual(cp.summary_ns().to_dict(), {
            "cpu_bound": 3_071_000, "gpu_compute_bound": 38_000,
            "gpu_kernel_kernel_overhead": 17_000, "gpu_kernel_launch_overhead": 28_000})
        # The read-back to pageable memory waits for its copy (a sync edge), then the spin kernel.
        device = cp.path[cp.path["type"] == "device"]
        self.assertEqual(list(device["name"]),
                         ["Memcpy DtoH (Device -> Pageable)", "at::cuda::(anonymous namespace)::spin_kernel(long)"])
        self.assertEqual(list(device["dur_ns"]), [2_000, 36_000])
        # The same through the Trace, and the whole trace ("") as HTA's annotation.
        t = analyzer.traces[0]
        self.assertEqual(t.critical_path_analysis()[0].summary_ns().to_dict(), cp.summary_ns().to_dict())
        whole, ok = t.critical_path_analysis("", None)
        self.assertTrue(ok)
        self.assertEqual(whole.kind, "window")
        self.check_path(whole)
        events = cp.critical_path_events()
        self.assertEqual(set(events["event_idx"]), cp.critical_path_events_set)
        self.assertEqual(int(events["path_ns"].sum()), int(cp.path["dur_ns"][cp.path["event_idx"].notna()].sum()))

    def test_annotations_match_by_substring_as_hta_and_a_missing_one_is_none(self):
        t = tprof.read(H100)
        cp, ok = t.critical_path_analysis("matmul_ad", 1)  # the second matmul_add annotation
        self.assertTrue(ok)
        self.assertEqual(cp.kind, "annotation")
        self.assertEqual(t.strings([t.column("name")[cp.event]]), ["matmul_add"])
        ev = t.events()
        starts = sorted(ev[(ev["name"] == "matmul_add") & (ev["kind"] == "user_annotation")]["ts_ns"])
        self.assertEqual(cp.start_ns, starts[1])
        self.assertGreaterEqual(cp.length_ns, int(t.column("dur_ns")[cp.event]))
        self.check_path(cp)
        exact, _ = t.critical_path_analysis("matmul_add", 1)
        self.assertEqual(exact.summary_ns().to_dict(), cp.summary_ns().to_dict())
        self.assertIsNone(t.critical_path_analysis("no such annotation"))
        self.assertIsNone(t.critical_path_analysis("ProfilerStep", 1000))
        with self.assertRaises(ValueError):
            t.critical_path_analysis("ProfilerStep", (1, 2))

    def test_each_step_path_is_the_step_time_whatif_measures(self):
        t = tprof.read(H100)
        times = t.whatif([])
        self.assertTrue(times.attrs["has_steps"])
        self.assertTrue((times["replayed_ns"] == times["measured_ns"]).all())
        self.assertTrue((times["predicted_ns"] == times["replayed_ns"]).all())
        for i in range(len(times)):
            cp, ok = t.critical_path_analysis("ProfilerStep", i)
            self.assertTrue(ok)
            self.assertEqual(cp.step, times["step"].iat[i])
            self.assertEqual(cp.length_ns, times["measured_ns"].iat[i])
            self.check_path(cp)

    def test_whatif_remove_add_predicts_shorter_steps_and_bad_edits_raise(self):
        t = tprof.read(H100)
        df = t.whatif("remove:op::add")
        self.assertEqual(list(df.columns), ["step", "measured_ns", "replayed_ns", "predicted_ns"])
        self.assertEqual(str(df["step"].dtype), "Int64")
        self.assertGreater(len(df), 1)
        self.assertTrue((df["predicted_ns"] < df["measured_ns"]).all())
        self.assertGreater(df.attrs["matched"]["remove:op::add"], 0)
        with self.assertRaisesRegex(ValueError, "expected remove:PATTERN"):
            t.whatif(["bogus"])
        with self.assertRaisesRegex(ValueError, "matches no event"):
            t.whatif(["remove:no_such_op_anywhere"])
        with self.assertRaisesRegex(ValueError, "scale"):
            t.whatif(["scale:gemm=x"])


class OverlayTest(unittest.TestCase):
    def overlay_round_trip(self, path, only):
        t = tprof.read(path)
        cp, _ = t.critical_path_analysis("ProfilerStep", 0)
        with tempfile.TemporaryDirectory() as tmp:
            out_dir = os.path.join(tmp, "made")  # made when missing
            out = t.overlay_critical_path_analysis(cp, out_dir, only_show_critical_events=only)
            self.assertEqual(out, os.path.join(out_dir, "overlaid_critical_path_" + os.path.basename(path)))
            with open(out, "rb") as f:
                self.assertEqual(f.read(2), b"\x1f\x8b")  # gzip whatever the suffix, as HTA
            back = tprof.read(out)
            with gzip.open(out) as f:
                self.assertTrue(f.read(1))
        marked, flows = critical_marks(back)
        return t, cp, back, marked, flows

    def test_the_overlay_marks_the_path_and_reads_back(self):
        for path in (EVENT_SYNC, H100):
            with self.subTest(path=os.path.basename(path)):
                t, cp, back, marked, flows = self.overlay_round_trip(path, only=False)
                self.assertEqual(len(back), len(t) + len(flows))
                self.assertEqual(set(marked), cp.critical_path_events_set)
                self.assertGreater(len(flows), 0)
                self.assertEqual(sum(ph == "s" for ph, _ in flows), sum(ph == "f" for ph, _ in flows))
                for _, args in flows:
                    self.assertIs(args["critical"], True)
                    self.assertIn(args["type"], {"host", "host_gap", "launch", "stream", "device", "sync",
                                                 "stream_wait", "thread"})
                # The input Trace is not changed.
                self.assertEqual(critical_marks(t), ([], []))

    def test_only_critical_events_keeps_the_path_annotations_and_non_slices(self):
        t, cp, back, marked, flows = self.overlay_round_trip(EVENT_SYNC, only=True)
        ev = back.events()
        kept = ev[(ev["ph"] == "X") & ~ev["kind"].isin(["user_annotation", "python_function"])]
        # Every slice left is on the path; every event on the path is left.
        self.assertLessEqual(set(kept.index), set(marked))
        self.assertEqual(len(marked), len(cp.critical_path_events_set))
        self.assertLess(len(back), len(t) + len(flows))

    def test_a_path_of_another_trace_is_refused(self):
        a = tprof.read(EVENT_SYNC)
        b = tprof.read(EVENT_SYNC)
        cp, _ = a.critical_path_analysis()
        with tempfile.TemporaryDirectory() as tmp, self.assertRaises(ValueError):
            b.overlay_critical_path_analysis(cp, tmp)


if __name__ == "__main__":
    unittest.main()
