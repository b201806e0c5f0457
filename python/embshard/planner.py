"""EmbshardPlanner: embshard in the place of TorchRec's EmbeddingShardingPlanner.

Follows the fields of TorchRec 1.9 (torchrec.distributed.planner, checked
against torchrec 1.9.2): Topology (world_size, compute_device,
local_world_size, devices[i].storage.hbm/.ddr), ParameterConstraints
(sharding_types, compute_kernels, pooling_factors and the kernel settings
ParameterSharding carries), EmbeddingBagCollection (embedding_bag_configs()),
its sharder (module_type, sharding_types(device), compute_kernels(type,
device)), ShardingPlan / EmbeddingModuleShardingPlan / ParameterSharding.
Everything is read through those attributes (duck-typed): torchrec is
imported only to build the ShardingPlan it returns.
"""

from collections.abc import Mapping

from ._errors import EmbshardError, warn_user
from ._torchrec_plan import CONSTRAINT_FIELDS, NODE_ALIGNED_TYPES, layout_problems, refusal
from .plan_file import SHARDING_TYPES
from .planning import MAX_DEVICES, _bridge, _native, _type_list, plan as plan_tables

# TorchRec's defaults (torchrec/distributed/planner/constants.py): the batch
# per rank, and the share of each device's HBM its HeuristicalStorageReservation
# keeps for everything but the embedding tables.
TORCHREC_BATCH_SIZE = 512
TORCHREC_RESERVED_FRACTION = 0.15
# A table spec's figures that hold for one batch size only: measured on fewer
# rows' lookups than the plan's batch, they would understate it.
PER_BATCH_FIELDS = ("unique_rows", "row_reuse_histogram", "lookup_reuse_histogram")
# TorchRec's fused optimizers (EmbOptimType values) by the state embshard
# counts for them.
FUSED_OPTIMIZERS = {"sgd": "sgd", "exact_sgd": "sgd", "row_wise_adagrad": "rowwise_adagrad",
                    "exact_row_wise_adagrad": "rowwise_adagrad", "adam": "adam"}


def _value(x):
    return getattr(x, "value", x)  # an enum (ShardingType.TABLE_WISE) or its string


def _get(obj, name, default=None):
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _storage_bytes(value, field):
    # TorchRec's Topology holds bytes as integers.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise EmbshardError(f"topology: {field} is {value!r:.60}, expected bytes (a positive "
                            "integer, as TorchRec's Topology holds them)")
    return value


def _topology_memory(topology, compute_device, world_size):
    """Each device's memory from a Topology: its devices' storage (hbm on a
    GPU, ddr on a CPU), else hbm_cap / ddr_cap."""
    kind = "ddr" if compute_device == "cpu" else "hbm"
    devices = _get(topology, "devices")
    if devices:
        if len(devices) != world_size:
            raise EmbshardError(f"topology: {len(devices)} devices for world_size {world_size}")
        return [_storage_bytes(_get(_get(d, "storage"), kind), f"devices[{i}].storage.{kind}")
                for i, d in enumerate(devices)]
    cap = _get(topology, f"{kind}_cap")
    if cap is None:
        raise EmbshardError(f"topology: no devices[i].storage nor {kind}_cap: give "
                            "mem_per_device=")
    return [_storage_bytes(cap, f"{kind}_cap")] * world_size


def _reserved(reserved_fraction, storage_reservation):
    """The share of each device's memory kept for all but the tables."""
    what = "reserved_fraction"
    if reserved_fraction is None:
        what = "storage_reservation._percentage"
        reserved_fraction = _get(storage_reservation, "_percentage", TORCHREC_RESERVED_FRACTION)
    if isinstance(reserved_fraction, bool) or not isinstance(reserved_fraction, (int, float)) \
            or not 0 <= reserved_fraction < 1:
        raise EmbshardError(f"{what} is {reserved_fraction!r:.60}, expected a share of memory "
                            "in [0, 1)")
    return reserved_fraction


def _inside(path, outer):
    # named_modules() paths: "" is the root, "a.b" is inside "a".
    return outer == "" or path == outer or path.startswith(outer + ".")


