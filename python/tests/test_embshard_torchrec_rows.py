"""Row-wise, table-row-wise, grid and data-parallel plans in the dict form, without
TorchRec: ctest -R python (or PYTHONPATH=build/python python3 -m unittest in
python/tests/)."""

import copy
import unittest

import embshard.torchrec as et
from test_embshard_torchrec import sample_plan


def row_split_plan():
    """Row-wise over both devices, table-row-wise over one of three, a grid and a replica."""
    plan = sample_plan()
    plan["num_devices"] = 3
    plan["device_memory_bytes"] = [10**9] * 3
    plan["table_order"] = ["rw", "twrw", "grid", "dp"]
    plan["tables"] = {
        "rw": {"sharding_type": "row_wise", "compute_kernel": "fused", "ranks": [0, 1, 2],
               "rows": 10, "dim": 16, "memory_bytes": 680,
               "shards": [{"shard_offsets": [0, 0], "shard_sizes": [4, 16], "placement": "rank:0/cuda:0"},
                          {"shard_offsets": [4, 0], "shard_sizes": [4, 16], "placement": "rank:1/cuda:1"},
                          {"shard_offsets": [8, 0], "shard_sizes": [2, 16], "placement": "rank:2/cuda:2"}]},
        "twrw": {"sharding_type": "table_row_wise", "compute_kernel": "fused", "ranks": [2, 0],
                 "rows": 7, "dim": 8, "memory_bytes": 252,
                 "shards": [{"shard_offsets": [0, 0], "shard_sizes": [4, 8], "placement": "rank:2/cuda:2"},
                            {"shard_offsets": [4, 0], "shard_sizes": [3, 8], "placement": "rank:0/cuda:0"}]},
        "grid": {"sharding_type": "grid_shard", "compute_kernel": "fused", "ranks": [0, 1, 2, 0],
                 "rows": 6, "dim": 8, "memory_bytes": 240,
                 "shards": [{"shard_offsets": [0, 0], "shard_sizes": [3, 4], "placement": "rank:0/cuda:0"},
                            {"shard_offsets": [3, 0], "shard_sizes": [3, 4], "placement": "rank:1/cuda:1"},
                            {"shard_offsets": [0, 4], "shard_sizes": [3, 4], "placement": "rank:2/cuda:2"},
                            {"shard_offsets": [3, 4], "shard_sizes": [3, 4], "placement": "rank:0/cuda:0"}]},
        "dp": {"sharding_type": "data_parallel", "compute_kernel": "dense", "ranks": [0, 1, 2],
               "rows": 5, "dim": 8, "memory_bytes": 540, "shards": None},
    }
    return plan


class RowSplitDictForm(unittest.TestCase):
    def test_row_wise_table_row_wise_grid_and_data_parallel(self):
        d = et.to_parameter_sharding_dicts(row_split_plan())
        self.assertEqual(list(d), ["rw", "twrw", "grid", "dp"])
        self.assertEqual(d["rw"]["sharding_type"], "row_wise")
        self.assertEqual([s["shard_offsets"] for s in d["rw"]["shards"]], [[0, 0], [4, 0], [8, 0]])
        self.assertEqual([s["shard_sizes"] for s in d["rw"]["shards"]], [[4, 16], [4, 16], [2, 16]])
        self.assertEqual(d["rw"]["ranks"], [0, 1, 2])
        self.assertEqual(d["twrw"]["sharding_type"], "table_row_wise")
        self.assertEqual(d["twrw"]["shards"][1]["placement"], "rank:0/cuda:0")
        self.assertEqual(d["grid"]["sharding_type"], "grid_shard")
        self.assertEqual(d["grid"]["shards"][3], {"shard_offsets": [3, 4], "shard_sizes": [3, 4],
                                                  "placement": "rank:0/cuda:0"})
        self.assertEqual(d["dp"], {"sharding_type": "data_parallel", "compute_kernel": "dense",
                                   "ranks": [0, 1, 2], "shards": None})

    def test_a_row_split_that_loses_rows_is_rejected(self):
        bad = row_split_plan()
        bad["tables"]["rw"]["shards"][2]["shard_sizes"] = [1, 16]
        with self.assertRaisesRegex(et.PlanError, "'tables.rw.shards': the shards cover 144 of table 'rw''s 160 values"):
            et.check_plan(bad)
        bad = row_split_plan()
        bad["tables"]["rw"]["shards"][2]["shard_offsets"] = [9, 0]
        with self.assertRaisesRegex(et.PlanError, "'tables.rw.shards.2.' is rows 9..11 x cols 0..16, "
                                                  "outside table 'rw' .10 rows x dim 16."):
            et.check_plan(bad)

    def test_overlapping_pieces_are_rejected(self):
        # Rows 3..7 on device 1 meet rows 0..4 on device 0; the areas still add
        # up to the table's (row 7 is in no shard).
        bad = row_split_plan()
        bad["tables"]["rw"]["shards"][1]["shard_offsets"] = [3, 0]
        with self.assertRaisesRegex(et.PlanError, r"field 'tables.rw.shards': shards\[0\] and "
                                                  r"shards\[1\] overlap"):
            et.check_plan(bad)
        # A grid piece moved onto its neighbour's columns.
        bad = row_split_plan()
        bad["tables"]["grid"]["shards"][3]["shard_offsets"] = [3, 2]
        with self.assertRaisesRegex(et.PlanError, r"field 'tables.grid.shards': shards\[1\] and "
                                                  r"shards\[3\] overlap"):
            et.check_plan(bad)

    def test_row_pieces_on_devices_outside_the_plan_are_rejected(self):
        bad = row_split_plan()
        bad["tables"]["twrw"]["shards"][0]["placement"] = "rank:3/cuda:3"
        with self.assertRaisesRegex(et.PlanError, "field 'tables.twrw.shards.0..placement' is "
                                                  "\"rank:3/cuda:3\": rank 3 is outside 0..2 .3 devices."):
            et.check_plan(bad)

    def test_a_replica_on_each_device_once(self):
        bad = row_split_plan()
        bad["tables"]["dp"]["ranks"] = [0, 2, 0]
        with self.assertRaisesRegex(et.PlanError, "field 'tables.dp.ranks' lists device 0 twice"):
            et.check_plan(bad)


if __name__ == "__main__":
    unittest.main()
