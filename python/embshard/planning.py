"""embshard.plan and the Plan it returns.

The search runs in the C++ library (embshard._embshard) without the GIL; this
module turns the caller's tables into table-spec JSON, and the plan JSON the
library returns into Plan, Table, Shard and Device objects.
"""

import contextlib
import dataclasses
import json
import logging
import os
import tempfile
from collections.abc import Mapping

from . import plan_file
from ._errors import EmbshardError

LOGGER = logging.getLogger("embshard")
# TorchRec's DLRM keeps its EmbeddingBagCollection here (torchrec.models.dlrm).
DEFAULT_MODULE_PATH = "sparse_arch.embedding_bag_collection"


def _native():
    """The compiled extension, or an ImportError that says how to build it."""
    try:
        from . import _embshard
    except ImportError as e:
        raise ImportError(
            f"embshard's compiled extension is missing ({e}): build it "
            "(cmake --build build --target embshard_python) and put build/python first on "
            "PYTHONPATH, or pip install --no-build-isolation . from the source tree") from e
    return _embshard


def _bridge():
    # Imported when used, so that `python3 -m embshard.torchrec` does not find
    # the module already imported by the package.
    from . import torchrec
    return torchrec


def _log(kind, text):
    # Progress is for someone watching a long plan; notes say what was assumed.
    LOGGER.log(logging.DEBUG if kind == "progress" else logging.INFO, text)


# ---- the arguments --------------------------------------------------------------

INT_MAX, INT64_MAX, UINT64_MAX = 2**31 - 1, 2**63 - 1, 2**64 - 1
MAX_DEVICES = 65536  # kMaxDevices (include/embshard/plan/plan.h)
# The search's integer options, by the largest value of the C++ field each
# fills (PlannerOptions in include/embshard/search/planner.h); the search
# checks what each means (beam_width >= 1, ...).
INT_OPTIONS = {"seed": UINT64_MAX, "beam_width": INT_MAX, "max_steps": INT_MAX,
               "candidates": INT_MAX, "grid_steps": INT_MAX, "scan_patience": INT_MAX,
               "screen_keep": INT_MAX, "step_patience": INT_MAX, "threads": INT_MAX}


def _integer(value, what, low, high):
    if isinstance(value, bool) or not isinstance(value, int):
        raise EmbshardError(f"{what} is {value!r:.60}, expected an integer in {low}..{high}")
    if not low <= value <= high:
        raise EmbshardError(f"{what} is {value}, outside {low}..{high}")
    return value


def _list(value, what, one):
    """A list from a list-like argument; a single `one` (a str, an int) is a
    list of itself, never its characters."""
    if value is None:
        return []
    if isinstance(value, one):
        return [value]
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
        raise EmbshardError(f"{what} is {value!r:.60}, expected a list")
    return list(value)


def _table_names(value, what):
    names = _list(value, what, str)
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise EmbshardError(f"{what}[{i}] is {name!r:.60}, expected a table name")
    return names


def _pins(pins):
    """[(table, device)] from {table: device} or a list of (table, device) pairs."""
    if pins is None:
        return []
    if isinstance(pins, Mapping):
        pins = list(pins.items())
    elif not isinstance(pins, (list, tuple)):
        raise EmbshardError(f"pins is {pins!r:.60}, expected {{table: device}} or a list of "
                            "(table, device) pairs")
    out = []
    for i, pair in enumerate(pins):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise EmbshardError(f"pins[{i}] is {pair!r:.60}, expected a (table, device) pair")
        table, device = pair
        if not isinstance(table, str):
            raise EmbshardError(f"pins[{i}]: the table is {table!r:.60}, expected a table name")
        out.append((table, _integer(device, f"pins: table '{table}': device", 0, INT_MAX)))
    return out


def _widths(split_dims):
    widths = _list(split_dims, "split_dims", int)
    for i, width in enumerate(widths):
        _integer(width, f"split_dims[{i}]", 1, INT_MAX)
    return widths


def _options(options):
    """The search's options, integers checked to fit their C++ fields (a
    misspelt name reaches the library, which lists the valid ones)."""
    out = dict(options)
    for name, value in out.items():
        if name in INT_OPTIONS:
            _integer(value, f"planner option '{name}'", 0, INT_OPTIONS[name])
        elif name == "policy" and isinstance(value, os.PathLike):
            out[name] = os.fspath(value)
    return out


# ---- the tables ----------------------------------------------------------------

