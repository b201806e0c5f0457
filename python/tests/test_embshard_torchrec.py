"""Tests of embshard.torchrec's plan dict form without TorchRec: ctest -R python
(or PYTHONPATH=build/python python3 -m unittest in python/tests/). The way in
(table specs) is in test_embshard_table_specs.py.

TorchRec cannot be installed here: its EmbeddingBagConfig, KeyedJaggedTensor and
JaggedTensor are replaced by stand-ins of the same shape (test_embshard_table_specs.py),
and its ParameterSharding form is tested only where torchrec imports. Tests that need
torch tensors (Debian's python3-torch) or the built CLI skip, saying so, when
those are absent.
"""

import copy
import importlib.util
import json
import os
import sys
import tempfile
import unittest

import embshard.torchrec as et

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# The folder holding the embshard package imported here (the build tree's
# python/, or the source's), for the subprocesses that import it again.
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(et.__file__)))
HAVE_TORCH = importlib.util.find_spec("torch") is not None
NO_TORCH = f"torch not importable by {sys.executable} (Debian: apt-get install python3-torch, " \
           "then run /usr/bin/python3)"


def find_cli():
    """The built embshard CLI: $EMBSHARD_CLI, else <repo>/build/embshard."""
    path = os.environ.get("EMBSHARD_CLI") or os.path.join(REPO, "build", "embshard")
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


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

    def test_ranks_on_several_hosts_name_their_hosts_gpu(self):
        d = et.to_parameter_sharding_dicts(sample_plan(), local_world_size=1)
        self.assertEqual(d["a"]["shards"][1]["placement"], "rank:1/cuda:0")
        self.assertEqual(d["a"]["ranks"], [0, 1])  # global ranks stay global
        one_host = et.to_parameter_sharding_dicts(sample_plan(), local_world_size=2)
        self.assertEqual(one_host["a"]["shards"][1]["placement"], "rank:1/cuda:1")
        for bad in (0, -8, 2.0, True, "8"):
            with self.assertRaisesRegex(ValueError, "local_world_size"):
                et.to_parameter_sharding_dicts(sample_plan(), local_world_size=bad)

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
        bad["tables"]["a"]["ranks"].pop()
        with self.assertRaisesRegex(et.PlanError, "shards cover 3200 of table 'a''s 6400 values"):
            et.check_plan(bad)
        bad = copy.deepcopy(sample_plan())
        bad["tables"]["b"]["ranks"] = [2]
        with self.assertRaisesRegex(et.PlanError, r"field 'tables.b.ranks\[0\]' is 2, expected 0..1"):
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


def broken(edit, plan=None):
    """A copy of `plan` (default sample_plan()) with edit(copy) applied."""
    bad = copy.deepcopy(plan if plan is not None else sample_plan())
    edit(bad)
    return bad


def assign(path, value):
    """An edit setting the field at `path` (keys and indices) to `value`."""
    def edit(plan):
        obj = plan
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = value
    return edit


def delete(path):
    def edit(plan):
        obj = plan
        for key in path[:-1]:
            obj = obj[key]
        del obj[path[-1]]
    return edit


@unittest.skipIf(importlib.util.find_spec("torchrec") is None, "torchrec not installed")
class TorchRecForm(unittest.TestCase):
    def test_parameter_shardings(self):
        shardings = et.to_parameter_shardings(sample_plan())
        self.assertEqual(shardings["a"].sharding_type, "column_wise")
        self.assertEqual(len(shardings["a"].sharding_spec.shards), 2)
        self.assertIsNone(shardings["c"].sharding_spec)


if __name__ == "__main__":
    unittest.main()
