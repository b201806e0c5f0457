"""Turn an embshard plan (``embshard plan --out plan.json``) into TorchRec's
sharding plan, for ``DistributedModelParallel(module, plan=...)``.

    import json, embshard_torchrec as et
    plan = et.load_plan("plan.json")
    sharding_plan = et.to_torchrec_plan(plan, module_path="sparse_arch.embedding_bag_collection")
    model = DistributedModelParallel(model, plan=sharding_plan, ...)

TorchRec is imported only by the functions that build TorchRec objects. Without
it, ``to_parameter_sharding_dicts`` gives the same content as plain dicts (what
the tests check, and what a process without TorchRec can ship elsewhere).
"""

import json

PLAN_FORMAT = "embshard-plan"
PLAN_VERSION = 1
SHARDING_TYPES = {
    "data_parallel", "table_wise", "column_wise", "row_wise",
    "table_row_wise", "table_column_wise", "grid_shard",
}


class PlanError(ValueError):
    """The plan file is not an embshard plan, or is inconsistent."""


def load_plan(path):
    with open(path, "r", encoding="utf-8") as f:
        plan = json.load(f)
    check_plan(plan, path)
    return plan


def check_plan(plan, where="plan"):
    if plan.get("format") != PLAN_FORMAT or plan.get("version") != PLAN_VERSION:
        raise PlanError(f"{where}: not an {PLAN_FORMAT} version {PLAN_VERSION} file")
    world = plan["num_devices"]
    for name, t in plan["tables"].items():
        if t["sharding_type"] not in SHARDING_TYPES:
            raise PlanError(f"{where}: table '{name}': unknown sharding_type {t['sharding_type']!r}")
        for r in t["ranks"]:
            if not 0 <= r < world:
                raise PlanError(f"{where}: table '{name}': rank {r} outside 0..{world - 1}")
        if t["shards"] is None:
            continue
        area = 0
        for s in t["shards"]:
            rows, cols = s["shard_sizes"]
            row0, col0 = s["shard_offsets"]
            if row0 + rows > t["rows"] or col0 + cols > t["dim"]:
                raise PlanError(f"{where}: table '{name}': shard {s} outside the table")
            area += rows * cols
        if area != t["rows"] * t["dim"]:
            raise PlanError(f"{where}: table '{name}': shards cover {area} of {t['rows'] * t['dim']}")


def _placement(p, device_type):
    # embshard writes "rank:N/cuda:N"; a CPU run wants "rank:N/cpu".
    rank = p.split("/")[0]
    if device_type == "cuda":
        return p
    return f"{rank}/{device_type}"


def to_parameter_sharding_dicts(plan, device_type="cuda"):
    """{table name: {"sharding_type", "compute_kernel", "ranks", "shards"}} where
    shards is a list of {"shard_offsets", "shard_sizes", "placement"} or None."""
    check_plan(plan)
    out = {}
    for name in plan.get("table_order", sorted(plan["tables"])):
        t = plan["tables"][name]
        shards = None
        if t["shards"] is not None:
            shards = [
                {
                    "shard_offsets": list(s["shard_offsets"]),
                    "shard_sizes": list(s["shard_sizes"]),
                    "placement": _placement(s["placement"], device_type),
                }
                for s in t["shards"]
            ]
        out[name] = {
            "sharding_type": t["sharding_type"],
            "compute_kernel": t["compute_kernel"],
            "ranks": list(t["ranks"]),
            "shards": shards,
        }
    return out


def to_parameter_shardings(plan, device_type="cuda"):
    """{table name: torchrec ParameterSharding}. Needs TorchRec."""
    from torch.distributed._shard.sharding_spec import EnumerableShardingSpec, ShardMetadata
    from torchrec.distributed.types import ParameterSharding

    result = {}
    for name, d in to_parameter_sharding_dicts(plan, device_type).items():
        spec = None
        if d["shards"] is not None:
            spec = EnumerableShardingSpec([
                ShardMetadata(shard_offsets=s["shard_offsets"], shard_sizes=s["shard_sizes"],
                              placement=s["placement"])
                for s in d["shards"]
            ])
        result[name] = ParameterSharding(sharding_type=d["sharding_type"],
                                         compute_kernel=d["compute_kernel"],
                                         ranks=d["ranks"], sharding_spec=spec)
    return result


def to_torchrec_plan(plan, module_path="sparse_arch.embedding_bag_collection", device_type="cuda"):
    """A torchrec ShardingPlan with every table under `module_path`. Needs TorchRec."""
    from torchrec.distributed.types import EmbeddingModuleShardingPlan, ShardingPlan

    shardings = to_parameter_shardings(plan, device_type)
    return ShardingPlan({module_path: EmbeddingModuleShardingPlan(shardings)})


def predicted_summary(plan):
    """One line per device: the figures embshard predicted."""
    p = plan["predicted"]
    lines = [f"cost {p['cost_ms']:.3f} ms (device {p['critical_device']}), "
             f"lower bound {p['lower_bound_ms']:.3f} ms"]
    for d, dev in enumerate(p["devices"]):
        lines.append(f"device {d}: {dev['total_ms']:.3f} ms, {dev['memory_bytes'] / 1e9:.3f} GB, "
                     f"{dev['num_shards']} shards")
    return "\n".join(lines)