def _is_config(item):
    # EmbeddingBagConfig-shaped (an object or a dict): what the bridge reads.
    if isinstance(item, Mapping):
        return "num_embeddings" in item
    return hasattr(item, "num_embeddings") and hasattr(item, "embedding_dim")


def _scalar(value):
    # numpy and torch scalars (rows as numpy.int64) as Python numbers.
    if callable(getattr(value, "item", None)):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON data")


def _table_input(tables, samples, profile, batch_size):
    """(tables_json, tables_path, batch_size) for the extension."""
    if tables is None:
        if samples is not None or batch_size is not None:
            raise EmbshardError("tables is None (the built-in default workload): samples and "
                                "batch_size apply to tables of your own")
        return None, None, 0
    if isinstance(tables, (str, os.PathLike)):
        if samples is not None:
            raise EmbshardError(f"tables is a path ({os.fspath(tables)}): samples apply to "
                                "EmbeddingBagConfigs")
        return None, os.fspath(tables), batch_size or 0
    if isinstance(tables, Mapping):
        if "tables" not in tables:
            raise EmbshardError("tables: a dict must be a table-spec ({\"batch_size\": B, "
                                "\"tables\": [...]}); give a list for the tables alone")
        if samples is not None:
            raise EmbshardError("samples apply to EmbeddingBagConfigs, not to table-spec dicts")
        spec = dict(tables)
    elif isinstance(tables, (bytes, bytearray)) or not hasattr(tables, "__iter__"):
        raise EmbshardError(f"tables is {tables!r:.60}: expected a list of table dicts or of "
                            "EmbeddingBagConfigs, a table-spec dict, a path (str), or None")
    else:
        items = list(tables)
        configs = [_is_config(t) for t in items]
        if items and all(configs):
            if samples is None and batch_size is None:
                raise EmbshardError("batch_size: not given and no samples: the global batch "
                                    "the tables are looked up with (e.g. batch_size=4096)")
            spec = _bridge().table_specs(items, samples, profile, batch_size)
        elif any(configs):
            raise EmbshardError("tables: a mix of EmbeddingBagConfigs and table dicts")
        elif samples is not None:
            raise EmbshardError("samples apply to EmbeddingBagConfigs, not to table dicts")
        else:
            spec = {"tables": items}
    if batch_size is None and "batch_size" not in spec:
        raise EmbshardError("batch_size: not given: the global batch the tables are looked "
                            "up with (e.g. batch_size=4096)")
    spec.setdefault("profile", profile)
    try:
        text = json.dumps(spec, allow_nan=False, default=_scalar)
    except (TypeError, ValueError) as e:
        raise EmbshardError(f"tables: not JSON data ({e})") from None
    return text, None, batch_size or 0


def _bytes(value, what):
    """Bytes from a number of bytes (40e9 too) or a size such as "40GB"."""
    if isinstance(value, str):
        value = _native().parse_bytes(value, what)
    elif isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise EmbshardError(f"{what} is {value!r:.60}, expected bytes or a size such as "
                            "\"40GB\"")
    if value <= 0:
        raise EmbshardError(f"{what} is {value}: a device needs memory (None for the default)")
    if value > INT64_MAX:
        raise EmbshardError(f"{what} is {value} bytes, past the largest size ({INT64_MAX})")
    return value


def _reserve(reserve):
    """The reservation as the library reads it: a number of 1 or more is bytes
    (2e9), under 1 a share (0.15); a string as it is ("15%", "2GB")."""
    if isinstance(reserve, (int, float)) and not isinstance(reserve, bool) and reserve >= 1:
        return str(int(reserve))
    return str(reserve)


def _memory(mem_per_device, devices):
    """(mem_per_device_bytes, mem_bytes) for the extension."""
    if mem_per_device is None:
        return 0, []
    if isinstance(mem_per_device, (list, tuple)):
        sizes = [_bytes(m, f"mem_per_device[{i}]") for i, m in enumerate(mem_per_device)]
        if len(sizes) != devices:
            raise EmbshardError(f"mem_per_device lists {len(sizes)} sizes for {devices} devices")
        return 0, sizes
    return _bytes(mem_per_device, "mem_per_device"), []


def _type_list(sharding_types):
    # A comma-separated string, or a list of names or TorchRec ShardingTypes.
    if isinstance(sharding_types, str):
        return sharding_types
    if hasattr(sharding_types, "value"):  # one ShardingType
        sharding_types = [sharding_types]
    names = [getattr(t, "value", t) for t in _list(sharding_types, "sharding_types", ())]
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise EmbshardError(f"sharding_types[{i}] is {name!r:.60}, expected a sharding type")
    return ",".join(names)


