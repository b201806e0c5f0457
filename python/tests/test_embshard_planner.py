"""Tests of EmbshardPlanner, embshard in the place of TorchRec's
EmbeddingShardingPlanner, on stand-ins of TorchRec 1.3's Topology,
ParameterConstraints, EmbeddingBagCollection and sharders (no TorchRec here):
ctest -R python_embshard."""

import dataclasses
import types
import unittest
import warnings

import embshard
import embshard.torchrec as et
from test_embshard_table_specs import EmbeddingBagConfig, make_kjt, model_configs


@dataclasses.dataclass
class Storage:  # torchrec.distributed.planner.types.Storage
    hbm: int
    ddr: int


@dataclasses.dataclass
class DeviceHardware:  # torchrec.distributed.planner.types.DeviceHardware
    rank: int
    storage: Storage


class Topology:
    """Stand-in for torchrec.distributed.planner.types.Topology: its
    properties world_size, compute_device, local_world_size and devices."""

    def __init__(self, world_size, compute_device="cuda", hbm_cap=32 * 1024**3,
                 ddr_cap=128 * 1024**3, local_world_size=None):
        self.world_size, self.compute_device = world_size, compute_device
        self.local_world_size = local_world_size or world_size
        self.devices = [DeviceHardware(r, Storage(hbm_cap if compute_device == "cuda" else 0,
                                                  ddr_cap)) for r in range(world_size)]


@dataclasses.dataclass
class ParameterConstraints:  # torchrec.distributed.planner.types.ParameterConstraints
    sharding_types: list = None
    compute_kernels: list = None
    min_partition: int = None
    pooling_factors: list = dataclasses.field(default_factory=lambda: [1.0])


class EmbeddingBagCollection:
    """Stand-in: what the planner reads of torchrec's EmbeddingBagCollection."""

    def __init__(self, configs):
        self._configs = configs

    def embedding_bag_configs(self):
        return self._configs

    def named_modules(self, prefix=""):
        yield prefix, self


class Module:
    """A torch.nn.Module stand-in: named_modules() in pre-order."""

    def __init__(self, **children):
        self._children = children

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, child in self._children.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)


def dlrm(configs=None):
    """TorchRec's DLRM layout: model.sparse_arch.embedding_bag_collection."""
    ebc = EmbeddingBagCollection(configs or model_configs())
    return Module(sparse_arch=Module(embedding_bag_collection=ebc), over_arch=Module())


class Sharder:  # EmbeddingBagCollectionSharder: the types it offers, its fused params
    def __init__(self, types, fused_params=None):
        self.types = types
        self.fused_params = fused_params

    def sharding_types(self, compute_device_type):
        return self.types


PATH = "sparse_arch.embedding_bag_collection"


def big_configs():
    """Tables big enough that 4 devices of 1 GB must split some of them."""
    return [EmbeddingBagConfig(num_embeddings=rows, embedding_dim=dim, name=name, feature_names=[name])
            for name, rows, dim in [("a", 4_000_000, 64), ("b", 1_000_000, 128), ("c", 200_000, 32),
                                    ("d", 100_000, 16)]]


def rank_batches(ranks, stride=8, pooling=2, shift=10):
    """One sample batch per rank of table 't' (feature 'f'): rank r reads rows
    shift*r .. shift*r + stride*pooling - 1, each once. With 4 ranks the
    global batch reads 46 rows: 28 once and 18 (those two ranks share) twice."""
    return [make_kjt({"f": [[shift * r + pooling * b + j for j in range(pooling)]
                            for b in range(stride)]}) for r in range(ranks)]


def one_table():
    return [EmbeddingBagConfig(num_embeddings=100_000, embedding_dim=16, name="t",
                               feature_names=["f"])]


def planner(**kwargs):
    args = dict(topology=Topology(4), cost_model="analytic")
    args.update(kwargs)
    return embshard.EmbshardPlanner(**args)


