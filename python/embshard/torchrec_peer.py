"""TorchRec's own planner on an embshard task: what `embshard plan --algo
torchrec_planner` and `embshard eval --algos torchrec_planner` run (through the
Python that scripts/install_torchrec.sh makes), so that TorchRec's plans are
measured like every other algorithm's.

    python -m embshard.torchrec_peer TASK.json PLAN.json

TASK.json (written by embshard, src/search/torchrec_planner.cpp):
    {"format": "embshard-torchrec-task", "version": 2,
     "batch_size": global samples per step, "device_memory_bytes": [per device],
     "optimizer_bytes_per_row": 4, "optimizer_bytes_per_weight": 0,
     "sharding_types": [TorchRec's names], "no_split": [table names],
     "tables": [{"name", "rows", "dim", "pooling_factor", "data_type"}]}
PLAN.json (read back by embshard):
    {"format": "embshard-torchrec-peer-plan", "version": 2, "torchrec": version,
     "plan_s": seconds, "tables": {name: {"sharding_type", "compute_kernel",
       "shards": [{"row_offset", "rows", "col_offset", "cols", "device"}]
                 or null (data parallel: a copy on every device)}}}

TorchRec plans the task as a user of its EmbeddingShardingPlanner would for
GPUs: its default enumerator, proposers, estimator and partitioner, on a
topology of the task's devices (compute device "cuda", each device's memory
as its HBM, no host memory to offload to), the per-rank batch (the task's
global batch over the devices), the tables' pooling factors and data types,
its fused kernel and an optimizer whose state matches the task's memory model
(row-wise Adagrad: one value per row; SGD: none; Adam: two per weight). No storage is reserved beyond the task's: the
task's memory is what the tables may use, as for every embshard planner. The
module is built on the meta device: nothing is allocated and no GPU is needed.
"""

import json
import os
import sys
import tempfile
import time

FORMAT = "embshard-torchrec-task"
PLAN_FORMAT = "embshard-torchrec-peer-plan"
VERSION = 2
DATA_TYPES = ("fp32", "fp16", "bf16", "int8", "int4")


class TaskError(ValueError):
    pass


def _field(obj, name, kind, where):
    if name not in obj:
        raise TaskError(f"{where}: no field '{name}'")
    value = obj[name]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TaskError(f"{where}.{name}: {value!r} is not an integer")
    if kind is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise TaskError(f"{where}.{name}: {value!r} is not a number")
    if kind is list and not isinstance(value, list):
        raise TaskError(f"{where}.{name}: {value!r} is not a list")
    if kind is str and not isinstance(value, str):
        raise TaskError(f"{where}.{name}: {value!r} is not a string")
    return value


def read_task(path):
    with open(path) as f:
        try:
            task = json.load(f)
        except json.JSONDecodeError as e:
            raise TaskError(f"{path}: not JSON: {e}") from None
    if not isinstance(task, dict) or task.get("format") != FORMAT or task.get("version") != VERSION:
        raise TaskError(f"{path}: not an {FORMAT} file of version {VERSION}")
    for name, kind in (("batch_size", int), ("device_memory_bytes", list),
                       ("optimizer_bytes_per_row", int), ("optimizer_bytes_per_weight", int),
                       ("sharding_types", list), ("no_split", list), ("tables", list)):
        _field(task, name, kind, path)
    if task["batch_size"] < 1 or not task["device_memory_bytes"] or not task["tables"]:
        raise TaskError(f"{path}: a task needs a batch, devices and tables")
    for i, t in enumerate(task["tables"]):
        where = f"{path}: tables[{i}]"
        _field(t, "name", str, where)
        for name, kind in (("rows", int), ("dim", int), ("pooling_factor", float)):
            if _field(t, name, kind, where) <= 0:
                raise TaskError(f"{where}.{name}: {t[name]!r} must be positive")
        if _field(t, "data_type", str, where) not in DATA_TYPES:
            raise TaskError(f"{where}.data_type: {t['data_type']!r} is not one of "
                            f"{', '.join(DATA_TYPES)}")
    return task