@contextlib.contextmanager
def _plan_path(from_plan):
    """The path of the plan to re-plan from ("" for none): a Plan is written
    to a temporary file for the call."""
    if from_plan is None:
        yield ""
    elif isinstance(from_plan, (str, os.PathLike)):
        yield os.fspath(from_plan)
    elif isinstance(from_plan, Plan):
        with tempfile.TemporaryDirectory(prefix="embshard_from_") as folder:
            path = os.path.join(folder, "plan.json")
            from_plan.save(path)
            yield path
    else:
        raise EmbshardError(f"from_plan is a {type(from_plan).__name__}, expected a Plan or the "
                            "path of a plan file")


def plan(tables, devices=8, mem_per_device="40GB", batch_size=None, samples=None,
         algo="neuroshard", cost_model="neural", model=None, sharding_types=None, pins=None,
         no_split=None, split_dims=None, profile="2021", calibration=None, explain=True,
         from_plan=None, max_moves=None, reserve="15%", optimizer=None, task="training",
         devices_per_host=None, inter_host_gbps=None, inter_host_latency_us=0, **options):
    """Plans how to shard `tables` over `devices` devices; returns a Plan.

    tables: a list of table dicts in the table-spec format ({"name", "rows",
        "dim", "data_type"? (fp32, fp16, bf16; int8, int4 for inference), "pooling_factor"?,
        "unique_rows"?, "row_reuse_histogram"?, "lookup_reuse_histogram"?}; what a table leaves out comes from the
        published averages of `profile`); a whole table-spec dict
        ({"batch_size", "tables", "profile"?}); a path to a table-spec file or
        a workload folder; TorchRec EmbeddingBagConfigs (or objects or dicts
        with their fields: name, num_embeddings, embedding_dim, feature_names);
        or None for the built-in default workload (100 synthetic tables).
    devices: how many devices (ranks) to shard over.
    mem_per_device: each device's memory: bytes, or a size such as "40GB"
        or "512MiB"; a list gives each device its own; None assumes 1.25 x
        an even share of the tables for the tables (logged).
    reserve: of each given memory, what is kept for what is not an
        embedding table (dense parameters, activations, buffers): a share
        ("15%", TorchRec's default) or an amount ("2GB", 0).
    optimizer: whose state memory counts: "rowwise_adagrad" (None: the
        default), "sgd", "adam".
    task: the step planned: "training", or "inference" (the forward alone:
        weights only, "int8" and "int4" tables allowed; no optimizer).
    devices_per_host, inter_host_gbps, inter_host_latency_us: the devices'
        hosts (None: one host): devices on each host, in order, and each
        host's link to the others in GB/s each way (required with hosts) and
        its latency in us. The search and the report price the links.
    batch_size: the global batch the tables are looked up with (all ranks
        together). Required for table dicts and configs without samples;
        with samples it is theirs (a different one is an error).
    samples: with EmbeddingBagConfigs, one or more sample batches
        (KeyedJaggedTensors, or dicts {feature: (values, lengths)}): each
        table's pooling factor and reuse are measured on them.
    algo: the planner (embshard.planner_names()): "neuroshard" (the search),
        "torchrec", "greedy", ...
    cost_model: "neural" (the shipped pre-trained models; "analytic" where
        they are missing), "analytic", or "measured" (a workload folder only).
    model: a neural model directory or model set (e.g. <data>/models/h100);
        None: the shipped one. calibration: the analytic model's file.
    sharding_types: the TorchRec sharding types plans may use (a list or a
        comma-separated string; table_wise is required); None: all.
    pins: {table: device} (or a list of (table, device) pairs) keeps each
        named table whole on its device.
    no_split: tables kept whole (a list of names, or one name).
    split_dims: column widths splits may make (a list, or one width).
    explain: also work out each table's decision against its best
        alternative (Plan.explain()); False saves that time on big tasks.
    from_plan, max_moves: re-plan: start from this Plan (or plan file) and
        change at most `max_moves` of its tables (None: no limit), as
        `embshard plan --from --max-moves` does.
    options: the search's options: seed, beam_width, max_steps, candidates,
        grid_steps, scan_patience, screen_keep, step_patience, uncertainty,
        threads (0: one per hardware thread), policy (dreamshard, autoshard).

    Errors (a bad argument, a bad table field, an unknown algo, a table that
    cannot fit) raise EmbshardError naming what is at fault. Notes go to
    logging.getLogger("embshard") at INFO, progress at DEBUG. The search
    releases the GIL.
    """
    _integer(devices, "devices", 1, MAX_DEVICES)
    if batch_size is not None:
        _integer(batch_size, "batch_size", 1, INT64_MAX)
    tables_json, tables_path, batch = _table_input(tables, samples, profile, batch_size)
    each, sizes = _memory(mem_per_device, devices)
    if optimizer is not None and not isinstance(optimizer, str):
        raise EmbshardError(f"optimizer is {optimizer!r}, expected a name such as 'adam'")
    if not isinstance(task, str):
        raise EmbshardError(f"task is {task!r}, expected 'training' or 'inference'")
    per_host = 0 if devices_per_host is None else _integer(devices_per_host, "devices_per_host", 1,
                                                           MAX_DEVICES)
    link = {}
    for name, value in (("inter_host_gbps", inter_host_gbps),
                        ("inter_host_latency_us", inter_host_latency_us)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not value >= 0):
            raise EmbshardError(f"{name} is {value!r:.60}, expected a number >= 0")
        link[name] = float(value or 0)
    if 0 < per_host < devices and not link["inter_host_gbps"] > 0:
        raise EmbshardError(f"devices_per_host {per_host} puts {devices} devices on "
                            f"{-(-devices // per_host)} hosts: give inter_host_gbps (each host's "
                            "link to the others, GB/s)")
    if max_moves is not None:
        if from_plan is None:
            raise EmbshardError("max_moves needs from_plan (the plan to re-plan)")
        _integer(max_moves, "max_moves", 0, INT_MAX)
    with _plan_path(from_plan) as replan_from:
        plan_json, report, report_per_table, explanation = _native().plan(
            tables_json=tables_json, tables_path=tables_path, source="tables", profile=profile,
            batch_size=batch, devices=devices, mem_per_device_bytes=each, mem_bytes=sizes,
            algo=algo, cost_model=cost_model, model_dir=os.fspath(model) if model else "",
            calibration=os.fspath(calibration) if calibration else "",
            pins=_pins(pins), no_split=_table_names(no_split, "no_split"),
            sharding_types=_type_list(sharding_types), split_dims=_widths(split_dims),
            planner=_options(options), explain=bool(explain), replan_from=replan_from,
            max_moves=INT_MAX if max_moves is None else max_moves,
            reserve=_reserve(reserve), optimizer=optimizer or "", task=task,
            devices_per_host=per_host, log=_log, **link)
    return Plan(json.loads(plan_json), report, report_per_table, explanation if explain else None)


