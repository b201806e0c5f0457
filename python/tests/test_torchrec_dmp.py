"""embshard's plans run by the real TorchRec: EmbshardPlanner plans a small
model (8 tables in an EmbeddingBagCollection, one looked up by three
features, a dense part and a loss) for CPU ranks, DistributedModelParallel
shards it on 2 and on 4 gloo processes, and 20 training steps must match the
unsharded model trained on the same batches: each step's loss, and every
table's final weights, within TOLERANCE. Plans TorchRec cannot run are
refused by embshard, never handed out.

The sharding types run on a CPU, across the two runs: table_wise and
column_wise (2 ranks); row_wise, data_parallel and table_wise (4 ranks, as
two hosts of 2), with one table re-laid table_row_wise and one grid_shard in
TorchRec's layout (embshard's search does not lay those out so, and
EmbshardPlanner leaves them out: a plan file can still hold them).

Needs torch and TorchRec (scripts/install_torchrec.sh); skipped without them.
From python/tests:

    PYTHONPATH=<build>/python EMBSHARD_CLI=<build>/embshard \\
        <repo>/.venv-torchrec/bin/python -m unittest -v test_torchrec_dmp

(or ctest -R python_torchrec_dmp). Under a minute on 2 cores.
"""

import copy
import importlib.util
import logging
import multiprocessing
import os
import socket
import tempfile
import time
import unittest
import warnings

HAVE_TORCHREC = importlib.util.find_spec("torchrec") is not None
NO_TORCHREC = "torchrec not importable (scripts/install_torchrec.sh installs it)"
if HAVE_TORCHREC:
    import json

    import torch

    import embshard
    import embshard.torchrec as et
    import torchrec_dmp_worker as worker
    with warnings.catch_warnings():  # fbgemm_gpu's notes on its own modules, at import
        warnings.simplefilter("ignore")
        import torchrec.distributed.model_parallel  # noqa: F401
    # TorchRec's advice (a Topology built directly, ...) is not this test's output.
    logging.getLogger("torchrec").setLevel(logging.ERROR)

# float32 sums taken in another order (shards, all-to-alls) differ by ~1e-7
# a step; a table trained on the wrong rows, or a gradient off by a factor,
# moves the loss by 1e-3 or more.
TOLERANCE = 1e-5
RUN_TIMEOUT_S = 300
MODULE_PATH = "sparse"
# Device memory that makes the big tables split: big_a (8192 x 16, 557 KB
# with its optimizer state) fits no device; on 4 devices big_b (270 KB)
# neither. The batch per rank embshard plans for is the planner's (large
# enough on 4 ranks that replicating the smallest tables pays); training
# uses BATCH_PER_RANK.
TWO_RANKS = {"ddr_cap": 500_000, "batch_size": 8192, "pins": {"t4": 1, "t6": 0},
             "sharding_types": ["table_wise", "column_wise", "data_parallel"]}
