"""embshard's plan file (``embshard plan --out plan.json``), read and checked as
embshard's own reader (src/plan/plan_file.cpp) checks it, for the TorchRec
bridge (embshard.torchrec) and embshard.Plan."""

import json
import re
from collections.abc import Mapping

from ._errors import EmbshardError

PLAN_FORMAT = "embshard-plan"
PLAN_VERSION = 2  # version 1 (fp32 tables, memory_model.bytes_per_weight) is read too
DATA_TYPES = ("fp32", "fp16", "bf16", "int8", "int4")
SHARDING_TYPES = {
    "data_parallel", "table_wise", "column_wise", "row_wise",
    "table_row_wise", "table_column_wise", "grid_shard",
}
# TorchRec's training kernels for a sharded (not data-parallel) table.
SHARDED_KERNELS = ("fused", "fused_uvm", "fused_uvm_caching", "key_value")


class PlanError(EmbshardError):
    """The plan file is not an embshard plan, or is inconsistent."""


# What embshard's own plan reader (src/plan/plan_file.cpp) accepts, checked
# here with its messages: "<file>: field '<path>' is <value>, ...". Arrays may
# be tuples in a plan built in Python.
PLAN_MAX_ROWS = 1 << 40  # its kMaxRows and kMaxDim
PLAN_MAX_DIM = 1 << 16
# "rank:N/cuda:M" (what embshard writes, M = N) or "rank:N/cpu"; the device is N.
PLACEMENT = re.compile(r"rank:([0-9]{1,9})/(?:cuda:[0-9]{1,9}|cpu)")


def load_plan(path):
    """The plan in `path`, checked by check_plan: a PlanError names the file."""
    try:
        f = open(path, "r", encoding="utf-8")
    except OSError as e:
        raise PlanError(f"{path}: cannot read the plan file ({e.strerror or e})") from None
    with f:
        try:
            plan = json.load(f)
        except UnicodeDecodeError:
            raise PlanError(f"{path}: not a plan file: not UTF-8 text (a binary file?)") from None
        except ValueError as e:  # JSONDecodeError, or an integer of thousands of digits
            raise PlanError(f"{path}: not a plan file: not valid JSON ({e})") from None
        except RecursionError:
            raise PlanError(f"{path}: not a plan file: JSON nested too deeply to read") from None
    check_plan(plan, path)
    return plan


def _show(value):
    # A value as the messages show it: containers by kind and size only.
    if isinstance(value, Mapping):
        return f"an object of {len(value)} fields"
    if isinstance(value, (list, tuple)):
        return f"an array of {len(value)} values"
    text = json.dumps(value, default=repr)
    return text if len(text) <= 64 else text[:61] + "..."


def _member(where, obj, path, name):
    """obj[name], `obj` being the object at field `path` ("" for the top level)."""
    field = f"{path}.{name}" if path else name
    if not isinstance(obj, Mapping):
        raise PlanError(f"{where}: field '{path}' is {_show(obj)}, expected an object")
    if name not in obj:
        raise PlanError(f"{where}: missing field '{field}'")
    return obj[name]


INT64_MAX, INT_MAX = 2**63 - 1, 2**31 - 1


def _integer(where, value, field, low, high=INT64_MAX):
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanError(f"{where}: field '{field}' is {_show(value)}, expected an integer")
    if value < low or value > high:
        raise PlanError(f"{where}: field '{field}' is {value}, expected {low}..{high}")
    return value


def _pair(where, shard, path, name, low):
    """[rows, cols] of a shard's shard_offsets (low 0) or shard_sizes (low 1)."""
    field = f"{path}.{name}"
    value = _member(where, shard, path, name)
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise PlanError(f"{where}: field '{field}' is {_show(value)}, expected [rows, cols]")
    return [_integer(where, v, f"{field}[{i}]", low, INT64_MAX if i == 0 else INT_MAX)
            for i, v in enumerate(value)]


