"""Tests of the Python package's planning API (embshard.plan, Plan) over the
compiled extension: ctest -R python_embshard (or PYTHONPATH=build/python
python3 -m unittest test_embshard_api, in python/tests/). TorchRec's classes
are stood in for as in test_embshard_table_specs.py."""

import copy
import json
import logging
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import warnings

import embshard
import embshard.torchrec as et
from test_embshard_table_specs import make_kjt, model_batches, model_configs
from test_embshard_torchrec import REPO, find_cli

# docs/plan.md's six-table example (examples/six_tables.json).
SIX_TABLES_FILE = os.path.join(REPO, "examples", "six_tables.json")
SIX_TABLES = {"batch_size": 65536, "profile": "2021", "tables": [
    {"name": "user_id", "rows": 100000000, "dim": 128, "pooling_factor": 1},
    {"name": "item_id", "rows": 50000000, "dim": 128, "pooling_factor": 1},
    {"name": "history", "rows": 20000000, "dim": 64, "pooling_factor": 80},
    {"name": "query", "rows": 30000000, "dim": 64, "pooling_factor": 20},
    {"name": "geo", "rows": 20000000, "dim": 32, "pooling_factor": 2},
    {"name": "device", "rows": 20000000, "dim": 16, "pooling_factor": 1}]}
NAMES = [t["name"] for t in SIX_TABLES["tables"]]


def plan_six(**kwargs):
    args = dict(devices=16, mem_per_device="40GB", batch_size=65536)
    args.update(kwargs)
    return embshard.plan(SIX_TABLES["tables"], **args)