def _optimizer(task):
    """The fused optimizer of the task's memory model, and the optimizer class
    TorchRec's storage estimate counts its state by (it reads it from each
    weight's `_optimizer_classes`, as apply_optimizer_in_backward leaves it)."""
    import torch
    from fbgemm_gpu.split_embedding_configs import EmbOptimType
    from torchrec import optim as trec_optim
    state = (task["optimizer_bytes_per_row"], task["optimizer_bytes_per_weight"])
    known = {(0, 0): (EmbOptimType.EXACT_SGD, torch.optim.SGD),
             (4, 0): (EmbOptimType.EXACT_ROWWISE_ADAGRAD, trec_optim.RowWiseAdagrad),
             (0, 8): (EmbOptimType.ADAM, torch.optim.Adam)}
    if state not in known:
        raise TaskError(f"optimizer state of {state[0]} bytes per row and {state[1]} per weight: "
                        "TorchRec's planner is run with SGD (0, 0), row-wise Adagrad (4, 0) "
                        "or Adam (0, 8) only")
    return known[state]


def plan_task(task):
    """Runs TorchRec's EmbeddingShardingPlanner on the task; returns the plan's
    tables in PLAN.json's form."""
    import torch
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.planner import EmbeddingShardingPlanner
    from torchrec.distributed.planner.storage_reservations import (
        FixedPercentageStorageReservation,
    )
    from torchrec.distributed.planner.types import (
        KernelConfig, ParameterConstraints, TopologyFactory, TrainerConfig,
    )
    from torchrec.modules.embedding_configs import DataType, EmbeddingBagConfig
    from torchrec.modules.embedding_modules import EmbeddingBagCollection

    memory = task["device_memory_bytes"]
    if len(set(memory)) != 1:
        raise TaskError("TorchRec's Topology takes one memory size for every device; "
                        f"the task's differ: {sorted(set(memory))}")
    devices = len(memory)
    types = list(task["sharding_types"])
    no_split = set(task["no_split"])
    configs, constraints = [], {}
    for t in task["tables"]:
        configs.append(EmbeddingBagConfig(name=t["name"], embedding_dim=t["dim"],
                                          num_embeddings=t["rows"],
                                          feature_names=[t["name"] + ".feature"],
                                          data_type=DataType[t["data_type"].upper()]))
        allowed = [s for s in types if s in ("table_wise", "data_parallel")] \
            if t["name"] in no_split else types
        constraints[t["name"]] = ParameterConstraints(
            sharding_types=allowed, compute_kernels=["fused", "dense"],
            pooling_factors=[float(t["pooling_factor"])])
    module = EmbeddingBagCollection(tables=configs, device=torch.device("meta"))
    fused, optimizer_class = _optimizer(task)
    for weight in module.parameters():
        weight._optimizer_classes = [optimizer_class]
    topology = TopologyFactory.create_topology(
        TrainerConfig(world_size=devices, hbm_cap_bytes=memory[0], ddr_cap_bytes=0),
        kernel_config=KernelConfig(compute_device="cuda"))
    planner = EmbeddingShardingPlanner(
        topology=topology, batch_size=max(1, task["batch_size"] // devices),
        constraints=constraints, storage_reservation=FixedPercentageStorageReservation(0.0),
        debug=False)
    sharder = EmbeddingBagCollectionSharder(fused_params={"optimizer": fused})
    plan = planner.plan(module, [sharder])
    return _tables(plan, devices)


def _tables(plan, devices):
    (module_plan,) = plan.plan.values()
    tables = {}
    for name, ps in module_plan.items():
        if ps.sharding_spec is None:
            if ps.sharding_type != "data_parallel":
                raise TaskError(f"table {name}: {ps.sharding_type} without shards")
            shards = None
        else:
            shards = []
            for s in ps.sharding_spec.shards:
                rank = s.placement.rank()
                if not 0 <= rank < devices:
                    raise TaskError(f"table {name}: a shard on rank {rank} of {devices}")
                shards.append({"row_offset": s.shard_offsets[0], "rows": s.shard_sizes[0],
                               "col_offset": s.shard_offsets[1], "cols": s.shard_sizes[1],
                               "device": rank})
        tables[name] = {"sharding_type": ps.sharding_type, "compute_kernel": ps.compute_kernel,
                        "shards": shards}
    return tables


def _write_atomic(path, obj):
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".torchrec-peer-")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m embshard.torchrec_peer TASK.json PLAN.json", file=sys.stderr)
        return 2
    try:
        task = read_task(argv[0])
        import torchrec
        start = time.perf_counter()
        tables = plan_task(task)
        elapsed = time.perf_counter() - start
    except (TaskError, OSError) as e:
        print(f"torchrec_peer: {e}", file=sys.stderr)
        return 1
    _write_atomic(argv[1], {"format": PLAN_FORMAT, "version": VERSION,
                            "torchrec": getattr(torchrec, "__version__", "unknown"),
                            "plan_s": elapsed, "tables": tables})
    return 0


if __name__ == "__main__":
    sys.exit(main())