def check_plan(plan, where="plan"):
    """Raise a PlanError unless embshard's plan reader would accept `plan`'s
    format, num_devices, table_order and tables (the fields TorchRec gets).
    Messages start with `where`, the file."""
    if not isinstance(plan, Mapping):
        raise PlanError(f"{where}: the top level is {_show(plan)}, expected a plan object")
    fmt = _member(where, plan, "", "format")
    if fmt != PLAN_FORMAT:
        raise PlanError(f"{where}: field 'format' is {_show(fmt)}, expected \"{PLAN_FORMAT}\"")
    version = _member(where, plan, "", "version")
    if isinstance(version, bool) or version not in (1, PLAN_VERSION):
        raise PlanError(f"{where}: field 'version' is {_show(version)}, this reader reads "
                        f"versions 1 and {PLAN_VERSION}")
    world = _integer(where, _member(where, plan, "", "num_devices"), "num_devices", 1, INT_MAX)
    tables = _member(where, plan, "", "tables")
    if not isinstance(tables, Mapping) or not tables:
        raise PlanError(f"{where}: field 'tables' is {_show(tables)}, expected an object with "
                        "a field per table")
    order = plan.get("table_order", sorted(tables))
    if not isinstance(order, (list, tuple)):
        raise PlanError(f"{where}: field 'table_order' is {_show(order)}, expected an array")
    for i, name in enumerate(order):
        if not isinstance(name, str) or name not in tables:
            raise PlanError(f"{where}: field 'table_order[{i}]' is {_show(name)}, which is not "
                            "in 'tables'")
        if name in order[:i]:
            raise PlanError(f"{where}: field 'table_order[{i}]' is {_show(name)}, listed twice")
    if len(order) != len(tables):
        raise PlanError(f"{where}: field 'table_order' lists {len(order)} of the "
                        f"{len(tables)} tables")
    for name in order:
        if not name:
            raise PlanError(f"{where}: field 'tables' has a table with an empty name")
        _check_table(where, name, tables[name], world, version)
    if "memory_model" in plan:
        _check_memory(where, plan, order, world, version)
    task = plan.get("task", "training")  # absent: written before inference plans
    if task not in ("training", "inference"):
        raise PlanError(f"{where}: field 'task' is {_show(task)}, expected training or inference")
    if "topology" in plan:
        topology = plan["topology"]
        if not isinstance(topology, dict):
            raise PlanError(f"{where}: field 'topology' is {_show(topology)}, expected an object")
        _integer(where, _member(where, topology, "topology", "devices_per_host"),
                 "topology.devices_per_host", 1, world - 1)


