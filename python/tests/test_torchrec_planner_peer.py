"""`embshard plan --algo torchrec_planner`: TorchRec's own planner run on an
embshard task. Needs the Python that imports torchrec (this test runs under
it) and the CLI (EMBSHARD_CLI). The plan embshard reports must be the plan
TorchRec makes of the same task in this process, shard for shard."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from embshard import torchrec_peer

CLI = os.environ.get("EMBSHARD_CLI")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLES = os.path.join(ROOT, "examples", "six_tables.json")


def run_cli(*args, env=None):
    return subprocess.run([CLI, *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300)


@unittest.skipUnless(CLI, "EMBSHARD_CLI is not set")
class TorchrecPlannerPeer(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def plan(self, *extra, env=None):
        out = os.path.join(self.dir.name, "plan.json")
        r = run_cli("plan", "--tables", TABLES, "--devices", "4", "--mem-per-device", "32GB",
                    "--algo", "torchrec_planner", "-o", out, *extra,
                    env={"EMBSHARD_TORCHREC_PYTHON": sys.executable, **(env or {})})
        return r, out

    def test_the_plan_is_torchrecs_own(self):
        r, out = self.plan()
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            ours = json.load(f)
        self.assertEqual(ours["algorithm"], "torchrec_planner")
        with open(TABLES) as f:
            specs = json.load(f)
        specs = specs["tables"] if isinstance(specs, dict) else specs
        task = {"format": torchrec_peer.FORMAT, "version": 2, "batch_size": ours["batch_size"],
                "device_memory_bytes": [32 * 10**9] * 4, "optimizer_bytes_per_row": 4,
                "optimizer_bytes_per_weight": 0,
                "sharding_types": ["table_wise", "column_wise", "row_wise", "table_row_wise",
                                   "data_parallel", "grid_shard"],
                "no_split": [],
                "tables": [{"name": t["name"], "rows": t["rows"], "dim": t["dim"],
                            "pooling_factor": t["pooling_factor"], "data_type": "fp32"}
                           for t in specs]}
        theirs = torchrec_peer.plan_task(task)
        self.assertEqual(set(theirs), set(ours["tables"]))
        for name, t in theirs.items():
            mine = ours["tables"][name]
            self.assertEqual(mine["sharding_type"], t["sharding_type"], name)
            if t["shards"] is None:
                self.assertIsNone(mine["shards"], name)
                continue
            got = sorted((s["shard_offsets"][0], s["shard_offsets"][1], s["shard_sizes"][0],
                          s["shard_sizes"][1], int(s["placement"].split("/")[0][5:]))
                         for s in mine["shards"])
            want = sorted((s["row_offset"], s["col_offset"], s["rows"], s["cols"], s["device"])
                          for s in t["shards"])
            self.assertEqual(got, want, name)

    def test_data_types_reach_torchrecs_storage_estimate(self):
        # 1M rows x 64: 260 MB in fp32 with its row-wise state, 132 MB in fp16;
        # one device of 200 MB holds the table whole only in fp16.
        table = {"name": "t", "rows": 1_000_000, "dim": 64, "pooling_factor": 2.0,
                 "data_type": "fp16"}
        task = {"format": torchrec_peer.FORMAT, "version": 2, "batch_size": 8,
                "device_memory_bytes": [200 * 10**6], "optimizer_bytes_per_row": 4,
                "optimizer_bytes_per_weight": 0, "sharding_types": ["table_wise"],
                "no_split": [], "tables": [table]}
        self.assertEqual(torchrec_peer.plan_task(task)["t"]["sharding_type"], "table_wise")
        table["data_type"] = "fp32"
        with self.assertRaises(Exception):
            torchrec_peer.plan_task(task)
        # Adam's state: 128 MB of fp16 weights and 512 MB of moments no longer fit.
        table["data_type"] = "fp16"
        task.update(optimizer_bytes_per_row=0, optimizer_bytes_per_weight=8)
        with self.assertRaises(Exception):
            torchrec_peer.plan_task(task)
        task["device_memory_bytes"] = [800 * 10**6]
        self.assertEqual(torchrec_peer.plan_task(task)["t"]["sharding_type"], "table_wise")

    def test_no_torchrec_python_is_a_clear_error(self):
        r, out = self.plan(env={"EMBSHARD_TORCHREC_PYTHON": "/nonexistent/python"})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("EMBSHARD_TORCHREC_PYTHON", r.stderr)
        self.assertIn("install_torchrec.sh", r.stderr)
        self.assertFalse(os.path.exists(out))

    def test_pins_are_refused(self):
        r, out = self.plan("--pin", "geo=1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("pinned", r.stderr)
        self.assertFalse(os.path.exists(out))


class TaskFile(unittest.TestCase):
    """The peer's reader names the file and field at fault."""

    def read(self, obj):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(obj if isinstance(obj, str) else json.dumps(obj))
        self.addCleanup(os.unlink, f.name)
        return torchrec_peer.read_task(f.name)

    def good(self):
        return {"format": torchrec_peer.FORMAT, "version": 2, "batch_size": 8,
                "device_memory_bytes": [10**9], "optimizer_bytes_per_row": 4,
                "optimizer_bytes_per_weight": 0, "sharding_types": ["table_wise"],
                "no_split": [], "tables": [{"name": "a", "rows": 10, "dim": 4,
                                            "pooling_factor": 1.5, "data_type": "fp32"}]}

    def test_good(self):
        self.assertEqual(self.read(self.good())["tables"][0]["name"], "a")

    def test_bad(self):
        cases = [("{", "not JSON"), ({**self.good(), "version": 1}, "version 2"),
                 ({**self.good(), "batch_size": "8"}, "batch_size"),
                 ({**self.good(), "tables": [{"name": "a", "rows": 0, "dim": 4,
                                              "pooling_factor": 1}]}, "tables[0].rows"),
                 ({**self.good(), "tables": [{"name": "a", "dim": 4, "pooling_factor": 1}]},
                  "no field 'rows'"),
                 ({**self.good(), "tables": [{"name": "a", "rows": 10, "dim": 4,
                                              "pooling_factor": 1, "data_type": "int2"}]},
                  "tables[0].data_type: 'int2' is not one of")]
        for obj, message in cases:
            with self.assertRaisesRegex(torchrec_peer.TaskError, message.replace("[", r"\[")):
                self.read(obj)


if __name__ == "__main__":
    unittest.main()