class Plans(unittest.TestCase):
    def test_a_dlrm_module(self):
        p = planner(batch_size=256)
        plan = p.plan(dlrm())
        self.assertEqual(list(plan), [PATH])
        self.assertEqual(list(plan[PATH]), [c.name for c in model_configs()])
        for sharding in plan[PATH].values():
            self.assertEqual(set(sharding), {"sharding_type", "compute_kernel", "ranks", "shards"})
        # TorchRec's batch_size is per rank.
        self.assertEqual(p.last_plan.batch_size, 256 * 4)
        # The topology's HBM less TorchRec's default reservation.
        self.assertEqual(p.last_plan.devices[0].capacity_bytes, int(32 * 1024**3 * 0.85))

    def test_defaults_follow_torchrec(self):
        p = planner()
        p.plan(dlrm())
        self.assertEqual(p.last_plan.batch_size, 512 * 4)

    def test_the_module_is_the_collection(self):
        plan = planner(batch_size=64).plan(EmbeddingBagCollection(model_configs()))
        self.assertEqual(list(plan), [""])

    def test_two_collections(self):
        configs = model_configs()
        model = Module(user=EmbeddingBagCollection(configs[:3]), item=EmbeddingBagCollection(configs[3:]))
        plan = planner(batch_size=64).plan(model)
        self.assertEqual(list(plan["user"]), [c.name for c in configs[:3]])
        self.assertEqual(list(plan["item"]), [c.name for c in configs[3:]])

    def test_samples_measure_the_tables(self):
        # The 4 ranks' batches together are the plan's batch: 46 rows, not
        # the 16 one rank's batch reads.
        p = planner(samples=rank_batches(4))
        specs, global_batch = p._specs(one_table())
        self.assertEqual(global_batch, 8 * 4)
        t = specs["tables"][0]
        self.assertEqual((t["pooling_factor"], t["unique_rows"]), (2.0, 46))
        self.assertEqual(t["row_reuse_histogram"][:3], [28 / 46, 18 / 46, 0.0])
        self.assertEqual(t["lookup_reuse_histogram"][:3], [28 / 64, 36 / 64, 0.0])
        p.plan(dlrm(one_table()))
        self.assertEqual(p.last_plan.batch_size, 8 * 4)  # the samples' batch, per rank

    def test_each_world_size_batches_are_one_global_batch(self):
        # Two global batches (46 and 64 rows) and one rank's batch left over.
        batches = rank_batches(4) + rank_batches(4, shift=16) + rank_batches(1)
        with self.assertWarnsRegex(et.SampleWarning, "the last 1 of 9 batches make no whole "
                                                     "global batch of 4 ranks") as caught:
            specs, _ = planner(samples=batches)._specs(one_table())
        self.assertEqual(caught.filename, __file__)  # the warning names the caller's line
        self.assertEqual(specs["tables"][0]["unique_rows"], 55)  # (46 + 64) / 2

    def test_fewer_samples_than_ranks_measure_pooling_only(self):
        p = planner(samples=rank_batches(2))
        with self.assertWarnsRegex(et.SampleWarning, "2 sample batches for 4 ranks.*only "
                                                     "pooling factors") as caught:
            specs, global_batch = p._specs(one_table())
        self.assertEqual(caught.filename, __file__)
        self.assertEqual(specs["tables"][0], {"name": "t", "rows": 100_000, "dim": 16,
                                              "data_type": "fp32", "pooling_factor": 2.0})
        self.assertEqual(global_batch, 8 * 4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", et.SampleWarning)
            p.plan(dlrm(one_table()))  # the profile fills in the rest
        self.assertEqual(p.last_plan.batch_size, 8 * 4)

    def test_cpu_topology(self):
        p = planner(topology=Topology(2, compute_device="cpu", ddr_cap=10**9))
        plan = p.plan(dlrm())
        self.assertEqual(p.last_plan.devices[0].capacity_bytes, int(10**9 * 0.85))
        placements = [s["placement"] for t in plan[PATH].values() for s in t["shards"] or []]
        self.assertTrue(placements and all(pl.endswith("/cpu") for pl in placements), placements)

    def test_without_a_topology(self):
        p = embshard.EmbshardPlanner(world_size=2, mem_per_device="2GB", batch_size=64,
                                     cost_model="analytic")
        p.plan(dlrm())
        self.assertEqual(p.last_plan.devices[1].capacity_bytes, 2 * 10**9)

    def test_collective_plan_of_one_rank(self):
        class OneRank:
            def size(self):
                return 1

            def rank(self):
                return 0

        p = planner(batch_size=64)
        self.assertEqual(p.collective_plan(dlrm(), pg=OneRank()), p.plan(dlrm()))
        self.assertEqual(p.collective_plan(dlrm()), p.plan(dlrm()))

    def test_torchrecs_own_arguments_are_accepted(self):
        p = embshard.EmbshardPlanner(Topology(2), 64, None, None, None, None, None, None,
                                     {"user_id": ParameterConstraints()}, False,
                                     cost_model="analytic")
        self.assertIn("user_id", p.plan(dlrm())[PATH])


class Constraints(unittest.TestCase):
    def plan(self, constraints=None, sharders=None, **kwargs):
        p = planner(topology=Topology(4, hbm_cap=10**9), reserved_fraction=0.0, batch_size=512,
                    constraints=constraints, **kwargs)
        return p.plan(dlrm(big_configs()), sharders)[PATH], p

    def test_free_tables_get_split(self):
        plan, _ = self.plan()
        self.assertNotEqual(plan["a"]["sharding_type"], "table_wise")  # 1.04 GB: too big whole

    def test_table_wise_only_keeps_a_table_whole(self):
        plan, _ = self.plan({"b": ParameterConstraints(sharding_types=["table_wise"])})
        self.assertEqual(plan["b"]["sharding_type"], "table_wise")
        self.assertEqual(len(plan["b"]["shards"]), 1)

    def test_types_bound_the_plan(self):
        # 'a' must split (test_free_tables_get_split); row_wise is the one
        # split it allows (the free plan splits it column_wise).
        allowed = {"table_wise", "row_wise"}
        plan, _ = self.plan({"a": ParameterConstraints(sharding_types=sorted(allowed))})
        self.assertEqual(plan["a"]["sharding_type"], "row_wise")
        self.assertTrue({t["sharding_type"] for t in plan.values()} <= allowed, plan)

    def test_sharders_bound_the_plan(self):
        allowed = ["table_wise", "row_wise"]
        plan, _ = self.plan(sharders=[Sharder(allowed)])
        self.assertEqual(plan["a"]["sharding_type"], "row_wise")
        self.assertTrue({t["sharding_type"] for t in plan.values()} <= set(allowed))

    def test_the_sharders_optimizer_sets_the_state_memory_counts(self):
        types = ["table_wise", "column_wise", "row_wise"]
        _, p = self.plan(sharders=[Sharder(types, {"optimizer": "exact_row_wise_adagrad"})])
        self.assertIn("optimizer state of row-wise Adagrad", p.last_plan.report())
        # Adam's two fp32 a weight: the tables (1.3 GB of weights) no longer fit.
        with self.assertRaisesRegex(embshard.EmbshardError, "the tables need 4.704 GB"):
            self.plan(sharders=[Sharder(types, {"optimizer": "adam"})])
        with self.assertWarnsRegex(UserWarning, "the sharders' optimizer 'lamb'"):
            _, p = self.plan(sharders=[Sharder(types, {"optimizer": "lamb"})])
        self.assertIn("optimizer state of row-wise Adagrad", p.last_plan.report())

    def test_an_unkeepable_constraint_is_an_error(self):
        # 'c' (26 MB) has no reason to split: the search keeps it whole.
        with self.assertRaisesRegex(embshard.EmbshardError,
                                    r"table 'c' allows \['column_wise'\] but was planned table_wise"):
            self.plan({"c": ParameterConstraints(sharding_types=["column_wise"])})

    def test_pooling_factors_where_nothing_was_measured(self):
        p = planner(constraints={"a": ParameterConstraints(pooling_factors=[3.0, 4.5])})
        specs, batch = p._specs(big_configs())
        self.assertEqual(specs["tables"][0]["pooling_factor"], 7.5)
        self.assertEqual(batch, 512 * 4)

    def test_pins(self):
        plan, _ = self.plan(pins={"c": 2})
        self.assertEqual(plan["c"]["ranks"], [2])
        plan, _ = self.plan(pins=[("c", 1)])
        self.assertEqual(plan["c"]["ranks"], [1])

    def test_unknown_tables_warn(self):
        with self.assertWarnsRegex(UserWarning, "nosuch"):
            self.plan({"nosuch": ParameterConstraints(sharding_types=["table_wise"])})


class Errors(unittest.TestCase):
    def test_no_collection(self):
        with self.assertRaisesRegex(embshard.EmbshardError, "no EmbeddingBagCollection"):
            planner().plan(Module(over_arch=Module()))

    def test_a_table_in_two_collections(self):
        model = Module(x=EmbeddingBagCollection(model_configs()[:2]),
                       y=EmbeddingBagCollection(model_configs()[1:3]))
        with self.assertRaisesRegex(embshard.EmbshardError, "table 'item_id' is in modules 'x' and 'y'"):
            planner().plan(model)

    def test_no_world_size(self):
        with self.assertRaisesRegex(embshard.EmbshardError, "world_size"):
            embshard.EmbshardPlanner()
        with self.assertRaisesRegex(embshard.EmbshardError, "mem_per_device"):
            embshard.EmbshardPlanner(world_size=2)
        with self.assertRaisesRegex(embshard.EmbshardError, "world_size is 1099511627776, past"):
            planner(topology=Topology(1), world_size=2**40, mem_per_device="1GB")

    def test_bad_topologies(self):
        ddr_only = Topology(2)
        ddr_only.devices[1].storage = types.SimpleNamespace(ddr=10**9)
        caps_only = types.SimpleNamespace(world_size=2, compute_device="cuda", devices=[],
                                          hbm_cap="10GB")
        cases = [(dict(topology=ddr_only), r"topology: devices\[1\]\.storage\.hbm is None, "
                                           "expected bytes"),
                 (dict(topology=Topology(2, hbm_cap="10GB")),
                  r"topology: devices\[0\]\.storage\.hbm is '10GB', expected bytes"),
                 (dict(topology=caps_only), "topology: hbm_cap is '10GB', expected bytes"),
                 (dict(reserved_fraction=1.0), r"reserved_fraction is 1.0, expected a share of "
                                               r"memory in \[0, 1\)"),
                 (dict(reserved_fraction=-0.1), "reserved_fraction is -0.1"),
                 (dict(reserved_fraction="0.1"), "reserved_fraction is '0.1'"),
                 (dict(storage_reservation=types.SimpleNamespace(_percentage=2)),
                  "storage_reservation._percentage is 2"),
                 (dict(topology=Topology(2), world_size=3), "topology: 2 devices for world_size 3"),
                 (dict(batch_size="512"), "batch_size is '512', expected the batch per rank")]
        for kwargs, pattern in cases:
            with self.subTest(pattern=pattern):
                with self.assertRaisesRegex(embshard.EmbshardError, pattern):
                    planner(**kwargs)

    def test_a_batch_size_unlike_the_samples(self):
        with self.assertRaisesRegex(embshard.EmbshardError, "batch_size is 16 per rank, but the "
                                                            "sample batches hold 8 samples each"):
            planner(samples=rank_batches(4), batch_size=16).plan(dlrm(one_table()))

    def test_samples_of_another_model(self):
        samples = [make_kjt({"x": [[1]], "y": [[2]]})] * 4
        with self.assertRaisesRegex(embshard.EmbshardError, r"samples\[0\]: its keys \['x', 'y'\] "
                                    r"name no feature of the configs \(their features: \['f'\]\)"):
            planner(samples=samples).plan(dlrm(one_table()))

    def test_library_errors_pass_through(self):
        with self.assertRaisesRegex(embshard.EmbshardError, "unknown planner"):
            planner(algo="nosuch").plan(dlrm())


if __name__ == "__main__":
    unittest.main()
