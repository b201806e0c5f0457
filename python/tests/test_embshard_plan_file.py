"""Tests of embshard.plan_file's checks (through embshard.torchrec, as users
call them), without TorchRec: ctest -R python (or PYTHONPATH=build/python
python3 -m unittest in python/tests/)."""

import json
import os
import re
import tempfile
import unittest

import embshard.torchrec as et
from test_embshard_torchrec import assign, broken, delete, sample_plan


class PlanChecks(unittest.TestCase):
    """check_plan rejects what embshard's plan reader (src/plan/plan_file.cpp)
    rejects, naming the file, the field and the value."""

    def assertRejected(self, plan, message):
        with self.assertRaisesRegex(et.PlanError, re.escape(message)):
            et.check_plan(plan, "p.json")

    def test_load_plan_names_the_file_of_bad_json(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "plan.json")
            with open(path, "w") as f:
                f.write('{"format": "embshard-plan",')
            with self.assertRaisesRegex(et.PlanError, re.escape(f"{path}: not a plan file: not valid JSON (")):
                et.load_plan(path)
            with open(path, "w") as f:
                json.dump(broken(delete(["num_devices"])), f)
            with self.assertRaisesRegex(et.PlanError, re.escape(f"{path}: missing field 'num_devices'")):
                et.load_plan(path)
            with open(path, "wb") as f:
                f.write(b"\x1f\x8b\x08\x00\xff\xfe")  # gzip, not text
            with self.assertRaisesRegex(et.PlanError, re.escape(f"{path}: not a plan file: not UTF-8")):
                et.load_plan(path)

    def test_missing_fields_are_named(self):
        for path in (["format"], ["version"], ["num_devices"], ["tables"],
                     ["tables", "b", "sharding_type"], ["tables", "b", "compute_kernel"],
                     ["tables", "b", "rows"], ["tables", "b", "dim"], ["tables", "b", "ranks"],
                     ["tables", "b", "shards"], ["tables", "c", "shards"],
                     ["tables", "a", "shards", 1, "shard_offsets"],
                     ["tables", "a", "shards", 1, "shard_sizes"],
                     ["tables", "a", "shards", 1, "placement"]):
            field = ".".join(str(k) for k in path).replace(".1.", "[1].")
            with self.subTest(field):
                self.assertRejected(broken(delete(path)), f"p.json: missing field '{field}'")

    def test_format_and_version(self):
        self.assertRejected(broken(assign(["format"], "other")),
                            "p.json: field 'format' is \"other\", expected \"embshard-plan\"")
        self.assertRejected(broken(assign(["version"], 3)),
                            "p.json: field 'version' is 3, this reader reads versions 1 and 2")
        self.assertRejected(broken(assign(["version"], True)),  # == 1 in Python, not in JSON
                            "p.json: field 'version' is true, this reader reads versions 1 and 2")

    def test_num_devices_is_a_positive_integer(self):
        for value, shown in ((0, "0, expected 1..2147483647"), (-2, "-2, expected 1..2147483647"),
                             ("2", "\"2\", expected an integer"), (2.0, "2.0, expected an integer"),
                             (True, "true, expected an integer"), (None, "null, expected an integer")):
            with self.subTest(value=value):
                self.assertRejected(broken(assign(["num_devices"], value)),
                                    f"p.json: field 'num_devices' is {shown}")

    def test_the_plan_and_its_tables_are_objects(self):
        self.assertRejected([sample_plan()], "p.json: the top level is an array of 1 values, "
                                             "expected a plan object")
        self.assertRejected(broken(assign(["tables"], {})), "p.json: field 'tables' is an object "
                            "of 0 fields, expected an object with a field per table")
        self.assertRejected(broken(assign(["tables"], [1])), "p.json: field 'tables' is an array")
        self.assertRejected(broken(assign(["tables", "b"], [1])),
                            "p.json: field 'tables.b' is an array of 1 values, expected an object")
        self.assertRejected(broken(assign(["tables", "a", "shards", 0], "x")),
                            "p.json: field 'tables.a.shards[0]' is \"x\", expected an object")

    def test_table_order_lists_each_table_once(self):
        self.assertRejected(broken(assign(["table_order"], ["b", "a", "x"])),
                            "p.json: field 'table_order[2]' is \"x\", which is not in 'tables'")
        self.assertRejected(broken(assign(["table_order"], ["b", "a", "b"])),
                            "p.json: field 'table_order[2]' is \"b\", listed twice")
        # A table left out of table_order would be left out of TorchRec's plan.
        self.assertRejected(broken(assign(["table_order"], ["b", "a"])),
                            "p.json: field 'table_order' lists 2 of the 3 tables")
        self.assertRejected(broken(assign(["table_order"], "b a c")),
                            "p.json: field 'table_order' is \"b a c\", expected an array")

        def empty_name(plan):
            plan["tables"][""] = plan["tables"].pop("b")
            plan["table_order"][0] = ""
        self.assertRejected(broken(empty_name), "p.json: field 'tables' has a table with an empty name")

    def test_table_fields(self):
        self.assertRejected(broken(assign(["tables", "b", "sharding_type"], ["table_wise"])),
                            "p.json: field 'tables.b.sharding_type' is an array of 1 values, "
                            "expected one of column_wise, data_parallel")
        self.assertRejected(broken(assign(["tables", "b", "compute_kernel"], 5)),
                            "p.json: field 'tables.b.compute_kernel' is 5, expected a string")
        self.assertRejected(broken(assign(["tables", "b", "compute_kernel"], "gpu")),
                            "p.json: field 'tables.b.compute_kernel' is \"gpu\", expected one "
                            "of fused, fused_uvm, fused_uvm_caching, key_value for a table_wise "
                            "table")
        self.assertRejected(broken(assign(["tables", "c", "compute_kernel"], "fused")),
                            "p.json: field 'tables.c.compute_kernel' is \"fused\", expected "
                            "\"dense\" for a data_parallel table")
        self.assertRejected(broken(assign(["tables", "b", "rows"], "10")),
                            "p.json: field 'tables.b.rows' is \"10\", expected an integer")
        self.assertRejected(broken(assign(["tables", "b", "dim"], 0)),
                            "p.json: field 'tables.b.dim' is 0, expected 1..65536")

    def test_ranks_are_devices_of_the_plan(self):
        self.assertRejected(broken(assign(["tables", "b", "ranks"], 1)),
                            "p.json: field 'tables.b.ranks' is 1, expected an array")
        self.assertRejected(broken(assign(["tables", "b", "ranks"], ["1"])),
                            "p.json: field 'tables.b.ranks[0]' is \"1\", expected an integer")
        self.assertRejected(broken(assign(["tables", "c", "ranks"], [0, -1])),
                            "p.json: field 'tables.c.ranks[1]' is -1, expected 0..1")

    def test_ranks_match_the_placements(self):
        # The placement says rank 1, the ranks say 0: TorchRec would get both.
        self.assertRejected(broken(assign(["tables", "b", "ranks"], [0])),
                            "p.json: field 'tables.b.ranks[0]' is 0 but "
                            "tables.b.shards[0].placement says rank 1")
        self.assertRejected(broken(assign(["tables", "a", "ranks"], [1, 0])),
                            "p.json: field 'tables.a.ranks[0]' is 1 but "
                            "tables.a.shards[0].placement says rank 0")
        self.assertRejected(broken(assign(["tables", "b", "ranks"], [1, 1])),
                            "p.json: field 'tables.b.ranks' has 2 ranks for 1 shards, "
                            "expected one rank per shard")

    def test_placements(self):
        field = "p.json: field 'tables.b.shards[0].placement' is"
        self.assertRejected(broken(assign(["tables", "b", "shards", 0, "placement"], "rank:2/cuda:2")),
                            f"{field} \"rank:2/cuda:2\": rank 2 is outside 0..1 (2 devices)")
        for bad in ("cuda:1", "rank:1", "rank:1/", "rank:-1/cuda:1", "rank:1/cuda:x",
                    "rank:1/gpu:1", "rank:1/cuda:1\n", " rank:1/cuda:1", 1, None):
            with self.subTest(placement=bad):
                self.assertRejected(broken(assign(["tables", "b", "shards", 0, "placement"], bad)),
                                    f"{field} {json.dumps(bad)}, expected \"rank:N/cuda:N\"")
        # What the C++ reader takes: another local GPU, or a CPU.
        for good in ("rank:1/cuda:0", "rank:1/cpu", "rank:01/cuda:1"):
            et.check_plan(broken(assign(["tables", "b", "shards", 0, "placement"], good)))

    def test_shard_offsets_and_sizes_are_pairs_of_integers(self):
        shard = ["tables", "a", "shards", 1]
        self.assertRejected(broken(assign(shard + ["shard_offsets"], [0])),
                            "p.json: field 'tables.a.shards[1].shard_offsets' is an array of 1 "
                            "values, expected [rows, cols]")
        self.assertRejected(broken(assign(shard + ["shard_sizes"], 100)),
                            "p.json: field 'tables.a.shards[1].shard_sizes' is 100, "
                            "expected [rows, cols]")
        # Columns -32..0: inside the table by the sums, and the areas still add up.
        self.assertRejected(broken(assign(shard + ["shard_offsets"], [0, -32])),
                            "p.json: field 'tables.a.shards[1].shard_offsets[1]' is -32, "
                            "expected 0..2147483647")
        self.assertRejected(broken(assign(shard + ["shard_sizes"], [100.0, 32])),
                            "p.json: field 'tables.a.shards[1].shard_sizes[0]' is 100.0, "
                            "expected an integer")

        def empty_piece(plan):
            plan["tables"]["b"]["shards"].append({"shard_offsets": [0, 0], "shard_sizes": [10, 0],
                                                  "placement": "rank:1/cuda:1"})
            plan["tables"]["b"]["ranks"].append(1)
        self.assertRejected(broken(empty_piece),
                            "p.json: field 'tables.b.shards[1].shard_sizes[1]' is 0, "
                            "expected 1..2147483647")

    def test_shards_inside_the_table(self):
        self.assertRejected(broken(assign(["tables", "a", "shards", 1, "shard_offsets"], [0, 48])),
                            "p.json: field 'tables.a.shards[1]' is rows 0..100 x cols 48..80, "
                            "outside table 'a' (100 rows x dim 64)")

    def test_overlapping_shards(self):
        # Both pieces at [0, 0]: the areas add up, but columns 32..63 are in no shard.
        self.assertRejected(broken(assign(["tables", "a", "shards", 1, "shard_offsets"], [0, 0])),
                            "p.json: field 'tables.a.shards': shards[0] and shards[1] overlap")

    def test_row_wise_blocks_on_their_own_ranks(self):
        plan = sample_plan()
        plan["tables"]["a"].update(sharding_type="row_wise", ranks=[0, 1], shards=[
            {"shard_offsets": [0, 0], "shard_sizes": [50, 64], "placement": "rank:0/cuda:0"},
            {"shard_offsets": [50, 0], "shard_sizes": [50, 64], "placement": "rank:1/cuda:1"}])
        et.check_plan(plan, "p.json")
        swapped = json.loads(json.dumps(plan))
        swapped["tables"]["a"]["ranks"] = [1, 0]
        swapped["tables"]["a"]["shards"][0]["placement"] = "rank:1/cuda:1"
        swapped["tables"]["a"]["shards"][1]["placement"] = "rank:0/cuda:0"
        self.assertRejected(swapped, "p.json: field 'tables.a.shards[0]' holds rows 0..50 on "
                                     "rank 1: in a row_wise table TorchRec serves row block b "
                                     "(rows b x 50 onwards) from rank b")

    def test_shards_shaped_as_their_type(self):
        # TorchRec builds a table's shards from its type.
        self.assertRejected(broken(assign(["tables", "a", "sharding_type"], "row_wise")),
                            "p.json: field 'tables.a.shards[0]' holds columns 0..32 of 64: a "
                            "row_wise shard holds every column (a range of rows)")
        self.assertRejected(broken(assign(["tables", "a", "sharding_type"], "table_wise")),
                            "p.json: field 'tables.a.shards' has 2 shards: a table_wise table "
                            "is one shard")
        plan = sample_plan()
        plan["tables"]["a"].update(shards=[
            {"shard_offsets": [0, 0], "shard_sizes": [50, 64], "placement": "rank:0/cuda:0"},
            {"shard_offsets": [50, 0], "shard_sizes": [50, 64], "placement": "rank:1/cuda:1"}])
        self.assertRejected(plan, "p.json: field 'tables.a.shards[0]' holds rows 0..50 of 100: "
                                  "a column_wise shard holds every row (a range of columns)")

    def test_memory_model(self):
        # With the memory model: each table's bytes, and each rank's against its capacity.
        plan = sample_plan()
        plan["memory_model"] = {"bytes_per_weight": 4, "optimizer_bytes_per_row": 4}
        plan["tables"]["a"]["memory_bytes"] = 26400  # two halves, each with its row state
        et.check_plan(plan, "p.json")
        wrong = json.loads(json.dumps(plan))
        wrong["tables"]["a"]["memory_bytes"] = 26000
        self.assertRejected(wrong, "p.json: field 'tables.a.memory_bytes' is 26000, but its "
                                   "shards hold 26400 bytes under 'memory_model'")
        full = json.loads(json.dumps(plan))
        full["device_memory_bytes"] = [13000, 10**9]
        self.assertRejected(full, "p.json: rank 0 holds 13380 bytes of shards (a, c), past its "
                                  "capacity device_memory_bytes[0] = 13000")
        bad = json.loads(json.dumps(plan))
        bad["memory_model"]["optimizer_bytes_per_row"] = -1
        self.assertRejected(bad, "p.json: field 'memory_model.optimizer_bytes_per_row' is -1, "
                                 "expected 0..1024")

    def test_a_sharded_table_has_shards(self):
        self.assertRejected(broken(assign(["tables", "b", "shards"], None)),
                            "p.json: field 'tables.b.shards' is null, expected an array")
        self.assertRejected(broken(assign(["tables", "b", "shards"], [])),
                            "p.json: field 'tables.b.shards' is empty: the table has no shard")

    def test_data_parallel_tables(self):
        whole = [{"shard_offsets": [0, 0], "shard_sizes": [5, 8], "placement": "rank:0/cuda:0"}]
        self.assertRejected(broken(assign(["tables", "c", "shards"], whole)),
                            "p.json: field 'tables.c.shards' is an array of 1 values, expected "
                            "null for a data_parallel table")
        self.assertRejected(broken(assign(["tables", "c", "ranks"], [])),
                            "p.json: field 'tables.c.ranks' is empty: a data_parallel table "
                            "needs a device")
        self.assertRejected(broken(assign(["tables", "c", "ranks"], [1, 1])),
                            "p.json: field 'tables.c.ranks' lists device 1 twice")
        self.assertRejected(broken(assign(["tables", "c", "ranks"], [1])),
                            "p.json: field 'tables.c.ranks' lists 1 of the 2 devices: a "
                            "data_parallel table is on every device")


if __name__ == "__main__":
    unittest.main()
