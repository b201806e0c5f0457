"""Tests of embshard.breakdown on hand-made iteration traces."""
import json
import os
import tempfile
import unittest

import embshard.breakdown as b


def trace(devices, predicted=()):
    """devices: [(compute, forward, backward) ms] -> an eval --trace-dir file's JSON;
    `predicted`: the model's figures beside them, as a measured run writes them."""
    events = []
    for d, (compute, fwd, bwd) in enumerate(predicted):
        events.append({"ph": "X", "cat": "compute", "name": "fused embedding compute", "pid": 1,
                       "tid": d, "ts": 0, "dur": compute * 1000})
        events.append({"ph": "X", "cat": "comm", "name": "forward all-to-all", "pid": 1,
                       "tid": d, "ts": 0, "dur": fwd * 1000})
        events.append({"ph": "X", "cat": "comm", "name": "backward all-to-all", "pid": 1,
                       "tid": d, "ts": 0, "dur": bwd * 1000})
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

    def write(self, run, task, algo, devices, predicted=None):
        # A measured run's trace carries the model's figures too (process 1):
        # they must not count as measured.
        if predicted is None:
            predicted = [(50, 50, 50)] * len(devices) if run != "pred" else ()
        with open(os.path.join(self.dirs[run], f"task{task}_{algo}.json"), "w") as f:
            json.dump(trace(devices, predicted), f)

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
        # The floor: mean measured compute, plus the least exchanges.
        self.assertAlmostEqual(a[b.FLOOR], 13)  # (10 + 12) / 2 + 1 + 1
        self.assertAlmostEqual(bb[b.FLOOR], 11)  # (12 + 6) / 2 + 1 + 1
        text = b.report(result, tasks, "b")
        self.assertIn("both measured", text)
        self.assertIn(f"{15 / 17:.3f}", text)
        self.assertIn(f"{13 / 17:.3f}", text)  # a's floor against b's measured path
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

    def test_a_measured_directory_alone_reads_its_predictions(self):
        predicted = [(10, 1, 1), (8, 2, 1)]
        self.write("pred", 0, "a", predicted)
        self.write("m1", 0, "a", [(12, 2, 1), (9, 1, 1)], predicted)
        alone, tasks = b.breakdown(None, [self.dirs["m1"]])
        self.assertEqual(tasks, {"a": 1})
        self.assertEqual(alone, b.breakdown(self.dirs["pred"], [self.dirs["m1"]])[0])
        self.assertAlmostEqual(alone["a"]["predicted compute, predicted exchanges"], 13)  # 11 + 2
        self.assertAlmostEqual(alone["a"]["both measured"], 15)  # 13 + 2
        self.assertEqual(b.main([self.dirs["m1"]]), 0)
        # A measured trace without the predicted figures: named, with what to do.
        self.write("m2", 0, "a", [(12, 2, 1), (9, 1, 1)], ())
        with self.assertRaisesRegex(b.BreakdownError, "m2/task0_a.json: no predicted figures"):
            b.breakdown(None, [self.dirs["m2"]])

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
