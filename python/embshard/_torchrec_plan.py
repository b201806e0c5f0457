"""An embshard plan as TorchRec's sharding plan, and the layouts TorchRec runs.

Follows TorchRec 1.9 (checked against torchrec 1.9.2 with fbgemm-gpu-cpu
1.9.0): a ParameterSharding per table (sharding_type, compute_kernel, ranks,
an EnumerableShardingSpec of ShardMetadata(shard_offsets, shard_sizes,
placement), and the kernel settings TorchRec's planner copies from a table's
ParameterConstraints), in an EmbeddingModuleShardingPlan per module path, in
a ShardingPlan.

TorchRec's sharding code assumes its own planner's layouts and does not check
them: a row_wise table's shards are read by position (rank b's is shards[b],
whatever its placement says), and rank b is sent the lookups of row block b
(ceil(rows / ranks) rows each). A plan in another layout fails deep inside
DistributedModelParallel (a table_row_wise table of 3 blocks on hosts of 2:
"Number of local shards (1) does not match number of local shards metadata"),
or runs its pieces on other ranks than the plan's; an unsorted shard list
would train the wrong rows. The shards go out sorted, and
check_torchrec_layout refuses the rest first, naming the table, its sharding
type and why.
"""

from collections.abc import Mapping

from ._errors import EmbshardError
from .plan_file import PLACEMENT, check_plan

# ParameterSharding's fields beyond the placement, which TorchRec's planner
# copies from the table's ParameterConstraints (planner.planners.to_sharding_plan).
CONSTRAINT_FIELDS = ("cache_params", "enforce_hbm", "stochastic_rounding", "bounds_check_mode",
                     "output_dtype", "key_value_params")
# What EmbeddingBagCollectionSharder.compute_kernels(type, "cpu") offers: the
# fused kernel (FBGEMM's table-batched embedding on the host, its optimizer
# run in the backward pass) for a sharded table, dense for a replica.
CPU_KERNELS = {"sharded": "fused", "data_parallel": "dense"}
# FBGEMM's table-batched kernels work on rows of 4-float vectors: TorchRec
# asserts it of every shard a fused kernel holds.
FUSED_COLUMN_MULTIPLE = 4
# What embshard's search never arranges as TorchRec lays them out (row blocks
# aligned with a host's ranks): the planner leaves them out unless asked.
NODE_ALIGNED_TYPES = ("table_row_wise", "grid_shard")


def _placement(p, device_type, local_world_size):
    # embshard writes "rank:N/cuda:N"; a CPU run wants "rank:N/cpu", and on
    # hosts of L GPUs rank N is GPU N mod L of its host.
    rank = int(PLACEMENT.fullmatch(p).group(1))
    if device_type != "cuda":
        return f"rank:{rank}/{device_type}"
    return f"rank:{rank}/cuda:{rank % local_world_size if local_world_size else rank}"


def _local_world_size(plan, local_world_size):
    """The given GPUs per host, else the plan's hosts (its `topology`), else None."""
    _check_local_world_size(local_world_size)
    if local_world_size is not None:
        return local_world_size
    topology = plan.get("topology") if isinstance(plan, dict) else None
    return topology.get("devices_per_host") if isinstance(topology, dict) else None


def _check_local_world_size(local_world_size):
    if local_world_size is not None and (isinstance(local_world_size, bool)
                                         or not isinstance(local_world_size, int)
                                         or local_world_size < 1):
        raise ValueError(f"local_world_size is {local_world_size!r}, expected a positive integer")


# ---- the layouts TorchRec 1.9 runs ----------------------------------------------