class SixTables(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plan = plan_six()

    def test_the_example_file_is_this_copy(self):
        if not os.path.exists(SIX_TABLES_FILE):
            self.skipTest(f"no {SIX_TABLES_FILE}")
        with open(SIX_TABLES_FILE) as f:
            self.assertEqual(json.load(f), SIX_TABLES)

    def test_plan_covers_every_table_within_memory(self):
        p = self.plan
        self.assertEqual(list(p.tables), NAMES)
        self.assertEqual((p.num_devices, len(p.devices), p.batch_size), (16, 16, 65536))
        for name, t in p.tables.items():
            area = sum(s.rows * s.cols for s in t.shards if not s.replica)
            if t.sharding_type != "data_parallel":
                self.assertEqual(area, t.rows * t.dim, name)
            self.assertEqual([s.device for s in t.shards], list(t.ranks))
        self.assertEqual(len(p.shards), sum(len(t.shards) for t in p.tables.values()))
        for d in p.devices:
            self.assertEqual(d.capacity_bytes, 34 * 10**9)  # 40 GB less 15% reserved
            self.assertLessEqual(d.memory_bytes, d.capacity_bytes)
        # user_id (51.6 GB) fits no 40 GB device whole.
        self.assertGreater(len(p.tables["user_id"].shards), 1)

    def test_reserve_and_optimizer_set_what_memory_counts(self):
        p = plan_six(cost_model="analytic", reserve="2GB", optimizer="adam", explain=False)
        self.assertEqual(p.devices[0].capacity_bytes, 38 * 10**9)
        self.assertIn("2.00 GB reserved", p.report())
        self.assertIn("optimizer state of Adam", p.report())
        self.assertEqual(plan_six(cost_model="analytic", reserve=0,
                                  explain=False).devices[0].capacity_bytes, 40 * 10**9)
        for bad, message in ((dict(reserve="100%"), "reserve is '100%'"),
                             (dict(optimizer="lamb"), "optimizer is 'lamb'"),
                             (dict(optimizer=3), "optimizer is 3")):
            with self.assertRaisesRegex(embshard.EmbshardError, message):
                plan_six(cost_model="analytic", **bad)

    def test_hosts_are_priced_and_carried(self):
        p = plan_six(cost_model="analytic", explain=False, devices_per_host=8,
                     inter_host_gbps=12.5)
        self.assertEqual(p.json["topology"]["devices_per_host"], 8)
        self.assertIn("hosts: 2 hosts of 8 devices, 12.5 GB/s between hosts", p.report())
        self.assertNotIn("topology", plan_six(cost_model="analytic", explain=False).json)
        # TorchRec's placements name each host's own GPUs.
        handed = p.to_torchrec("m", as_dicts=True)["m"]
        for table in handed.values():
            for shard in table["shards"] or []:
                rank = int(shard["placement"].split("/")[0].split(":")[1])
                self.assertEqual(shard["placement"], f"rank:{rank}/cuda:{rank % 8}")
        bad = copy.deepcopy(p.json)
        bad["topology"]["devices_per_host"] = 16
        with self.assertRaisesRegex(embshard.EmbshardError, "topology.devices_per_host"):
            embshard.Plan(bad)
        for bad, message in ((dict(devices_per_host=8), "give inter_host_gbps"),
                             (dict(devices_per_host=0, inter_host_gbps=1), "devices_per_host is 0"),
                             (dict(devices_per_host=8, inter_host_gbps="fast"),
                              "inter_host_gbps is 'fast'"),
                             (dict(devices_per_host=8, inter_host_gbps=1,
                                   inter_host_latency_us=-1), "inter_host_latency_us is -1")):
            with self.assertRaisesRegex(embshard.EmbshardError, message):
                plan_six(cost_model="analytic", explain=False, **bad)

    def test_inference_plans_quantized_tables_with_weights_only(self):
        tables = copy.deepcopy(SIX_TABLES["tables"])
        tables[0]["data_type"], tables[1]["data_type"] = "int8", "INT4"
        p = embshard.plan(tables, devices=16, mem_per_device="40GB", batch_size=65536,
                          cost_model="analytic", task="inference", explain=False)
        self.assertEqual(p.json["task"], "inference")
        self.assertIn("inference: weights only", p.report())
        self.assertEqual(p.tables["user_id"].memory_bytes, 100000000 * (128 + 8))
        self.assertEqual(plan_six(cost_model="analytic", explain=False).json["task"],
                         "training")
        for bad, message in ((dict(task="inference", optimizer="adam"), "optimizer adam"),
                             (dict(task="serving"), "task is 'serving'"),
                             (dict(task=1), "task is 1")):
            with self.assertRaisesRegex(embshard.EmbshardError, message):
                plan_six(cost_model="analytic", **bad)
        with self.assertRaisesRegex(embshard.EmbshardError, "--task inference"):
            embshard.plan(tables, devices=16, mem_per_device="40GB", batch_size=65536,
                          cost_model="analytic")

    def test_replan_from_a_plan_object_or_file(self):
        grown = copy.deepcopy(SIX_TABLES["tables"])
        grown[2]["rows"] *= 2  # history
        for source in ("object", "file"):
            with self.subTest(source), tempfile.TemporaryDirectory() as folder:
                old = self.plan
                if source == "file":
                    old = os.path.join(folder, "old.json")
                    self.plan.save(old)
                p = embshard.plan(grown, devices=16, mem_per_device="40GB", batch_size=65536,
                                  from_plan=old, max_moves=2, explain=False)
                self.assertIn("re-planned from ", p.report())
                self.assertIn("moved (at most 2)", p.report())
        with self.assertRaisesRegex(embshard.EmbshardError, "max_moves needs from_plan"):
            plan_six(max_moves=1)
        with self.assertRaisesRegex(embshard.EmbshardError, "from_plan is a int"):
            plan_six(from_plan=3)
        with self.assertRaisesRegex(embshard.EmbshardError, "max_moves is -1"):
            plan_six(from_plan=self.plan, max_moves=-1)

    def test_costs_and_texts(self):
        p = self.plan
        self.assertGreater(p.lower_bound_ms, 0)
        self.assertGreaterEqual(p.predicted_cost_ms, p.lower_bound_ms * (1 - 1e-9))
        self.assertAlmostEqual(p.predicted_cost_ms, max(d.total_ms for d in p.devices), places=6)
        self.assertTrue(p.cost_model.startswith("neural"), p.cost_model)  # the shipped models found
        self.assertIn("lower bound", p.report())
        self.assertEqual(str(p), p.report())
        self.assertGreater(len(p.report(per_table=True)), len(p.report()))
        self.assertNotIn("why:", p.report())
        for name in NAMES:
            self.assertIn(name, p.explain())
        self.assertIn("neuroshard", repr(p))

    def test_json_round_trip(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "plan.json")
            self.plan.save(path)
            again = embshard.Plan.load(path)
        self.assertEqual(again.json, self.plan.json)
        self.assertEqual(json.loads(self.plan.to_json()), self.plan.json)
        self.assertEqual(again.shards, self.plan.shards)
        self.assertIn("lower bound", again.report())
        with self.assertRaisesRegex(embshard.EmbshardError, "no explanation"):
            again.explain()

    def test_the_same_plan_as_the_cli(self):
        cli = find_cli()
        if cli is None:
            self.skipTest("no built CLI (set EMBSHARD_CLI or build <repo>/build/embshard)")
        with tempfile.TemporaryDirectory() as tmp:
            tables, out = os.path.join(tmp, "six.json"), os.path.join(tmp, "plan.json")
            with open(tables, "w") as f:
                json.dump(SIX_TABLES, f)
            subprocess.run([cli, "plan", "--tables", tables, "--devices", "16", "--mem-per-device",
                            "40GB", "-o", out], check=True, capture_output=True)
            with open(out) as f:
                theirs = json.load(f)
        self.assertEqual(theirs["tables"], self.plan.json["tables"])
        self.assertEqual(theirs["predicted"]["cost_ms"], self.plan.predicted_cost_ms)

    def test_to_torchrec_dicts(self):
        d = self.plan.to_torchrec(as_dicts=True)
        self.assertEqual(list(d), ["sparse_arch.embedding_bag_collection"])
        tables = d["sparse_arch.embedding_bag_collection"]
        self.assertEqual(list(tables), NAMES)
        for name, s in tables.items():
            self.assertEqual(set(s), {"sharding_type", "compute_kernel", "ranks", "shards"})
            self.assertEqual(s["sharding_type"], self.plan.tables[name].sharding_type)
            if s["shards"] is not None:
                for shard, rank in zip(s["shards"], s["ranks"]):
                    self.assertEqual(set(shard), {"shard_offsets", "shard_sizes", "placement"})
                    self.assertEqual(shard["placement"], f"rank:{rank}/cuda:{rank}")
        cpu = self.plan.to_torchrec(device_type="cpu", as_dicts=True)
        self.assertTrue(all(sh["placement"].endswith("/cpu")
                            for s in cpu["sparse_arch.embedding_bag_collection"].values()
                            for sh in s["shards"] or []))
        split = self.plan.to_torchrec({n: ("a" if n in NAMES[:2] else "b") for n in NAMES},
                                      as_dicts=True)
        self.assertEqual((list(split["a"]), list(split["b"])), (NAMES[:2], NAMES[2:]))
        with self.assertRaisesRegex(embshard.EmbshardError, "names no module"):
            self.plan.to_torchrec({"user_id": "a"}, as_dicts=True)

    def test_to_torchrec_without_torchrec_gives_the_dicts(self):
        try:
            import torchrec  # noqa: F401
            self.skipTest("torchrec imports here")
        except ImportError:
            pass
        self.assertEqual(self.plan.to_torchrec(), self.plan.to_torchrec(as_dicts=True))


class Inputs(unittest.TestCase):
    def test_spec_dict_path_and_list_agree(self):
        ref = plan_six(cost_model="analytic", explain=False)
        whole = embshard.plan(SIX_TABLES, devices=16, mem_per_device=40 * 10**9,
                              cost_model="analytic", explain=False)
        self.assertEqual(whole.json["tables"], ref.json["tables"])
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "six.json")
            with open(path, "w") as f:
                json.dump(SIX_TABLES, f)
            from_file = embshard.plan(path, devices=16, mem_per_device="40GB",
                                      cost_model="analytic", explain=False)
        self.assertEqual(from_file.json["tables"], ref.json["tables"])

    def test_configs_with_kjt_samples(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", et.SampleWarning)
            p = embshard.plan(model_configs(), samples=model_batches(), devices=4,
                              mem_per_device=None, cost_model="analytic")
        self.assertEqual(p.batch_size, 64)  # the samples' batch
        self.assertEqual(list(p.tables), [c.name for c in model_configs()])
        self.assertEqual(p.tables["query"].rows, 2000)
        self.assertEqual(len(p.devices), 4)

    def test_configs_without_samples_need_a_batch(self):
        with self.assertRaisesRegex(embshard.EmbshardError, "batch_size"):
            embshard.plan(model_configs(), devices=4)
        p = embshard.plan(model_configs(), devices=4, batch_size=2048, mem_per_device=None,
                          cost_model="analytic", explain=False)
        self.assertEqual(p.batch_size, 2048)

    def test_numpy_numbers(self):
        try:
            import numpy
        except ImportError:
            self.skipTest("numpy not importable")
        tables = [dict(t, rows=numpy.int64(t["rows"])) for t in SIX_TABLES["tables"]]
        p = embshard.plan(tables, devices=16, mem_per_device=40e9, batch_size=65536,
                          cost_model="analytic", explain=False)
        self.assertEqual(p.tables["user_id"].rows, 100000000)

    def test_per_device_memory_and_constraints(self):
        p = plan_six(cost_model="analytic", mem_per_device=["60GB"] * 8 + [40 * 10**9] * 8,
                     pins={"geo": 3}, no_split=["history"],
                     sharding_types=["table_wise", "column_wise", "row_wise"], explain=False)
        # Each device's capacity for the tables: 85% of it (15% reserved, the default).
        self.assertEqual([d.capacity_bytes for d in p.devices][:9], [51 * 10**9] * 8 + [34 * 10**9])
        self.assertEqual(p.tables["geo"].ranks, (3,))
        self.assertEqual(p.tables["history"].sharding_type, "table_wise")
        self.assertTrue({t.sharding_type for t in p.tables.values()} <=
                        {"table_wise", "column_wise", "row_wise"})

    def test_one_name_or_width_and_pin_pairs(self):
        # A string is one table's name (not its letters), an int one width,
        # and pins a dict or a list of (table, device) pairs.
        args = dict(cost_model="analytic", explain=False)
        one = plan_six(no_split="history", split_dims=32, pins=[("geo", 3)], **args)
        listed = plan_six(no_split=["history"], split_dims=[32], pins={"geo": 3}, **args)
        self.assertEqual(one.json["tables"], listed.json["tables"])
        self.assertEqual(one.tables["history"].sharding_type, "table_wise")
        self.assertEqual(one.tables["geo"].ranks, (3,))

    def test_default_memory_is_noted(self):
        with self.assertLogs("embshard", "INFO") as logs:
            plan_six(mem_per_device=None, cost_model="analytic", explain=False)
        self.assertTrue(any("assuming" in line for line in logs.output), logs.output)

    def test_names(self):
        self.assertIn("neuroshard", embshard.planner_names())
        self.assertIn("analytic", embshard.cost_model_names())
        self.assertIn("row_wise", embshard.sharding_type_names())
        self.assertNotEqual(embshard.__version__, "unbuilt")


class Errors(unittest.TestCase):
    def assertLibraryError(self, pattern, **kwargs):
        with self.assertRaisesRegex(embshard.EmbshardError, pattern) as caught:
            plan_six(**kwargs)
        self.assertIsInstance(caught.exception, ValueError)
        return str(caught.exception)

    def test_unknown_algo(self):
        message = self.assertLibraryError("unknown planner 'nosuch'", algo="nosuch")
        self.assertIn("neuroshard", message)  # the library lists the valid names

    def test_a_table_too_big_for_memory(self):
        # user_id (51.6 GB) fits no 40 GB device whole.
        message = self.assertLibraryError("table 'user_id'", sharding_types="table_wise",
                                          cost_model="analytic")
        self.assertIn("cannot fit", message)
        message = self.assertLibraryError("the tables need 94.400 GB", mem_per_device="1GB")
        self.assertIn("13.600 GB", message)  # 16 x 1 GB less 15% reserved

    def test_a_bad_field(self):
        tables = copy.deepcopy(SIX_TABLES["tables"])
        tables[2]["pooling"] = 3
        with self.assertRaisesRegex(embshard.EmbshardError,
                                    r"tables: tables\[2\]: unknown field 'pooling'"):
            embshard.plan(tables, devices=16, batch_size=65536)

    def test_bad_arguments(self):
        self.assertLibraryError("mem_per_device", mem_per_device="40XB")
        self.assertLibraryError("mem_per_device is 0", mem_per_device="0")
        self.assertLibraryError(r"mem_per_device\[1\] is -1", mem_per_device=[1, -1] + [1] * 14)
        self.assertLibraryError("lists 2 sizes for 16 devices", mem_per_device=["40GB"] * 2)
        self.assertLibraryError("unknown planner option 'beam' .valid: beam_width, ", beam=3)
        self.assertLibraryError("planner option 'seed' is 'one', expected an integer", seed="one")
        self.assertLibraryError("planner option 'uncertainty' is 'x', of the wrong type",
                                uncertainty="x")
        self.assertLibraryError("unknown cost model|cost model 'nosuch'", cost_model="nosuch")
        self.assertLibraryError("sharding_types", sharding_types=["diagonal"])
        self.assertLibraryError("multiple of 4", split_dims=[6])
        self.assertLibraryError("pin|device", pins={"geo": 99})
        with self.assertRaisesRegex(embshard.EmbshardError, "batch_size"):
            embshard.plan(SIX_TABLES["tables"], devices=16)

    def test_bad_inputs_name_the_argument(self):
        big = 2**40
        cases = [
            (dict(tables=5), "tables is 5: expected a list of table dicts"),
            (dict(tables=b"six.json"), "tables is b'six.json': expected"),
            (dict(tables=model_configs(), samples=5), "samples is 5: expected a KeyedJaggedTensor"),
            (dict(devices=big), f"devices is {big}, outside 1..65536"),
            (dict(devices="16"), "devices is '16', expected an integer"),
            (dict(batch_size=2**70), "batch_size is 1180591620717411303424, outside"),
            (dict(mem_per_device=1e30), r"mem_per_device is \d+ bytes, past the largest size"),
            (dict(mem_per_device=[1e30] * 16), r"mem_per_device\[0\] is \d+ bytes, past"),
            (dict(seed=-1), "planner option 'seed' is -1, outside 0..18446744073709551615"),
            (dict(threads=big), f"planner option 'threads' is {big}, outside 0..2147483647"),
            (dict(beam_width=True), "planner option 'beam_width' is True, expected an integer"),
            (dict(pins=[("geo", big)]), f"pins: table 'geo': device is {big}, outside"),
            (dict(pins=["geo"]), r"pins\[0\] is 'geo', expected a \(table, device\) pair"),
            (dict(pins=[(3, 1)]), r"pins\[0\]: the table is 3, expected a table name"),
            (dict(pins="geo"), "pins is 'geo', expected {table: device}"),
            (dict(no_split=[1]), r"no_split\[0\] is 1, expected a table name"),
            (dict(no_split=5), "no_split is 5, expected a list"),
            (dict(split_dims=[big]), rf"split_dims\[0\] is {big}, outside 1..2147483647"),
            (dict(split_dims="32"), "split_dims is '32', expected a list"),
            (dict(sharding_types=5), "sharding_types is 5, expected a list"),
            (dict(sharding_types=[None]), r"sharding_types\[0\] is None, expected a sharding type"),
        ]
        for kwargs, pattern in cases:
            with self.subTest(pattern=pattern):
                args = dict(tables=SIX_TABLES["tables"], devices=16, batch_size=65536,
                            cost_model="analytic", explain=False)
                args.update(kwargs)
                with self.assertRaisesRegex(embshard.EmbshardError, pattern):
                    embshard.plan(**args)

    def test_samples_of_another_model(self):
        with self.assertRaisesRegex(embshard.EmbshardError,
                                    r"samples\[1\]: its keys \['clicks', 'views'\] name no feature "
                                    r"of the configs \(their features: \['brand', 'category', "):
            embshard.plan(model_configs(), samples=model_batches()[:1] +
                          [make_kjt({"views": [[1]], "clicks": [[2]]})], devices=4)

    def test_sample_warnings_name_the_callers_line(self):
        kjt = make_kjt({"user_id": [[1], [2]], "stray": [[3], [4]]})
        for call in (lambda: et.table_specs(model_configs()[:1], kjt),
                     lambda: embshard.plan(model_configs()[:1], samples=kjt, devices=2,
                                           cost_model="analytic", explain=False)):
            with self.assertWarnsRegex(et.SampleWarning, r"\['stray'\] are named by no config") \
                    as caught:
                call()
            self.assertEqual(caught.filename, __file__)

    def test_a_missing_plan_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "nosuch", "plan.json")
            with self.assertRaisesRegex(embshard.EmbshardError, "plan.json: cannot read the plan "
                                                                "file .No such file"):
                embshard.Plan.load(path)
            with self.assertRaisesRegex(embshard.EmbshardError, "cannot read the plan file"):
                embshard.Plan.load(tmp)  # a folder

    def test_a_config_error_is_an_embshard_error(self):
        bad = model_configs()
        bad[0].embedding_dim = 0
        with self.assertRaisesRegex(embshard.EmbshardError, "embedding_dim is 0"):
            embshard.plan(bad, devices=4, batch_size=64)