# ---- the plan ------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Shard:
    """One piece of a table on one device: rows [row_offset, row_offset +
    rows) x columns [col_offset, col_offset + cols). A data_parallel table
    has one replica (the whole table) on every device."""
    table: str
    device: int
    row_offset: int
    rows: int
    col_offset: int
    cols: int
    sharding_type: str
    replica: bool = False


@dataclasses.dataclass(frozen=True)
class Table:
    """A table's placement: TorchRec's sharding type and compute kernel, the
    ranks of its shards, and its bytes under the plan (weights and optimizer)."""
    name: str
    rows: int
    dim: int
    sharding_type: str
    compute_kernel: str
    ranks: tuple
    memory_bytes: int
    shards: tuple


@dataclasses.dataclass(frozen=True)
class Device:
    """A device's row of the report: its memory and predicted costs."""
    device: int
    capacity_bytes: int
    memory_bytes: int
    memory_fraction: float
    compute_ms: float
    fwd_comm_ms: float
    bwd_comm_ms: float
    total_ms: float
    num_shards: int
    dim_sum: float


def _table(name, t):
    if t["shards"] is None:  # data_parallel: a replica on each rank
        shards = tuple(Shard(name, r, 0, t["rows"], 0, t["dim"], t["sharding_type"], True)
                       for r in t["ranks"])
    else:
        shards = tuple(Shard(name, r, s["shard_offsets"][0], s["shard_sizes"][0],
                             s["shard_offsets"][1], s["shard_sizes"][1], t["sharding_type"])
                       for r, s in zip(t["ranks"], t["shards"]))
    return Table(name, t["rows"], t["dim"], t["sharding_type"], t["compute_kernel"],
                 tuple(t["ranks"]), t["memory_bytes"], shards)