def _embedding_bag_modules(module):
    """[(path, module)] of the EmbeddingBagCollections in `module`, outermost
    first, none inside another (TorchRec shards those whole)."""
    named = module.named_modules() if callable(getattr(module, "named_modules", None)) \
        else [("", module)]
    found = []
    for path, m in named:
        if any(_inside(path, outer) for outer, _ in found):
            continue
        if callable(getattr(m, "embedding_bag_configs", None)):
            found.append((path, m))
        elif callable(getattr(m, "embedding_configs", None)):
            warn_user(f"module '{path}': an EmbeddingCollection (sequence embeddings) is not "
                      "planned by embshard; TorchRec's planner must place it", UserWarning)
    return found


class EmbshardPlanner:
    """A planner with the shape of TorchRec's EmbeddingShardingPlanner, so that
    a training script swaps its planner in one line:

        planner = EmbshardPlanner(topology=topology, batch_size=512, constraints=constraints)
        plan = planner.collective_plan(model, sharders, pg)

    topology: a torchrec Topology, or anything with world_size,
        compute_device, local_world_size and devices[i].storage.hbm (.ddr on
        a CPU); or give world_size= and mem_per_device= instead.
    batch_size: the batch per rank, as TorchRec's planner takes it (default
        512, TorchRec's); embshard plans for batch_size x world_size. With
        samples and no batch_size, it is the samples' batch.
    constraints: {table: ParameterConstraints}: sharding_types (a table
        allowed only table_wise is kept whole; the other tables' allowed
        types together bound the whole plan's, and a plan that breaks a
        table's constraint anyway is an EmbshardError), compute_kernels
        (the kernel embshard writes must be among them), pooling_factors
        (summed over the table's features: its pooling factor where no
        sample measured it), and cache_params, enforce_hbm,
        stochastic_rounding, bounds_check_mode, output_dtype and
        key_value_params, copied into the table's ParameterSharding as
        TorchRec's planner does. Other fields are not read.
    sharding_types: the types the plan may use (names or ShardingTypes).
        By default table_wise, column_wise, row_wise and data_parallel:
        table_row_wise and grid_shard are left out, as TorchRec runs them
        only with row blocks on one host's ranks in order, which embshard's
        search does not arrange; named here, a plan that uses them otherwise
        is refused.
    mem_per_device: each device's memory for the tables (bytes, "80GB", or a
        list); by default the topology's, less reserved_fraction (0.15, as
        TorchRec's default storage reservation keeps for dense parts).
    samples: per-rank sample batches (KeyedJaggedTensors, or embshard.plan's
        dicts): each world_size consecutive ones (rank 0's, rank 1's, ...)
        are one global batch, the plan's, on which pooling, unique rows and
        reuse are measured. Fewer than world_size make no global batch: only
        pooling factors are measured then (a SampleWarning says so).
    pins: {table: rank} (or (table, rank) pairs) keeps a table whole on a rank.
    A plan TorchRec cannot run (a type or kernel the sharders given do not
    offer for the compute device, a layout TorchRec's sharding code does not
    follow: embshard.torchrec.check_torchrec_layout) is never returned: an
    EmbshardError names each table, its sharding type and why.
    algo, cost_model, model, profile, explain and options (seed, threads, ...):
        as embshard.plan takes them.
    The arguments of TorchRec's planner that choose its own search
    (enumerator, proposer, partitioner, performance_model, stats, callbacks,
    timeout_seconds, plan_loader, debug) are accepted and not used.

    last_plan: the embshard Plan of the last plan() call (report(), explain()).
    """

    def __init__(self, topology=None, batch_size=None, enumerator=None, storage_reservation=None,
                 proposer=None, partitioner=None, performance_model=None, stats=None,
                 constraints=None, debug=True, callbacks=None, timeout_seconds=None,
                 plan_loader=None, *,
                 world_size=None, compute_device=None, local_world_size=None,
                 mem_per_device=None, reserved_fraction=None, samples=None, pins=None,
                 sharding_types=None, algo="neuroshard", cost_model="neural", model=None,
                 profile="2021", explain=False, **options):
        if topology is not None:
            world_size = world_size or _get(topology, "world_size")
            compute_device = compute_device or _get(topology, "compute_device")
            local_world_size = local_world_size or _get(topology, "local_world_size")
            # TorchRec's inter_host_bw: bytes/ms per device (a NIC each).
            self._inter_host_bw = _get(topology, "inter_host_bw")
        else:
            self._inter_host_bw = None
        if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
            raise EmbshardError(f"world_size is {world_size!r:.60}: give a topology or "
                                "world_size=")
        if world_size > MAX_DEVICES:
            raise EmbshardError(f"world_size is {world_size}, past the {MAX_DEVICES} devices "
                                "embshard plans for")
        self.world_size = world_size
        self.compute_device = compute_device or "cuda"
        self.local_world_size = local_world_size
        if mem_per_device is None:
            if topology is None:
                raise EmbshardError("mem_per_device: not given and no topology to read it from")
            kept = 1 - _reserved(reserved_fraction, storage_reservation)
            mem_per_device = [int(m * kept) for m in
                              _topology_memory(topology, self.compute_device, world_size)]
        self.mem_per_device = mem_per_device
        if batch_size is not None and (isinstance(batch_size, bool)
                                       or not isinstance(batch_size, int) or batch_size < 1):
            raise EmbshardError(f"batch_size is {batch_size!r:.60}, expected the batch per "
                                "rank (a positive integer)")
        self.batch_size = batch_size
        if constraints is not None and not isinstance(constraints, Mapping):
            raise EmbshardError(f"constraints is {constraints!r:.60}, expected {{table: "
                                "ParameterConstraints}")
        self.constraints = dict(constraints or {})
        self.samples = samples
        self.pins = pins
        self.sharding_types = None if sharding_types is None else \
            [t.strip() for t in _type_list(sharding_types).split(",") if t.strip()]
        unknown = sorted(set(self.sharding_types or []) - SHARDING_TYPES)
        if unknown:
            raise EmbshardError(f"sharding_types: unknown {unknown}; TorchRec's are "
                                f"{sorted(SHARDING_TYPES)}")
        self.algo, self.cost_model, self.model, self.profile = algo, cost_model, model, profile
        self.explain = explain
        self.options = options
        self.last_plan = None

    def _hosts(self):
        """The hosts TorchRec's topology gives: local_world_size devices each,
        joined by their NICs (inter_host_bw each); none on one host."""
        per_host = self.local_world_size
        if not per_host or per_host >= self.world_size or not self._inter_host_bw:
            return {}
        return {"devices_per_host": per_host,
                "inter_host_gbps": self._inter_host_bw * per_host / 1e6}

    # ---- what the plan is made from ----

    def _tables(self, module):
        """The configs of every EmbeddingBagCollection and each table's module path."""
        configs, paths = [], {}
        for path, ebc in _embedding_bag_modules(module):
            for config in ebc.embedding_bag_configs():
                name = _get(config, "name")
                if name in paths:
                    raise EmbshardError(f"table '{name}' is in modules '{paths[name]}' and "
                                        f"'{path}': table names must be unique to plan them")
                paths[name] = path
                configs.append(config)
        if not configs:
            raise EmbshardError("module: no EmbeddingBagCollection (a module with "
                                "embedding_bag_configs()) holds a table")
        return configs, paths

    def _specs(self, configs):
        """The table-spec dict and the batch embshard plans for (all ranks)."""
        bridge = _bridge()
        batches = bridge._sample_batches(self.samples)
        if len(batches) >= self.world_size:
            specs = bridge.table_specs(configs, batches, self.profile, ranks=self.world_size)
            per_rank = specs["batch_size"] // self.world_size
            if self.batch_size not in (None, per_rank):
                raise EmbshardError(
                    f"batch_size is {self.batch_size} per rank, but the sample batches hold "
                    f"{per_rank} samples each: unique rows and reuse measured on them hold for "
                    "their batch only; give batch_size=None or samples of that size")
        else:
            specs = bridge.table_specs(configs, batches or None, self.profile)
            per_rank = specs["batch_size"] if batches else TORCHREC_BATCH_SIZE
            if batches:
                self._keep_pooling_only(specs, len(batches))
        for t in specs["tables"]:
            pooling = _get(self.constraints.get(t["name"]), "pooling_factors")
            if "pooling_factor" not in t and pooling:
                t["pooling_factor"] = float(sum(pooling))
        return specs, (self.batch_size or per_rank) * self.world_size

    def _keep_pooling_only(self, specs, num_batches):
        """Fewer sample batches than ranks make no global batch: the pooling
        factor (per sample) holds, the per-batch figures do not."""
        for t in specs["tables"]:
            for field in PER_BATCH_FIELDS:
                t.pop(field, None)
        warn_user(f"samples: {num_batches} sample batches for {self.world_size} ranks: the plan's "
                  f"batch is one batch of each rank, so unique rows and reuse measured on fewer "
                  f"would understate it; only pooling factors are measured, the rest comes from "
                  f"profile {self.profile} (give {self.world_size} batches, one per rank, or a "
                  "multiple, to measure them)", _bridge().SampleWarning)

    def _sharders(self, sharders):
        """The sharders of EmbeddingBagCollections among `sharders` (those
        naming no module_type count too)."""
        out = []
        for s in sharders or []:
            module_type = getattr(s, "module_type", None)
            if module_type is None or getattr(module_type, "__name__", "") == \
                    "EmbeddingBagCollection":
                out.append(s)
        return out

    def _optimizer(self, sharders):
        """Whose state memory counts: the sharders' fused optimizer (TorchRec's
        EmbOptimType, in fused_params), row-wise Adagrad where none says."""
        for s in sharders:
            fused = getattr(s, "fused_params", None) or {}
            chosen = fused.get("optimizer") if isinstance(fused, Mapping) else None
            if chosen is None:
                continue
            name = str(getattr(chosen, "value", chosen)).lower()
            if name in FUSED_OPTIMIZERS:
                return FUSED_OPTIMIZERS[name]
            warn_user(f"the sharders' optimizer {name!r}: embshard counts the state of "
                      f"{', '.join(sorted(set(FUSED_OPTIMIZERS)))}; planned with row-wise "
                      "Adagrad's (one fp32 a row)", UserWarning)
        return "rowwise_adagrad"

    def _offered(self, sharders):
        """The sharding types the sharders offer on the compute device (None:
        no sharder says)."""
        offered = None
        for s in sharders:
            if callable(getattr(s, "sharding_types", None)):
                offered = (offered or set()) | \
                    {_value(t) for t in s.sharding_types(self.compute_device)}
        return offered

    def _types(self, sharders):
        """(global sharding types, tables kept whole, {table: allowed types})."""
        names = list(_native().sharding_type_names())
        if self.sharding_types is None:
            allowed = set(names) - set(NODE_ALIGNED_TYPES)
        else:
            allowed = set(self.sharding_types)
        offered = self._offered(sharders)
        if offered is not None:
            allowed &= offered
        whole, per_table = [], {}
        for name, c in self.constraints.items():
            types = _get(c, "sharding_types")
            if types is None:
                continue
            types = {_value(t) for t in types}
            per_table[name] = types
            if offered is not None and not types & (offered | {"table_wise"}):
                raise EmbshardError(
                    f"constraints: table '{name}' allows {sorted(types)}, none of which the "
                    f"sharders given offer on {self.compute_device} ({sorted(offered)})")
            if types == {"table_wise"}:
                whole.append(name)
            else:
                allowed &= types | {"table_wise"}
        return [t for t in names if t in allowed or t == "table_wise"], whole, per_table

    def _offered_kernels(self, sharders, kind):
        """The compute kernels the sharders offer for a sharding type on the
        compute device (None: no sharder says)."""
        offered = None
        for s in sharders:
            if callable(getattr(s, "compute_kernels", None)):
                offered = (offered or set()) | \
                    {_value(k) for k in s.compute_kernels(kind, self.compute_device)}
        return offered

    def _problems(self, plan, sharders):
        """[(table, type, why)] of each table the plan cannot hand TorchRec."""
        problems = []
        offered = self._offered(sharders)
        for name, t in plan.tables.items():
            kind, kernel = t.sharding_type, t.compute_kernel
            kernels = _get(self.constraints.get(name), "compute_kernels")
            if kernels is not None and kernel not in {_value(k) for k in kernels}:
                problems.append((name, kind, f"compute kernel '{kernel}' (embshard's) is not "
                                 f"among its constraint's {sorted(_value(k) for k in kernels)}"))
            if offered is not None and kind not in offered:
                problems.append((name, kind, f"the sharders given offer {sorted(offered)} on "
                                 f"{self.compute_device}"))
                continue
            kernels = self._offered_kernels(sharders, kind)
            if kernels is not None and kernel not in kernels:
                problems.append((name, kind, f"the sharders given offer the kernels "
                                 f"{sorted(kernels)} for it on {self.compute_device}, not "
                                 f"'{kernel}' (embshard's)"))
        return problems + layout_problems(plan.json, self.compute_device, self.local_world_size)

    def _fields(self, names):
        """{table: {ParameterSharding field: value}} from the constraints."""
        out = {}
        for name in names:
            c = self.constraints.get(name)
            fields = {f: _get(c, f) for f in CONSTRAINT_FIELDS if _get(c, f) is not None}
            if fields:
                out[name] = fields
        return out

    # ---- TorchRec's planner interface ----

    def plan(self, module, sharders=None):
        """Plans every table of the module's EmbeddingBagCollections; returns
        TorchRec's ShardingPlan ({module path: {table: ParameterSharding}}),
        or, where torchrec does not import, the same as dicts."""
        configs, paths = self._tables(module)
        specs, global_batch = self._specs(configs)
        ebc_sharders = self._sharders(sharders)
        types, whole, per_table = self._types(ebc_sharders)
        whole = [name for name in whole if name in paths]
        unknown = sorted(set(self.constraints) - set(paths))
        if unknown:
            warn_user(f"constraints name tables no module holds: {unknown}", UserWarning)
        # mem_per_device is already what the tables may use (reserved_fraction).
        plan = plan_tables(specs, devices=self.world_size, mem_per_device=self.mem_per_device,
                           reserve=0, optimizer=self._optimizer(ebc_sharders),
                           batch_size=global_batch, algo=self.algo, cost_model=self.cost_model,
                           model=self.model, sharding_types=types, pins=self.pins,
                           no_split=whole, profile=self.profile, explain=self.explain,
                           **self._hosts(), **self.options)
        self.last_plan = plan  # refused or not: its report says what was planned
        for name, allowed in per_table.items():
            t = plan.tables.get(name)
            if t is not None and t.sharding_type not in allowed:
                raise EmbshardError(
                    f"constraints: table '{name}' allows {sorted(allowed)} but was planned "
                    f"{t.sharding_type}: embshard keeps a table whole (table_wise only) or bounds "
                    "the whole plan's types; restrict the others' types too")
        problems = self._problems(plan, ebc_sharders)
        if problems:
            raise refusal(problems, f"the plan for {self.world_size} {self.compute_device} ranks "
                                    "cannot be handed to TorchRec")
        return _bridge().sharding_plan(plan.json, paths, self.compute_device,
                                       self.local_world_size, fields=self._fields(paths),
                                       check=True)

    def collective_plan(self, module, sharders=None, pg=None):
        """plan() on rank 0 of `pg` and broadcast to the others, as TorchRec's
        planner does (ranks' sample batches may differ). pg None: the default
        process group where torch.distributed is initialized, else plan()
        here alone."""
        if pg is None:
            try:
                import torch.distributed as dist
                if dist.is_available() and dist.is_initialized():
                    pg = dist.GroupMember.WORLD
            except ImportError:
                pass
        if pg is None or pg.size() <= 1:
            return self.plan(module, sharders)
        import torch.distributed as dist
        objects = [self.plan(module, sharders) if pg.rank() == 0 else None]
        dist.broadcast_object_list(objects, 0, group=pg)
        return objects[0]