def torchrec_row_blocks(rows, k):
    """[(row_offset, rows)] of TorchRec's k row blocks of a table: ceil(rows /
    k) rows each, the last what remains (TorchRec's input distribution sends
    block b's lookups to the block's b-th rank)."""
    block = -(-rows // k)
    return [(b * block, max(0, min(block, rows - b * block))) for b in range(k)]


def _show_pieces(pieces, limit=4):
    text = ", ".join(f"rows {r0}..{r0 + n} on rank {rank}" for r0, n, rank in pieces[:limit])
    return text + (f" and {len(pieces) - limit} more" if len(pieces) > limit else "")


def _row_blocks_why(pieces, rows, k, what):
    """Why pieces [(row0, rows, rank)] (one column range) are not TorchRec's k
    row blocks on k consecutive ranks starting at a multiple of k, or None."""
    pieces = sorted(pieces)
    first = pieces[0][2] - pieces[0][2] % k
    want = [(r0, n, first + b) for b, (r0, n) in enumerate(torchrec_row_blocks(rows, k))]
    if pieces == want:
        return None
    rank = f"{first}+b" if first else "b"
    return (f"TorchRec runs {what} as {k} row blocks of {want[0][1]} rows, block b on rank "
            f"{rank} ({_show_pieces(want)}); the plan has {_show_pieces(pieces)}")


def _layout_why(t, world, device_type, local_world_size):
    """Why TorchRec cannot run table placement t (a plan JSON table), or None."""
    kind, kernel = t["sharding_type"], t["compute_kernel"]
    if device_type == "cpu":
        want = CPU_KERNELS["data_parallel" if kind == "data_parallel" else "sharded"]
        if kernel != want:
            return (f"compute kernel '{kernel}' has no CPU path in TorchRec (its sharder offers "
                    f"'{want}' for a {kind} table on a CPU)")
    if kind == "data_parallel":
        return None
    pieces = [(s["shard_offsets"][0], s["shard_sizes"][0], s["shard_offsets"][1],
               s["shard_sizes"][1], int(PLACEMENT.fullmatch(s["placement"]).group(1)))
              for s in t["shards"]]
    if kernel.startswith("fused"):
        narrow = [p for p in pieces if p[3] % FUSED_COLUMN_MULTIPLE]
        if narrow:
            return (f"a shard of {narrow[0][3]} columns (on rank {narrow[0][4]}): TorchRec's "
                    f"{kernel} kernel (FBGEMM's table-batched embedding) needs every shard's "
                    f"columns to be a multiple of {FUSED_COLUMN_MULTIPLE}")
    rows = t["rows"]
    if kind == "row_wise":
        return _row_blocks_why([(p[0], p[1], p[4]) for p in pieces], rows, world,
                               f"a row_wise table over its {world} ranks")
    if kind not in NODE_ALIGNED_TYPES:
        return None
    local = local_world_size or world
    if world % local:
        return (f"local_world_size {local} does not divide the {world} ranks: TorchRec places a "
                f"{kind} table on the ranks of one host")
    columns = {}
    for r0, n, c0, cols, rank in pieces:
        columns.setdefault((c0, cols), []).append((r0, n, rank))
    for (c0, cols), column in sorted(columns.items()):
        what = f"a table_row_wise table on one host of {local} ranks" \
            if kind == "table_row_wise" else \
            f"columns {c0}..{c0 + cols} of a grid_shard table on one host of {local} ranks"
        why = _row_blocks_why(column, rows, local, what)
        if why:
            return why + (f"; embshard's search does not lay {kind} out so: leave it out of the "
                          "plan's sharding types (EmbshardPlanner's default)")
    return None


def layout_problems(plan, device_type="cuda", local_world_size=None):
    """[(table, sharding type, why)] of each table whose placement TorchRec
    cannot run; empty where it runs them all."""
    check_plan(plan)
    local_world_size = _local_world_size(plan, local_world_size)
    world = plan["num_devices"]
    out = []
    for name in plan.get("table_order", sorted(plan["tables"])):
        t = plan["tables"][name]
        why = _layout_why(t, world, device_type, local_world_size)
        if why:
            out.append((name, t["sharding_type"], why))
    return out


def refusal(problems, what="TorchRec cannot run this plan"):
    """An EmbshardError listing [(table, type, why)], one line each."""
    lines = [f"table '{name}' ({kind}): {why}" for name, kind, why in problems]
    return EmbshardError(f"{what}: " + (lines[0] if len(lines) == 1 else
                                        "\n  " + "\n  ".join(lines)))


def check_torchrec_layout(plan, device_type="cuda", local_world_size=None):
    """Raise an EmbshardError naming each table (its sharding type, and why)
    whose placement TorchRec 1.9 cannot run on `device_type` ("cuda" or
    "cpu") with hosts of `local_world_size` ranks (None: the plan's hosts, else one)."""
    problems = layout_problems(plan, device_type, local_world_size)
    if problems:
        raise refusal(problems)


# ---- the hand-off -------------------------------------------------------------------

def to_parameter_sharding_dicts(plan, device_type="cuda", local_world_size=None):
    """{table name: {"sharding_type", "compute_kernel", "ranks", "shards"}} where
    shards is a list of {"shard_offsets", "shard_sizes", "placement"} (by
    column, then row offset: the order TorchRec reads them in) or None.

    `local_world_size`: GPUs per host, when the ranks span hosts (TorchRec's
    placement names the host's own GPU: rank 9 on hosts of 8 is cuda:1);
    None: the plan's hosts (`topology`), else one host. The plan's content as
    it is: check_torchrec_layout says whether TorchRec runs it."""
    check_plan(plan)
    local_world_size = _local_world_size(plan, local_world_size)
    out = {}
    for name in plan.get("table_order", sorted(plan["tables"])):
        t = plan["tables"][name]
        shards, ranks = None, list(t["ranks"])
        if t["shards"] is not None:
            ordered = sorted(zip(t["shards"], ranks),
                             key=lambda sr: (sr[0]["shard_offsets"][1], sr[0]["shard_offsets"][0]))
            shards = [{"shard_offsets": list(s["shard_offsets"]),
                       "shard_sizes": list(s["shard_sizes"]),
                       "placement": _placement(s["placement"], device_type, local_world_size)}
                      for s, _ in ordered]
            ranks = [r for _, r in ordered]
        out[name] = {"sharding_type": t["sharding_type"], "compute_kernel": t["compute_kernel"],
                     "ranks": ranks, "shards": shards}
    return out


def to_parameter_shardings(plan, device_type="cuda", local_world_size=None, fields=None):
    """{table name: torchrec ParameterSharding}, the layout checked first
    (check_torchrec_layout). `fields`: {table: {ParameterSharding field:
    value}} set beside the placement (CONSTRAINT_FIELDS). Needs TorchRec."""
    from torch.distributed._shard.sharding_spec import EnumerableShardingSpec, ShardMetadata
    from torchrec.distributed.types import ParameterSharding

    check_torchrec_layout(plan, device_type, local_world_size)
    result = {}
    for name, d in to_parameter_sharding_dicts(plan, device_type, local_world_size).items():
        spec = None
        if d["shards"] is not None:
            spec = EnumerableShardingSpec([
                ShardMetadata(shard_offsets=s["shard_offsets"], shard_sizes=s["shard_sizes"],
                              placement=s["placement"])
                for s in d["shards"]
            ])
        result[name] = ParameterSharding(sharding_type=d["sharding_type"],
                                         compute_kernel=d["compute_kernel"],
                                         ranks=d["ranks"], sharding_spec=spec,
                                         **(fields or {}).get(name, {}))
    return result


def _module_paths(plan, module_path):
    """{table: module path} from one path or a {table: path} mapping."""
    order = plan.get("table_order", sorted(plan["tables"]))
    paths = module_path if isinstance(module_path, Mapping) else \
        {name: module_path for name in order}
    missing = [n for n in order if n not in paths]
    if missing:
        raise EmbshardError(f"module_path names no module for tables {missing}")
    return paths


def sharding_plan(plan, module_path, device_type="cuda", local_world_size=None, as_dicts=False,
                  fields=None, check=None):
    """TorchRec's ShardingPlan {module path: EmbeddingModuleShardingPlan}, or
    where torchrec does not import (or with as_dicts) the same as dicts
    {module path: {table: to_parameter_sharding_dicts' dict}}. `check`: refuse
    a layout TorchRec cannot run (default: where TorchRec objects are made;
    the dicts are the plan as it is)."""
    paths = _module_paths(plan, module_path)
    if not as_dicts:
        try:
            import torchrec.distributed.types  # noqa: F401
        except ImportError:
            as_dicts = True
    if check or (check is None and not as_dicts):
        check_torchrec_layout(plan, device_type, local_world_size)
    if as_dicts:
        tables = to_parameter_sharding_dicts(plan, device_type, local_world_size)
    else:
        tables = to_parameter_shardings(plan, device_type, local_world_size, fields)
    modules = {}
    for name, sharding in tables.items():
        modules.setdefault(paths[name], {})[name] = sharding
    if as_dicts:
        return modules
    from torchrec.distributed.types import EmbeddingModuleShardingPlan, ShardingPlan
    return ShardingPlan({path: EmbeddingModuleShardingPlan(s) for path, s in modules.items()})


def to_torchrec_plan(plan, module_path="sparse_arch.embedding_bag_collection", device_type="cuda",
                     local_world_size=None):
    """A torchrec ShardingPlan with every table under `module_path` (or
    {table: module path}), the layout checked first. Needs TorchRec."""
    import torchrec.distributed.types  # noqa: F401 (an ImportError, not dicts, without it)
    return sharding_plan(plan, module_path, device_type, local_world_size)