class Plan:
    """A sharding plan with its predicted costs.

    Attributes: tables ({name: Table}, in the task's order), shards (every
    Shard), devices (a Device per device: the report's rows),
    predicted_cost_ms (the slowest device's predicted iteration),
    lower_bound_ms (no plan under this cost model is cheaper),
    critical_device, imbalance, gap, search_s, algorithm, cost_model,
    batch_size, num_devices, and json (the plan JSON as a dict, the format
    `embshard plan --out` writes)."""

    def __init__(self, plan_json, report=None, report_per_table=None, explanation=None):
        plan_file.check_plan(plan_json)
        self.json = plan_json
        self._report, self._report_per_table = report, report_per_table
        self._explanation = explanation
        order = plan_json.get("table_order", sorted(plan_json["tables"]))
        self.tables = {n: _table(n, plan_json["tables"][n]) for n in order}
        self.shards = [s for t in self.tables.values() for s in t.shards]
        p = plan_json["predicted"]
        capacity = plan_json.get("device_memory_bytes", [0] * len(p["devices"]))
        fields = [f.name for f in dataclasses.fields(Device)][2:]
        self.devices = [Device(d, capacity[d], **{f: dev[f] for f in fields})
                        for d, dev in enumerate(p["devices"])]
        self.predicted_cost_ms = p["cost_ms"]
        self.lower_bound_ms = p["lower_bound_ms"]
        self.critical_device = p["critical_device"]
        self.imbalance = p["imbalance"]
        self.gap = p["gap"]
        self.search_s = p["search_s"]
        self.algorithm = plan_json.get("algorithm")
        self.cost_model = plan_json.get("cost_model")
        self.batch_size = plan_json.get("batch_size")
        self.num_devices = plan_json["num_devices"]

    @classmethod
    def load(cls, path):
        """A plan file (`embshard plan --out`, Plan.save), checked as the
        library's reader checks it (EmbshardError naming the file and field).
        Its report() is a summary: the full report is the planner's."""
        return cls(plan_file.load_plan(os.fspath(path)))

    def report(self, per_table=False):
        """The report `embshard plan` prints: a row per device, the predicted
        cost, lower bound and what the cost model was measured on; with
        `per_table`, a row per table too."""
        text = self._report_per_table if per_table else self._report
        return text if text is not None else _bridge().predicted_summary(self.json) + "\n"

    def __str__(self):
        return self.report()

    def __repr__(self):
        return (f"<embshard.Plan {self.algorithm}: {len(self.tables)} tables on "
                f"{self.num_devices} devices, predicted {self.predicted_cost_ms:.3f} ms, "
                f"lower bound {self.lower_bound_ms:.3f} ms>")

    def explain(self):
        """Why: each table's decision (whole, split, replicated; where)
        against its best single alternative, both predicted as whole plans,
        largest saving first (`embshard plan --explain`)."""
        if self._explanation is None:
            raise EmbshardError("this plan has no explanation: plan with explain=True")
        return self._explanation

    def to_json(self, indent=1):
        """The plan JSON text (docs: the plan file format)."""
        return json.dumps(self.json, indent=indent) + "\n"

    def save(self, path):
        """Writes the plan JSON to `path` atomically (`embshard diff` and
        Plan.load read it)."""
        _bridge()._write_json_atomic(os.fspath(path), self.json)

    def to_torchrec(self, module_path=DEFAULT_MODULE_PATH, device_type="cuda",
                    local_world_size=None, as_dicts=False):
        """TorchRec's ShardingPlan ({module_path: EmbeddingModuleShardingPlan
        {table: ParameterSharding}}, the fields of TorchRec 1.9), for
        DistributedModelParallel(plan=...).

        module_path: where the EmbeddingBagCollection sits in the model, or
            {table: module_path} for tables of several collections.
        device_type: "cuda" or "cpu" (the placements' device; on a CPU,
            TorchRec's kernels are "fused" for a sharded table and "dense"
            for a data_parallel one).
        local_world_size: GPUs per host, when the ranks span hosts.
        A layout TorchRec cannot run (a table_row_wise or grid_shard table
        whose row blocks are not on one host's ranks in order, a fused shard
        whose columns are not a multiple of 4, a kernel with no CPU path) is
        an EmbshardError naming the table, its sharding type and why.
        Where torchrec does not import (or with as_dicts), the plan as it is,
        as plain dicts: {module_path: {table: {"sharding_type",
        "compute_kernel", "ranks", "shards": [{"shard_offsets", "shard_sizes",
        "placement"}] or None}}}; embshard.torchrec.check_torchrec_layout
        checks them."""
        return _bridge().sharding_plan(self.json, module_path, device_type, local_world_size,
                                       as_dicts)
