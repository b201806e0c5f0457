"""Tests of embshard_breakdown on hand-made iteration traces."""
import json
import os
import tempfile
import unittest

import embshard_breakdown as b


def trace(devices):
    """devices: [(compute, forward, backward) ms] -> an eval --trace-dir file's JSON."""
    events = []
    for d, (compute, fwd, bwd) in enumerate(devices):
        events.append({"ph": "M", "name": "thread_name", "tid": d, "args": {"name": f"device {d}"}})
        events.append({"ph": "X", "cat": "compute", "name": "fused embedding compute",
                       "tid": d, "ts": 0, "dur": compute * 1000})
        events.append({"ph": "X", "cat": "comm", "name": "backward all-to-all", "tid": d,
                       "ts": compute * 1000, "dur": bwd * 1000})
        events.append({"ph": "X", "cat": "wait", "name": "wait for the last device", "tid": d,
                       "ts": 0, "dur": 123000})
        events.append({"ph": "X", "cat": "comm", "name": "forward all-to-all", "tid": d,
                       "ts": 0, "dur": fwd * 1000})
    return {"traceEvents": events}


class Breakdown(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dirs = {}
        for name in ("pred", "m1", "m2"):
            self.dirs[name] = os.path.join(self.tmp.name, name)
            os.mkdir(self.dirs[name])

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, run, task, algo, devices):
        with open(os.path.join(self.dirs[run], f"task{task}_{algo}.json"), "w") as f:
            json.dump(trace(devices), f)

    def test_critical_paths_and_ratios(self):
        # a: balanced on the model, its device 1 slower measured; b: one device ahead.
        self.write("pred", 0, "a", [(10, 1, 1), (10, 1, 1)])
        self.write("m1", 0, "a", [(10, 2, 1), (13, 1, 1)])
        self.write("m2", 0, "a", [(10, 2, 1), (11, 1, 1)])
        self.write("pred", 0, "b", [(12, 1, 1), (6, 1, 1)])
        self.write("m1", 0, "b", [(12, 3, 2), (6, 1, 1)])
        self.write("m2", 0, "b", [(12, 3, 2), (6, 1, 1)])
        result, tasks = b.breakdown(self.dirs["pred"], [self.dirs["m1"], self.dirs["m2"]])
        self.assertEqual(tasks, {"a": 1, "b": 1})
        a, bb = result["a"], result["b"]
        self.assertAlmostEqual(a["predicted compute, predicted exchanges"], 12)  # 10 + 1 + 1
        self.assertAlmostEqual(a["measured compute, predicted exchanges"], 14)  # mean 12 + 1 + 1
        self.assertAlmostEqual(a["predicted compute, measured exchanges"], 13)  # 10 + 1 + 2
        self.assertAlmostEqual(a["both measured"], 15)  # max(11, 13) + 2
        self.assertAlmostEqual(bb["both measured"], 17)  # 12 + 2 + 3
        text = b.report(result, tasks, "b")
        self.assertIn("both measured", text)
        self.assertIn(f"{15 / 17:.3f}", text)
        # One task's traces are only in some directories: the missing one named.
        self.write("pred", 1, "a", [(10, 1, 1), (10, 1, 1)])
        self.write("m1", 1, "a", [(10, 1, 1), (10, 1, 1)])
        with self.assertRaisesRegex(b.BreakdownError, "m2/task1_a.json: missing"):
            b.breakdown(self.dirs["pred"], [self.dirs["m1"], self.dirs["m2"]])
        # --algos keeps to the named ones, and names one without traces.
        result, _ = b.breakdown(self.dirs["pred"], [self.dirs["m1"]], ["b"])
        self.assertEqual(list(result), ["b"])
        with self.assertRaisesRegex(b.BreakdownError, "no trace of algorithm 'c'"):
            b.breakdown(self.dirs["pred"], [self.dirs["m1"]], ["c"])
        with self.assertRaisesRegex(b.BreakdownError, "--against c: no such algorithm"):
            b.report(result, {"b": 1}, "c")

    def test_bad_traces_are_named(self):
        self.write("pred", 0, "a", [(10, 1, 1), (10, 1, 1)])
        self.write("m1", 0, "a", [(10, 1, 1)])  # another device count
        with self.assertRaisesRegex(b.BreakdownError, "other devices"):
            b.breakdown(self.dirs["pred"], [self.dirs["m1"]])
        with open(os.path.join(self.dirs["m1"], "task0_a.json"), "w") as f:
            f.write("{\"traceEvents\": [")  # torn
        with self.assertRaisesRegex(b.BreakdownError, "m1/task0_a.json: not an embshard"):
            b.breakdown(self.dirs["pred"], [self.dirs["m1"]])
        with self.assertRaisesRegex(b.BreakdownError, "no task<i>_<algorithm>.json trace"):
            b.breakdown(self.dirs["m2"], [self.dirs["m1"]])
        self.assertEqual(b.main([self.dirs["pred"], self.dirs["m1"]]), 1)


if __name__ == "__main__":
    unittest.main()
