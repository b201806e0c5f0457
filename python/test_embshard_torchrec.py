"""Tests of embshard_torchrec without TorchRec: python3 -m unittest (in python/)."""

import copy
import importlib.util
import json
import os
import tempfile
import unittest

import embshard_torchrec as et


def sample_plan():
    return {
        "format": "embshard-plan", "version": 1, "algorithm": "neuroshard",
        "cost_model": "analytic", "batch_size": 4096, "num_devices": 2,
        "device_memory_bytes": [10**9, 10**9],
        "table_order": ["b", "a", "c"],
        "tables": {
            "a": {"sharding_type": "column_wise", "compute_kernel": "fused", "ranks": [0, 1],
                  "rows": 100, "dim": 64, "memory_bytes": 26000,
                  "shards": [
                      {"shard_offsets": [0, 0], "shard_sizes": [100, 32], "placement": "rank:0/cuda:0"},
                      {"shard_offsets": [0, 32], "shard_sizes": [100, 32], "placement": "rank:1/cuda:1"}]},
            "b": {"sharding_type": "table_wise", "compute_kernel": "fused", "ranks": [1],
                  "rows": 10, "dim": 16, "memory_bytes": 680,
                  "shards": [{"shard_offsets": [0, 0], "shard_sizes": [10, 16],
                              "placement": "rank:1/cuda:1"}]},
            "c": {"sharding_type": "data_parallel", "compute_kernel": "dense", "ranks": [0, 1],
                  "rows": 5, "dim": 8, "memory_bytes": 360, "shards": None},
        },
        "predicted": {"cost_ms": 1.5, "critical_device": 1, "imbalance": 1.1,
                      "lower_bound_ms": 1.2, "gap": 0.25, "search_s": 0.01,
                      "devices": [{"memory_bytes": 13000, "memory_fraction": 1.3e-5,
                                   "compute_ms": 1.0, "fwd_comm_ms": 0.1, "bwd_comm_ms": 0.1,
                                   "total_ms": 1.2, "num_shards": 2, "dim_sum": 32},
                                  {"memory_bytes": 13680, "memory_fraction": 1.4e-5,
                                   "compute_ms": 1.3, "fwd_comm_ms": 0.1, "bwd_comm_ms": 0.1,
                                   "total_ms": 1.5, "num_shards": 3, "dim_sum": 48}]},
    }


class DictForm(unittest.TestCase):
    def test_tables_in_task_order_with_torchrec_fields(self):
        d = et.to_parameter_sharding_dicts(sample_plan())
        self.assertEqual(list(d), ["b", "a", "c"])
        self.assertEqual(d["a"]["sharding_type"], "column_wise")
        self.assertEqual(d["a"]["ranks"], [0, 1])
        self.assertEqual(d["a"]["shards"][1],
                         {"shard_offsets": [0, 32], "shard_sizes": [100, 32],
                          "placement": "rank:1/cuda:1"})
        self.assertIsNone(d["c"]["shards"])
        self.assertEqual(d["c"]["compute_kernel"], "dense")

    def test_cpu_placement(self):
        d = et.to_parameter_sharding_dicts(sample_plan(), device_type="cpu")
        self.assertEqual(d["b"]["shards"][0]["placement"], "rank:1/cpu")

    def test_round_trip_through_a_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "plan.json")
            with open(path, "w") as f:
                json.dump(sample_plan(), f)
            plan = et.load_plan(path)
        self.assertIn("device 1: 1.500 ms", et.predicted_summary(plan))

    def test_bad_plans_are_rejected(self):
        bad = copy.deepcopy(sample_plan())
        bad["format"] = "other"
        self.assertRaises(et.PlanError, et.check_plan, bad)
        bad = copy.deepcopy(sample_plan())
        bad["tables"]["a"]["shards"].pop()
        with self.assertRaisesRegex(et.PlanError, "shards cover 3200 of 6400"):
            et.check_plan(bad)
        bad = copy.deepcopy(sample_plan())
        bad["tables"]["b"]["ranks"] = [2]
        with self.assertRaisesRegex(et.PlanError, "rank 2 outside"):
            et.check_plan(bad)
        bad = copy.deepcopy(sample_plan())
        bad["tables"]["b"]["sharding_type"] = "diagonal"
        self.assertRaises(et.PlanError, et.check_plan, bad)

    def test_a_plan_written_by_the_cli(self):
        # EMBSHARD_PLAN_JSON: a plan the C++ tests wrote, when run from ctest.
        path = os.environ.get("EMBSHARD_PLAN_JSON")
        if not path or not os.path.exists(path):
            self.skipTest("no EMBSHARD_PLAN_JSON")
        d = et.to_parameter_sharding_dicts(et.load_plan(path))
        self.assertTrue(d)


@unittest.skipIf(importlib.util.find_spec("torchrec") is None, "torchrec not installed")
class TorchRecForm(unittest.TestCase):
    def test_parameter_shardings(self):
        shardings = et.to_parameter_shardings(sample_plan())
        self.assertEqual(shardings["a"].sharding_type, "column_wise")
        self.assertEqual(len(shardings["a"].sharding_spec.shards), 2)
        self.assertIsNone(shardings["c"].sharding_spec)


if __name__ == "__main__":
    unittest.main()