FOUR_RANKS = {"ddr_cap": 260_000, "batch_size": 4096, "pins": {"t4": 3, "t6": 2},
              "sharding_types": ["table_wise", "row_wise", "data_parallel"]}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(world_size, local_world_size, planner_args=None, plan_json=None):
    """Runs worker.run_rank on world_size spawned processes; returns each
    rank's result ({"losses", "shards", "types"}). A rank that fails or
    hangs fails the test, with the tail of its log."""
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        procs = [ctx.Process(target=worker.run_rank,
                             args=(r, world_size, port, local_world_size, planner_args,
                                   plan_json, tmp)) for r in range(world_size)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + RUN_TIMEOUT_S
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        hung = [r for r, p in enumerate(procs) if p.is_alive()]
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
        results = []
        for r in range(world_size):
            path = os.path.join(tmp, f"rank{r}.pt")
            result = torch.load(path, weights_only=False) if os.path.exists(path) else None
            if r in hung or result is None or "error" in result:
                log = os.path.join(tmp, f"rank{r}.log")
                if os.path.exists(log):
                    with open(log, errors="replace") as f:
                        log = f.read()[-4000:]
                else:
                    log = "(none: it failed before writing one; its error is above)"
                why = f"hung past {RUN_TIMEOUT_S} s" if r in hung else \
                    (result or {}).get("error", f"exit code {procs[r].exitcode}")
                raise AssertionError(f"rank {r} of {world_size}: {why}\n--- its log:\n{log}")
            results.append(result)
        return results


def relay(plan_json, table, kind, hosts, local_world_size):
    """Re-lays `table` of an embshard plan JSON in TorchRec's layout of
    `kind`: its columns cut into one piece per host in `hosts`, each piece in
    local_world_size row blocks (et.torchrec_row_blocks), block b on the
    host's rank b. The plan's memory model goes (the pieces' bytes change)."""
    plan = copy.deepcopy(plan_json)
    plan.pop("memory_model", None)
    t = plan["tables"][table]
    width = t["dim"] // len(hosts)
    shards = []
    for piece, host in enumerate(hosts):
        for b, (row0, rows) in enumerate(et.torchrec_row_blocks(t["rows"], local_world_size)):
            rank = host * local_world_size + b
            shards.append({"shard_offsets": [row0, piece * width], "shard_sizes": [rows, width],
                           "placement": f"rank:{rank}/cuda:{rank}"})
    t.update(sharding_type=kind, compute_kernel="fused", shards=shards,
             ranks=[int(s["placement"].split(":")[1].split("/")[0]) for s in shards])
    return plan


@unittest.skipUnless(HAVE_TORCHREC, NO_TORCHREC)
class DistributedModelParallelRuns(unittest.TestCase):
    def check_against_the_reference(self, results, world_size):
        losses, weights = worker.train_reference(world_size)
        for rank, result in enumerate(results):
            deviation = max(abs(a - b) for a, b in zip(result["losses"], losses))
            self.assertLess(deviation, TOLERANCE, f"rank {rank}: losses {result['losses']} "
                                                  f"against the reference's {losses}")
        # Every piece of every table on every rank: the rows trained are the plan's.
        covered = {}
        for result in results:
            for table, pieces in result["shards"].items():
                for row0, col0, t in pieces:
                    want = weights[table][row0:row0 + t.shape[0], col0:col0 + t.shape[1]]
                    self.assertEqual(tuple(t.shape), tuple(want.shape), table)
                    self.assertLess((t - want).abs().max().item(), TOLERANCE, table)
                    covered[table] = covered.get(table, 0) + t.numel()
        for name, rows, dim, _ in worker.TABLES:
            self.assertGreaterEqual(covered.get(name, 0), rows * dim, name)
        # The comparison is not idle: training moved the loss far past the tolerance.
        self.assertGreater(max(losses) - min(losses), 1000 * TOLERANCE)
        return max(abs(a - b) for r in results for a, b in zip(r["losses"], losses))

    def test_two_ranks(self):
        plan, planner = worker.plan_for(2, 2, TWO_RANKS)
        types = {n: s.sharding_type for n, s in plan.plan[MODULE_PATH].items()}
        self.assertEqual(types["big_a"], "column_wise", types)
        self.assertEqual(types["t4"], "table_wise", types)
        self.assertTrue(all(sh.placement.device().type == "cpu"
                            for s in plan.plan[MODULE_PATH].values() if s.sharding_spec
                            for sh in s.sharding_spec.shards))
        start = time.monotonic()
        results = run_ranks(2, 2, TWO_RANKS)
        # The ranks planned for themselves (collective_plan): rank 0's plan, this one.
        self.assertEqual(results[1]["types"], types)
        deviation = self.check_against_the_reference(results, 2)
        print(f"\n2 ranks: {sorted(set(types.values()))}: {time.monotonic() - start:.1f} s, "
              f"largest loss deviation {deviation:.1e}")

    def test_four_ranks_on_two_hosts(self):
        plan, planner = worker.plan_for(4, 2, FOUR_RANKS)
        types = {n: s.sharding_type for n, s in plan.plan[MODULE_PATH].items()}
        self.assertEqual(types["big_a"], "row_wise", types)
        self.assertIn("data_parallel", types.values())
        self.assertEqual(types["t4"], "table_wise", types)
        plan_json = relay(planner.last_plan.json, "shared", "grid_shard", [0, 1], 2)
        plan_json = relay(plan_json, "t6", "table_row_wise", [1], 2)
        start = time.monotonic()
        results = run_ranks(4, 2, plan_json=json.dumps(plan_json))
        ran = results[0]["types"]
        self.assertEqual((ran["shared"], ran["t6"]), ("grid_shard", "table_row_wise"))
        self.assertEqual({n: k for n, k in ran.items() if n not in ("shared", "t6")},
                         {n: k for n, k in types.items() if n not in ("shared", "t6")})
        deviation = self.check_against_the_reference(results, 4)
        print(f"\n4 ranks: {sorted(set(ran.values()))}: {time.monotonic() - start:.1f} s, "
              f"largest loss deviation {deviation:.1e}")


@unittest.skipUnless(HAVE_TORCHREC, NO_TORCHREC)
class ShardingPlanFields(unittest.TestCase):
    def test_torchrecs_own_classes_and_fields(self):
        from torchrec.distributed.planner.types import ParameterConstraints, Topology
        from torchrec.distributed.types import (BoundsCheckMode, EmbeddingModuleShardingPlan,
                                                ParameterSharding, ShardingPlan)
        constraints = {"t5": ParameterConstraints(stochastic_rounding=False,
                                                  bounds_check_mode=BoundsCheckMode.WARNING)}
        planner = embshard.EmbshardPlanner(
            topology=Topology(world_size=4, compute_device="cpu", ddr_cap=260_000),
            reserved_fraction=0.0, cost_model="analytic", constraints=constraints,
            **{k: v for k, v in FOUR_RANKS.items() if k != "ddr_cap"})
        plan = planner.plan(worker.Model(torch.device("meta")))
        self.assertIsInstance(plan, ShardingPlan)
        self.assertEqual(list(plan.plan), [MODULE_PATH])
        module = plan.plan[MODULE_PATH]
        self.assertIsInstance(module, EmbeddingModuleShardingPlan)
        self.assertEqual(list(module), [name for name, _, _, _ in worker.TABLES])
        for name, s in module.items():
            self.assertIsInstance(s, ParameterSharding)
            t = planner.last_plan.tables[name]
            self.assertEqual((s.sharding_type, s.compute_kernel),
                             (t.sharding_type, "dense" if t.sharding_type == "data_parallel"
                              else "fused"))
            if s.sharding_type == "data_parallel":
                self.assertIsNone(s.sharding_spec)
                self.assertEqual(s.ranks, [0, 1, 2, 3])
                continue
            shards = s.sharding_spec.shards
            self.assertEqual([str(sh.placement) for sh in shards],
                             [f"rank:{r}/cpu" for r in s.ranks])
            self.assertEqual(sum(sh.shard_sizes[0] * sh.shard_sizes[1] for sh in shards),
                             t.rows * t.dim)
        self.assertEqual(module["big_a"].ranks, [0, 1, 2, 3])  # row_wise: block b on rank b
        self.assertEqual((module["t5"].stochastic_rounding, module["t5"].bounds_check_mode),
                         (False, BoundsCheckMode.WARNING))
        self.assertIsNone(module["t6"].bounds_check_mode)


@unittest.skipUnless(HAVE_TORCHREC, NO_TORCHREC)
class Refusals(unittest.TestCase):
    """Plans TorchRec cannot run: an EmbshardError naming the table, its
    sharding type and why, and no plan."""

    def test_row_blocks_off_a_hosts_ranks(self):
        # Two hosts of 2: big_a (557 KB) needs 3 of the 275 KB devices, and
        # TorchRec's table_row_wise is 2 blocks on one host's 2 ranks.
        args = dict(FOUR_RANKS, ddr_cap=275_000, sharding_types=["table_wise", "table_row_wise"])
        with self.assertRaisesRegex(embshard.EmbshardError,
                                    r"cannot be handed to TorchRec: .*table 'big_a' "
                                    r"\(table_row_wise\): TorchRec runs a table_row_wise table on "
                                    r"one host of 2 ranks as 2 row blocks of 4096 rows"):
            worker.plan_for(4, 2, args)
        # The same from a plan file: blocks on ranks 1 and 2 straddle the hosts.
        plan_json = relay(worker.plan_for(4, 2, FOUR_RANKS)[1].last_plan.json, "t6",
                          "table_row_wise", [0], 2)
        for shard, rank in zip(plan_json["tables"]["t6"]["shards"], (1, 2)):
            shard["placement"] = f"rank:{rank}/cuda:{rank}"
        plan_json["tables"]["t6"]["ranks"] = [1, 2]
        with self.assertRaisesRegex(embshard.EmbshardError,
                                    r"table 't6' \(table_row_wise\): .* the plan has rows 0..150 "
                                    r"on rank 1, rows 150..300 on rank 2"):
            et.to_torchrec_plan(plan_json, MODULE_PATH, "cpu", 2)
        et.check_torchrec_layout(relay(plan_json, "t6", "table_row_wise", [1], 2), "cpu", 2)

    def test_a_shard_too_narrow_for_the_fused_kernel(self):
        tables = [("narrow", 100, 6, ["f"]), ("wide", 100, 8, ["g"])]
        from torchrec.modules.embedding_configs import EmbeddingBagConfig
        from torchrec.modules.embedding_modules import EmbeddingBagCollection
        ebc = EmbeddingBagCollection(
            tables=[EmbeddingBagConfig(name=n, num_embeddings=r, embedding_dim=d, feature_names=f)
                    for n, r, d, f in tables], device=torch.device("meta"))
        planner = embshard.EmbshardPlanner(world_size=2, compute_device="cpu",
                                           mem_per_device="1MB", cost_model="analytic",
                                           sharding_types=["table_wise"])
        with self.assertRaisesRegex(embshard.EmbshardError,
                                    r"table 'narrow' \(table_wise\): a shard of 6 columns .*"
                                    r"fused kernel .* a multiple of 4"):
            planner.plan(ebc)

    def test_a_kernel_without_a_cpu_path(self):
        plan_json = worker.plan_for(2, 2, TWO_RANKS)[1].last_plan.json
        plan_json = copy.deepcopy(plan_json)
        plan_json["tables"]["t5"]["compute_kernel"] = "fused_uvm_caching"
        with self.assertRaisesRegex(embshard.EmbshardError,
                                    r"table 't5' \(table_wise\): compute kernel "
                                    r"'fused_uvm_caching' has no CPU path"):
            et.to_torchrec_plan(plan_json, MODULE_PATH, "cpu")
        self.assertIn("t5", et.to_torchrec_plan(plan_json, MODULE_PATH, "cuda").plan[MODULE_PATH])

    def test_what_the_sharders_and_constraints_do_not_offer(self):
        from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
        from torchrec.distributed.planner.types import ParameterConstraints, Topology
        topology = Topology(world_size=2, compute_device="cpu", ddr_cap=500_000)
        model = worker.Model(torch.device("meta"))
        # TorchRec's sharder offers no row_wise on a CPU (TorchRec's sharding
        # code runs it, as test_four_ranks_on_two_hosts shows).
        planner = embshard.EmbshardPlanner(
            topology=topology, reserved_fraction=0.0, cost_model="analytic",
            constraints={"big_a": ParameterConstraints(sharding_types=["row_wise"])})
        with self.assertRaisesRegex(embshard.EmbshardError,
                                    r"table 'big_a' allows \['row_wise'\], none of which the "
                                    r"sharders given offer on cpu"):
            planner.plan(model, [EmbeddingBagCollectionSharder()])
        planner = embshard.EmbshardPlanner(
            topology=topology, reserved_fraction=0.0, cost_model="analytic",
            constraints={"t7": ParameterConstraints(compute_kernels=["fused_uvm_caching"])})
        with self.assertRaisesRegex(embshard.EmbshardError,
                                    r"table 't7' \(\w+\): compute kernel 'fused' \(embshard's\) "
                                    r"is not among its constraint's \['fused_uvm_caching'\]"):
            planner.plan(model, [EmbeddingBagCollectionSharder()])

        class CachingOnly(EmbeddingBagCollectionSharder):
            def compute_kernels(self, sharding_type, compute_device_type):
                return ["fused_uvm_caching"]

        planner = embshard.EmbshardPlanner(topology=topology, reserved_fraction=0.0,
                                           cost_model="analytic")
        with self.assertRaisesRegex(embshard.EmbshardError,
                                    r"table 'big_a' \(column_wise\): the sharders given offer the "
                                    r"kernels \['fused_uvm_caching'\] for it on cpu, not 'fused'"):
            planner.plan(model, [CachingOnly()])


if __name__ == "__main__":
    unittest.main()