def row_bytes(data_type, cols):
    """The bytes of one stored row of `cols` elements (embshard's
    data_type_row_bytes: a quantized row carries its scale and bias)."""
    return {"fp32": cols * 4, "fp16": cols * 2, "bf16": cols * 2, "int8": cols + 8,
            "int4": (cols + 1) // 2 + 4}[data_type]


def _check_memory(where, plan, order, world, version):
    """With the plan's memory_model: each table's memory_bytes is what its
    shards (or replicas) hold, and no rank holds more than its capacity."""
    model = plan["memory_model"]
    if not isinstance(model, Mapping):
        raise PlanError(f"{where}: field 'memory_model' is {_show(model)}, expected an object")
    if version == 1:
        _integer(where, _member(where, model, "memory_model", "bytes_per_weight"),
                 "memory_model.bytes_per_weight", 4, 4)
        state_per_weight = 0
    else:
        state_per_weight = _integer(
            where, _member(where, model, "memory_model", "optimizer_bytes_per_weight"),
            "memory_model.optimizer_bytes_per_weight", 0, 1024)
    per_row = _integer(where, _member(where, model, "memory_model", "optimizer_bytes_per_row"),
                       "memory_model.optimizer_bytes_per_row", 0, 1024)
    capacity = _member(where, plan, "", "device_memory_bytes")
    if not isinstance(capacity, (list, tuple)):
        raise PlanError(f"{where}: field 'device_memory_bytes' is {_show(capacity)}, expected "
                        "an array")
    if len(capacity) != world:
        raise PlanError(f"{where}: field 'device_memory_bytes' has {len(capacity)} capacities, "
                        f"expected num_devices = {world}")
    for d, c in enumerate(capacity):
        _integer(where, c, f"device_memory_bytes[{d}]", 1)
    used, on = [0] * world, [[] for _ in range(world)]
    for name in order:
        t = plan["tables"][name]
        if t["sharding_type"] == "data_parallel":
            pieces = [(r, t["rows"], t["dim"]) for r in t["ranks"]]
        else:
            pieces = [(r, s["shard_sizes"][0], s["shard_sizes"][1])
                      for r, s in zip(t["ranks"], t["shards"])]
        data_type = t["data_type"] if version > 1 else "fp32"
        held = 0
        for rank, rows, cols in pieces:
            bytes_ = rows * (row_bytes(data_type, cols) + per_row + cols * state_per_weight)
            held += bytes_
            used[rank] += bytes_
            on[rank].append(name)
        memory = _integer(where, _member(where, t, f"tables.{name}", "memory_bytes"),
                          f"tables.{name}.memory_bytes", 0)
        if memory != held:
            raise PlanError(f"{where}: field 'tables.{name}.memory_bytes' is {memory}, but its "
                            f"shards hold {held} bytes under 'memory_model'")
    for d in range(world):
        if used[d] > capacity[d]:
            raise PlanError(f"{where}: rank {d} holds {used[d]} bytes of shards "
                            f"({', '.join(on[d])}), past its capacity "
                            f"device_memory_bytes[{d}] = {capacity[d]}")


def _check_replicas(where, path, shards, ranks, world):
    """A data_parallel table: a replica on each of `ranks`, no pieces, each device once."""
    if shards is not None:
        raise PlanError(f"{where}: field '{path}.shards' is {_show(shards)}, expected null "
                        "for a data_parallel table")
    if not ranks:
        raise PlanError(f"{where}: field '{path}.ranks' is empty: a data_parallel table "
                        "needs a device")
    for i, r in enumerate(ranks):
        if r in ranks[:i]:
            raise PlanError(f"{where}: field '{path}.ranks' lists device {r} twice")
    if len(ranks) != world:
        # TorchRec replicates a data-parallel table on every rank.
        raise PlanError(f"{where}: field '{path}.ranks' lists {len(ranks)} of the {world} "
                        "devices: a data_parallel table is on every device")


def _shard_pieces(where, name, path, shards, ranks, rows, dim, world):
    """(row0, rows, col0, cols, rank) of each shard, each inside its table and placed on the
    rank `ranks` gives it; checked in the order embshard's reader checks them, so both give
    the same message."""
    pieces = []
    for i, s in enumerate(shards):
        field = f"{path}.shards[{i}]"
        row0, col0 = _pair(where, s, field, "shard_offsets", 0)
        n_rows, n_cols = _pair(where, s, field, "shard_sizes", 1)
        if row0 + n_rows > rows or col0 + n_cols > dim:
            raise PlanError(f"{where}: field '{field}' is rows {row0}..{row0 + n_rows} x cols "
                            f"{col0}..{col0 + n_cols}, outside table '{name}' ({rows} rows x "
                            f"dim {dim})")
        placement = _member(where, s, field, "placement")
        match = PLACEMENT.fullmatch(placement) if isinstance(placement, str) else None
        if not match:
            raise PlanError(f"{where}: field '{field}.placement' is {_show(placement)}, "
                            "expected \"rank:N/cuda:N\"")
        device = int(match.group(1))
        if device >= world:
            raise PlanError(f"{where}: field '{field}.placement' is \"{placement}\": rank "
                            f"{device} is outside 0..{world - 1} ({world} devices)")
        if ranks[i] != device:
            raise PlanError(f"{where}: field '{path}.ranks[{i}]' is {ranks[i]} but "
                            f"{field}.placement says rank {device}")
        pieces.append((row0, n_rows, col0, n_cols, device))
    return pieces


def _check_table(where, name, t, world, version):
    path = f"tables.{name}"
    if version > 1:
        data_type = _member(where, t, path, "data_type")
        if data_type not in DATA_TYPES:
            raise PlanError(f"{where}: field '{path}.data_type' is {_show(data_type)}, expected "
                            f"one of {', '.join(DATA_TYPES)}")
    kind = _member(where, t, path, "sharding_type")
    if not isinstance(kind, str) or kind not in SHARDING_TYPES:
        raise PlanError(f"{where}: field '{path}.sharding_type' is {_show(kind)}, expected one "
                        f"of {', '.join(sorted(SHARDING_TYPES))}")
    kernel = _member(where, t, path, "compute_kernel")
    if not isinstance(kernel, str):
        raise PlanError(f"{where}: field '{path}.compute_kernel' is {_show(kernel)}, expected "
                        "a string")
    # TorchRec's EmbeddingComputeKernel values: "dense" is data parallel's.
    if kind == "data_parallel" and kernel != "dense":
        raise PlanError(f"{where}: field '{path}.compute_kernel' is {_show(kernel)}, expected "
                        "\"dense\" for a data_parallel table")
    if kind != "data_parallel" and kernel not in SHARDED_KERNELS:
        raise PlanError(f"{where}: field '{path}.compute_kernel' is {_show(kernel)}, expected "
                        f"one of {', '.join(SHARDED_KERNELS)} for a {kind} table")
    dim = _integer(where, _member(where, t, path, "dim"), f"{path}.dim", 1, PLAN_MAX_DIM)
    rows = _integer(where, _member(where, t, path, "rows"), f"{path}.rows", 1, PLAN_MAX_ROWS)
    ranks = _member(where, t, path, "ranks")
    if not isinstance(ranks, (list, tuple)):
        raise PlanError(f"{where}: field '{path}.ranks' is {_show(ranks)}, expected an array")
    for i, r in enumerate(ranks):
        _integer(where, r, f"{path}.ranks[{i}]", 0, world - 1)
    shards = _member(where, t, path, "shards")
    if kind == "data_parallel":
        _check_replicas(where, path, shards, ranks, world)
        return
    if not isinstance(shards, (list, tuple)):
        raise PlanError(f"{where}: field '{path}.shards' is {_show(shards)}, expected an array")
    if not shards:
        raise PlanError(f"{where}: field '{path}.shards' is empty: the table has no shard")
    if len(shards) != len(ranks):
        raise PlanError(f"{where}: field '{path}.ranks' has {len(ranks)} ranks for "
                        f"{len(shards)} shards, expected one rank per shard")
    pieces = _shard_pieces(where, name, path, shards, ranks, rows, dim, world)
    # TorchRec builds a table's shards from its type.
    if kind == "table_wise" and len(shards) != 1:
        raise PlanError(f"{where}: field '{path}.shards' has {len(shards)} shards: a "
                        "table_wise table is one shard")
    for i, (row0, n_rows, col0, n_cols, _) in enumerate(pieces):
        field = f"{path}.shards[{i}]"
        if kind in ("column_wise", "table_column_wise") and (row0 != 0 or n_rows != rows):
            raise PlanError(f"{where}: field '{field}' holds rows {row0}..{row0 + n_rows} of "
                            f"{rows}: a {kind} shard holds every row (a range of columns)")
        if kind in ("row_wise", "table_row_wise") and (col0 != 0 or n_cols != dim):
            raise PlanError(f"{where}: field '{field}' holds columns {col0}..{col0 + n_cols} of "
                            f"{dim}: a {kind} shard holds every column (a range of rows)")
    for i, (row0, n_rows, col0, n_cols, _) in enumerate(pieces):
        for j, (r0, nr, c0, nc, _) in enumerate(pieces[:i]):
            if row0 < r0 + nr and r0 < row0 + n_rows and col0 < c0 + nc and c0 < col0 + n_cols:
                raise PlanError(f"{where}: field '{path}.shards': shards[{j}] and shards[{i}] "
                                "overlap")
    # Inside the table and disjoint: they cover it exactly when the areas add up.
    area = sum(nr * nc for _, nr, _, nc, _ in pieces)
    if area != rows * dim:
        raise PlanError(f"{where}: field '{path}.shards': the shards cover {area} of table "
                        f"'{name}''s {rows * dim} values")
    block = -(-rows // world)
    for i, (row0, n_rows, _, _, device) in enumerate(pieces):
        if kind == "row_wise" and row0 // block != device:
            # TorchRec sends the lookups of row block b to rank b.
            raise PlanError(f"{where}: field '{path}.shards[{i}]' holds rows "
                            f"{row0}..{row0 + n_rows} on rank {device}: in a row_wise table "
                            f"TorchRec serves row block b (rows b x {block} onwards) from rank b")