def many_tables(count=1000, seed=5):
    """Tables enough for a plan that takes a while (seeded sizes and pooling)."""
    rng = random.Random(seed)
    return [{"name": f"t{i}", "rows": rng.randint(1000, 5_000_000), "dim": rng.choice([16, 32, 64, 128]),
             "pooling_factor": rng.choice([1, 2, 5, 20, 60])} for i in range(count)]


class Threads(unittest.TestCase):
    def test_progress_at_debug_notes_at_info(self):
        from embshard.planning import _log  # what the library's Reporter calls
        with self.assertLogs("embshard", "DEBUG") as logs:
            _log("progress", "search: 3/10")
            _log("note", "plan: note: assuming 26.6 GB per device")
        self.assertEqual([(r.levelno, r.getMessage()) for r in logs.records],
                         [(logging.DEBUG, "search: 3/10"),
                          (logging.INFO, "plan: note: assuming 26.6 GB per device")])

    def test_notes_go_to_logging(self):
        with self.assertLogs("embshard", "INFO") as logs:
            plan_six(cost_model="analytic", explain=False)
        self.assertTrue(any("plan: 6 tables from tables; 16 devices; neuroshard" in line
                            for line in logs.output), logs.output)

    def test_a_failing_log_handler_does_not_break_planning(self):
        class Broken(logging.Handler):
            def emit(self, record):
                raise RuntimeError("handler")

        logger = logging.getLogger("embshard")
        handler = Broken()
        logger.addHandler(handler)
        level = logger.level
        logger.setLevel(logging.INFO)
        unraisable, hook = [], sys.unraisablehook
        sys.unraisablehook = unraisable.append  # reported so, not raised into the search
        try:
            p = plan_six(cost_model="analytic", explain=False)
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)
            sys.unraisablehook = hook
        self.assertEqual(len(p.tables), 6)
        self.assertTrue(unraisable and isinstance(unraisable[0].exc_value, RuntimeError))

    def test_the_search_releases_the_gil(self):
        # A thread ticks while the main thread plans; with the GIL held by the
        # search, no tick would fall inside it.
        ticks, stop = [], threading.Event()

        def tick():
            while not stop.is_set():
                ticks.append(time.monotonic())
                time.sleep(0.001)

        ticker = threading.Thread(target=tick)
        ticker.start()
        try:
            start = time.monotonic()
            p = embshard.plan(many_tables(), devices=16, batch_size=4096, mem_per_device=None,
                              threads=1, explain=False)
            end = time.monotonic()
        finally:
            stop.set()
            ticker.join()
        self.assertEqual(len(p.tables), 1000)
        if end - start < 0.2:
            self.skipTest(f"a {end - start:.2f} s plan is too quick to tell")
        inside = [t for t in ticks if start + 0.05 < t < end - 0.05]
        self.assertGreater(len(inside), 10, f"{len(inside)} ticks in a {end - start:.2f} s plan")

    def test_plans_in_threads_agree(self):
        results = [None] * 3

        def run(i):
            results[i] = plan_six(cost_model="analytic", explain=False).json["tables"]

        threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertTrue(results[0] and results[0] == results[1] == results[2])


class DataRoot(unittest.TestCase):
    def test_the_module_names_its_data(self):
        package = os.path.dirname(embshard.__file__)
        with open(os.path.join(package, "embshard-data-dir")) as f:
            root = f.readline().strip()
        root = os.path.join(package, root)
        self.assertTrue(os.path.isdir(os.path.join(root, "models")), root)


if __name__ == "__main__":
    unittest.main()
