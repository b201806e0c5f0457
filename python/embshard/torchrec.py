"""The bridge to TorchRec (the fields and layouts of TorchRec 1.9, checked
against torchrec 1.9.2): table specs from a model's ``EmbeddingBagConfig``s and
sample ``KeyedJaggedTensor``s, and a plan file (``embshard plan --out
plan.json``) back into TorchRec's sharding plan, for
``DistributedModelParallel(module, plan=...)``. ``embshard.plan`` and
``embshard.EmbshardPlanner`` call it; it is also usable alone:

    import embshard.torchrec as et
    plan = et.load_plan("plan.json")
    sharding_plan = et.to_torchrec_plan(plan, module_path="sparse_arch.embedding_bag_collection",
                                        device_type="cpu")
    model = DistributedModelParallel(model, plan=sharding_plan, ...)

A plan whose layout TorchRec cannot run (a table_row_wise table off its host's
ranks, a shard too narrow for the fused kernel, a kernel with no CPU path) is
refused there with an EmbshardError naming the table, its sharding type and
why; ``check_torchrec_layout`` checks a plan alone.

TorchRec is imported only by the functions that build TorchRec objects. Without
it, ``to_parameter_sharding_dicts`` gives the same content as plain dicts (the
plan as it is, what a process without TorchRec can ship elsewhere).

The way in goes the other direction: from a model's ``EmbeddingBagConfig``s and
a few sample ``KeyedJaggedTensor`` batches to embshard's table-spec JSON, for
``embshard plan --tables FILE``:

    specs = et.write_table_specs("tables.json", ebc.embedding_bag_configs(), samples=[kjt0, kjt1])

or from the command line:

    python3 -m embshard.torchrec tables --configs configs.json --samples b.pt -o tables.json

Neither needs TorchRec or torch: configs and batches are read through the
attributes they share with TorchRec's classes, and tensors through ``tolist()``;
torch is imported only to read ``.pt`` sample files.
"""

import argparse
import collections
import json
import os
import sys
import tempfile
import warnings
from collections.abc import Mapping

from ._errors import EmbshardError, warn_user
from .plan_file import (  # noqa: F401 (re-exported: et.load_plan, ...)
    PLACEMENT, PLAN_FORMAT, PLAN_VERSION, SHARDING_TYPES, PlanError, check_plan, load_plan,
)
from ._torchrec_plan import (  # noqa: F401 (re-exported: the hand-off)
    check_torchrec_layout, sharding_plan, to_parameter_sharding_dicts, to_parameter_shardings,
    to_torchrec_plan, torchrec_row_blocks,
)


def predicted_summary(plan):
    """One line per device: the figures embshard predicted."""
    p = plan["predicted"]
    lines = [f"cost {p['cost_ms']:.3f} ms (device {p['critical_device']}), "
             f"lower bound {p['lower_bound_ms']:.3f} ms"]
    for d, dev in enumerate(p["devices"]):
        lines.append(f"device {d}: {dev['total_ms']:.3f} ms, {dev['memory_bytes'] / 1e9:.3f} GB, "
                     f"{dev['num_shards']} shards")
    return "\n".join(lines)


# ---- the way in: a TorchRec model's tables -> embshard's table-spec JSON ----
#
# The figures follow embshard's own statistics code (src/workload/stats.cpp),
# so that a spec measured here and a trace inspected there agree exactly.

REUSE_BINS = 17
# The named profiles embshard ships (published_profiles() in
# include/embshard/workload/stats.h); checked here so a typo fails before planning.
PROFILES = ("2021", "2022")
DEFAULT_BATCH_SIZE = 4096
MAX_DIM = 1024  # table_from_json's limit (src/workload/workload.cpp)


class TableSpecError(EmbshardError):
    """A config or sample batch cannot be turned into a table spec. The message
    names the table, feature, batch or field and the offending value."""


class SampleWarning(UserWarning):
    """Samples that were ignored, or tables that fell back to the profile."""


def reuse_bin(count):
    """The reuse bin of a row read `count` (>= 1) times in one batch: 0 for one
    read, k for (2^(k-1), 2^k], 16 beyond 32768 (reuse_bin() in table.cpp)."""
    if count <= 1:
        return 0
    # (2^(k-1), 2^k] is exactly the counts whose count - 1 has bit length k.
    return min((count - 1).bit_length(), REUSE_BINS - 1)


def _as_list(x):
    # torch tensors and numpy arrays give Python ints through tolist(), which is
    # also far faster to count than iterating over tensor elements.
    return x.tolist() if hasattr(x, "tolist") else list(x)


def _field(obj, name, where):
    # TorchRec's configs are dataclasses; the command line's are JSON objects.
    if isinstance(obj, Mapping):
        if name not in obj:
            raise TableSpecError(f"{where}: missing field '{name}'")
        return obj[name]
    if not hasattr(obj, name):
        raise TableSpecError(f"{where}: no attribute '{name}'")
    return getattr(obj, name)


def _positive_int(value, what, upper=None):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0 or \
            (upper is not None and value > upper):
        bound = f"1..{upper}" if upper else "a positive integer"
        raise TableSpecError(f"{what} is {value!r}, must be {bound}")
    return value


def _table_config(config, where):
    """{name, rows, dim, features} of one EmbeddingBagConfig-shaped object."""
    name = _field(config, "name", where)
    if not isinstance(name, str) or not name:
        raise TableSpecError(f"{where}: name is {name!r}, expected a non-empty string")
    where = f"{where} (table '{name}')"
    rows = _positive_int(_field(config, "num_embeddings", where), f"{where}: num_embeddings")
    dim = _positive_int(_field(config, "embedding_dim", where), f"{where}: embedding_dim", MAX_DIM)
    features = _field(config, "feature_names", where)
    features = [features] if isinstance(features, str) else list(features)
    # A table without features is never looked up through an EmbeddingBagCollection.
    if not features or not all(isinstance(f, str) and f for f in features):
        raise TableSpecError(f"{where}: feature_names is {features!r}, expected non-empty names")
    if len(set(features)) != len(features):
        raise TableSpecError(f"{where}: feature_names {features!r} repeat a name")
    return {"name": name, "rows": rows, "dim": dim, "features": features,
            "data_type": _data_type(config, where)}


# The data types embshard plans (TorchRec's DataType members, lower case).
DATA_TYPES = ("fp32", "fp16", "bf16", "int8", "int4")


def _data_type(config, where):
    """A config's data_type (TorchRec's DataType, its name or value; FP32 when
    the config has none) as embshard's name; refused when embshard has no
    kernel for it (INT2, ...)."""
    value = config.get("data_type", "fp32") if isinstance(config, Mapping) else \
        getattr(config, "data_type", "fp32")
    name = getattr(value, "value", value)  # an enum member: its value ("FP16")
    if not isinstance(name, str):
        raise TableSpecError(f"{where}: data_type is {value!r}, expected one of "
                             f"{', '.join(DATA_TYPES)}")
    key = name.rsplit(".", 1)[-1].lower()
    if key not in DATA_TYPES:
        raise TableSpecError(f"{where}: data_type {name!r} is not supported (embshard plans "
                             f"{', '.join(DATA_TYPES)})")
    return key


def _table_configs(configs):
    tables = [_table_config(c, f"configs[{i}]") for i, c in enumerate(configs)]
    if not tables:
        raise TableSpecError("configs: no tables")
    seen = set()
    for t in tables:
        if t["name"] in seen:
            raise TableSpecError(f"configs: table name '{t['name']}' appears twice")
        seen.add(t["name"])
    return tables


def _check_lengths(lengths, stride, where):
    """Lengths must give every sample of the batch a bag of >= 0 indices."""
    if len(lengths) != stride:
        raise TableSpecError(f"{where}: {len(lengths)} lengths for a batch of {stride}")
    for b, n in enumerate(lengths):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise TableSpecError(f"{where}: lengths[{b}] is {n!r}, must be an integer >= 0")


def _check_covered(n_lengths, n_values, where):
    if n_lengths != n_values:
        raise TableSpecError(f"{where}: lengths sum to {n_lengths} but there are "
                             f"{n_values} values")


def _is_kjt(batch):
    return all(callable(getattr(batch, a, None)) for a in ("keys", "values", "lengths", "stride"))


def _kjt_features(kjt, where):
    """{feature: values} of a KeyedJaggedTensor-shaped batch, and its stride."""
    keys = list(kjt.keys())
    values = _as_list(kjt.values())
    lengths = _as_list(kjt.lengths())
    stride = int(kjt.stride())
    if len(set(keys)) != len(keys):
        raise TableSpecError(f"{where}: keys {keys} repeat a feature")
    # Lengths are key-major: all samples of key 0, then of key 1, ...; a
    # variable batch per feature would break that layout.
    if len(lengths) != len(keys) * stride:
        raise TableSpecError(f"{where}: {len(lengths)} lengths for {len(keys)} keys x "
                             f"stride {stride} (variable batch per feature is not supported)")
    features, start = {}, 0
    for k, key in enumerate(keys):
        key_lengths = lengths[k * stride:(k + 1) * stride]
        _check_lengths(key_lengths, stride, f"{where}: feature '{key}'")
        n = sum(key_lengths)
        features[key] = values[start:start + n]
        start += n
    _check_covered(start, len(values), where)
    return stride, features


def _mapping_features(batch, where):
    """{feature: values} of {feature: (values, lengths)} or {feature: JaggedTensor}."""
    pairs = {}
    for key, v in batch.items():
        if callable(getattr(v, "values", None)) and callable(getattr(v, "lengths", None)):
            pairs[key] = (_as_list(v.values()), _as_list(v.lengths()))
        elif isinstance(v, (tuple, list)) and len(v) == 2:
            pairs[key] = (_as_list(v[0]), _as_list(v[1]))
        else:
            raise TableSpecError(f"{where}: feature '{key}' is {type(v).__name__}, expected "
                                 "(values, lengths) or a JaggedTensor")
    strides = {len(lengths) for _, lengths in pairs.values()}
    if len(strides) > 1:
        raise TableSpecError(f"{where}: features have different batch sizes {sorted(strides)}")
    stride = strides.pop() if strides else 0
    for key, (values, lengths) in pairs.items():
        _check_lengths(lengths, stride, f"{where}: feature '{key}'")
        _check_covered(sum(lengths), len(values), f"{where}: feature '{key}'")
    return stride, {key: values for key, (values, _) in pairs.items()}


def _batch_features(batch, where):
    if isinstance(batch, Mapping):
        stride, features = _mapping_features(batch, where)
    elif _is_kjt(batch):
        stride, features = _kjt_features(batch, where)
    else:
        raise TableSpecError(f"{where}: a {type(batch).__name__}, expected a KeyedJaggedTensor "
                             "or a dict {feature: (values, lengths)}")
    if stride <= 0:
        raise TableSpecError(f"{where}: batch size is {stride}, must be positive")
    return stride, features


def _row_counts(values, table, feature, where):
    """Reads per row of one feature's indices; checks them against the table."""
    counts = collections.Counter(values)
    # Checking the distinct rows, with C-speed type, min and max scans, keeps
    # the check cheap; the slow search runs only to name a bad index.
    ok = not counts or (set(map(type, counts)) == {int} and min(counts) >= 0 and
                        max(counts) < table["rows"])
    if not ok:
        what = f"{where}: table '{table['name']}' feature '{feature}': index"
        bad = next(i for i in counts if type(i) is not int or not 0 <= i < table["rows"])
        if type(bad) is not int:
            raise TableSpecError(f"{what} {bad!r} is a {type(bad).__name__}, not an integer")
        raise TableSpecError(f"{what} {bad} outside [0, {table['rows']}) (num_embeddings)")
    return counts


def batch_stats(counts, batch_size):
    """One batch's figures from {row: reads}: lookups, distinct rows, and the
    distinct rows and lookups per reuse bin (TableStats in stats.h)."""
    rows_per_bin = [0] * REUSE_BINS
    lookups_per_bin = [0] * REUSE_BINS
    for reads in counts.values():
        b = reuse_bin(reads)
        rows_per_bin[b] += 1
        lookups_per_bin[b] += reads
    return {"batch_size": batch_size, "num_indices": sum(lookups_per_bin),
            "unique_rows": len(counts), "rows_per_bin": rows_per_bin,
            "lookups_per_bin": lookups_per_bin}


def _shares(counts):
    total = sum(counts)
    return [c / total if total else 0.0 for c in counts]


def _mean(values):
    return sum(values) / len(values)


def _averaged_fields(stats):
    """The measured fields of a table spec from its batches' stats.

    Pooling factor and unique rows are means over the batches; each histogram
    is the mean of the batches' shares, over the batches that read the table
    (a batch without lookups has no shares, and averaging its zeros in would
    leave a histogram that no longer sums to 1)."""
    read = [s for s in stats if s["num_indices"] > 0]
    row_shares = [_shares(s["rows_per_bin"]) for s in read]
    lookup_shares = [_shares(s["lookups_per_bin"]) for s in read]
    return {
        "pooling_factor": _mean([s["num_indices"] / s["batch_size"] for s in stats]),
        # table_from_json wants an integer; a mean of counts <= rows stays <= rows.
        "unique_rows": int(round(_mean([s["unique_rows"] for s in stats]))),
        "row_reuse_histogram": [_mean(col) for col in zip(*row_shares)] if read
        else [0.0] * REUSE_BINS,
        "lookup_reuse_histogram": [_mean(col) for col in zip(*lookup_shares)] if read
        else [0.0] * REUSE_BINS,
    }


def _sample_batches(samples):
    # One batch (a KJT or a dict) or a sequence of them.
    if samples is None:
        return []
    if isinstance(samples, Mapping) or _is_kjt(samples):
        return [samples]
    if isinstance(samples, (str, bytes)) or not hasattr(samples, "__iter__"):
        raise TableSpecError(f"samples is {samples!r:.60}: expected a KeyedJaggedTensor, a dict "
                             "{feature: (values, lengths)}, or a list of them")
    return list(samples)


def _names(names, limit=20):
    names = sorted(names)
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return "[" + ", ".join(repr(n) for n in names[:limit]) + more + "]"


def _rank_batches(batches, known):
    """(stride, {feature: values}) of each batch, every one of which must name
    some feature of the configs (a batch that names none is not this model's:
    measured, it would send every table to the profile)."""
    for i, batch in enumerate(batches):
        stride, features = _batch_features(batch, f"samples[{i}]")
        if not known & set(features):
            raise TableSpecError(f"samples[{i}]: its keys {_names(features)} name no feature of "
                                 f"the configs (their features: {_names(known)})")
        yield stride, features


def _global_batches(batches, ranks):
    """(where, stride, {feature: values}) of each global batch: `ranks`
    consecutive per-rank batches together (each batch alone where ranks is
    1). A feature missing from one rank's batch is missing from the whole."""
    group = []
    for i, (stride, features) in enumerate(batches):
        if group and stride != group[0][0]:
            raise TableSpecError(f"samples[{i}]: batch size (stride) {stride}, expected "
                                 f"{group[0][0]} (every rank's batch has the same size)")
        group.append((stride, features))
        if len(group) < ranks:
            continue
        common = [f for f in features if all(f in rank for _, rank in group)]
        yield (f"samples[{i}]" if ranks == 1 else f"samples[{i + 1 - ranks}:{i + 1}]",
               stride * ranks, {f: [v for _, rank in group for v in rank[f]] for f in common})
        group = []


def _measure(tables, batches, batch_size, ranks):
    """Per-table batch stats; the tables that must fall back (and why); the
    features no table names; and the batch size the samples imply."""
    by_feature = {f for t in tables for f in t["features"]}
    stats = {t["name"]: [] for t in tables}
    fallback, unknown = {}, set()
    for where, stride, features in _global_batches(_rank_batches(batches, by_feature), ranks):
        if batch_size is None:
            batch_size = stride
        elif stride != batch_size:
            raise TableSpecError(f"{where}: batch size (stride) {stride}, expected {batch_size} "
                                 "(every batch, and batch_size if given, must agree: unique "
                                 "rows and reuse depend on it)")
        unknown |= set(features) - by_feature
        for t in tables:
            if t["name"] in fallback:
                continue
            missing = [f for f in t["features"] if f not in features]
            if missing:
                # Part of a table's lookups would understate its pooling and reuse.
                fallback[t["name"]] = f"feature '{missing[0]}' missing from {where}"
                continue
            counts = collections.Counter()
            for f in t["features"]:
                counts.update(_row_counts(features[f], t, f, where))
            stats[t["name"]].append(batch_stats(counts, stride))
    return stats, fallback, unknown, batch_size


def table_specs(configs, samples=None, profile="2021", batch_size=None, ranks=1):
    """embshard's table-spec dict for `configs` (EmbeddingBagConfig-shaped:
    name, num_embeddings, embedding_dim, feature_names; objects or dicts).

    `samples`: None, one batch or a list of batches, each a KeyedJaggedTensor
    (or anything with its keys/values/lengths/stride) or a dict
    {feature: (values, lengths)} / {feature: JaggedTensor}; tensors, numpy
    arrays or lists. A table's lookups in a batch are those of all its features,
    so its pooling factor is its total lookups / batch size (embshard models one
    pooled output per table). Tables with a feature missing from any batch,
    and all tables without samples, keep only name, rows and dim: embshard fills
    the rest from `profile`'s published averages. They are listed under
    "from_profile". Features no config names are ignored with a SampleWarning.

    The batch size is the samples' stride (every batch the same); without
    samples it is `batch_size` (default 4096).

    `ranks`: the samples are per-rank batches, and each `ranks` consecutive
    ones make one global batch (their lookups together): unique rows and
    reuse are those of the global batch, as a plan for all ranks needs them.
    Batches after the last whole group are left out (SampleWarning)."""
    if profile not in PROFILES:
        raise TableSpecError(f"profile is {profile!r}, expected one of "
                             f"{', '.join(repr(p) for p in PROFILES)}")
    if batch_size is not None:
        _positive_int(batch_size, "batch_size")
    _positive_int(ranks, "ranks")
    tables = _table_configs(configs)
    batches = _sample_batches(samples)
    if batches and len(batches) < ranks:
        raise TableSpecError(f"samples: {len(batches)} batches for {ranks} ranks: a global "
                             "batch is one batch of each rank")
    stats, fallback, unknown, batch_size = _measure(tables, batches, batch_size, ranks)
    if len(batches) % ranks:
        warn_user(f"samples: the last {len(batches) % ranks} of {len(batches)} batches make no "
                  f"whole global batch of {ranks} ranks; ignored", SampleWarning)
    if unknown:
        warn_user(f"samples: features {sorted(unknown)} are named by no config; ignored",
                  SampleWarning)
    if batches and fallback:
        why = ", ".join(f"'{n}' ({r})" for n, r in fallback.items())
        warn_user(f"tables fall back to profile {profile}: {why}", SampleWarning)
    out_tables, from_profile = [], []
    for t in tables:
        spec = {"name": t["name"], "rows": t["rows"], "dim": t["dim"],
                "data_type": t["data_type"]}
        if batches and t["name"] not in fallback:
            spec.update(_averaged_fields(stats[t["name"]]))
        else:
            from_profile.append(t["name"])
        out_tables.append(spec)
    return {
        "batch_size": batch_size if batch_size is not None else DEFAULT_BATCH_SIZE,
        "profile": profile,
        # Provenance for people; embshard plan reads only batch_size, profile, tables.
        "source": f"embshard.torchrec: {len(tables)} tables, {len(batches)} sample batches",
        "from_profile": from_profile,
        "tables": out_tables,
    }


def _write_json_atomic(path, obj):
    # A crash or a full disk never leaves a half-written spec behind for plan.
    # A link's target is replaced (not the link); a device or pipe such as
    # /dev/null is written into, never replaced by a regular file.
    path = os.path.realpath(path) if os.path.islink(path) else path
    if os.path.exists(path) and not os.path.isfile(path):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1)
            f.write("\n")
        return
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".")
    except OSError as e:
        raise OSError(e.errno, f"cannot write {path}: {e.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_table_specs(path, configs, samples=None, profile="2021", batch_size=None):
    """table_specs(...) written to `path` atomically; returns the dict."""
    specs = table_specs(configs, samples, profile, batch_size)
    _write_json_atomic(path, specs)
    return specs


# ---- command line -------------------------------------------------------------

def _read_json(path):
    with open(path, "r", encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as e:
            # json's own message names the line and column, not the file.
            raise TableSpecError(f"{path}: not valid JSON ({e})") from None


def _load_samples_file(path):
    """Batches in a file: a dict {feature: (values, lengths)} or a list of them;
    .json as lists, anything else torch.save'd tensors (needs torch)."""
    if path.endswith(".json"):
        obj = _read_json(path)
    else:
        try:
            import torch
        except ImportError as e:
            raise TableSpecError(f"{path}: reading a torch.save'd file needs torch ({e})")
        try:
            # Tensors, dicts, lists and tuples only: no code runs from the file.
            obj = torch.load(path, map_location="cpu", weights_only=True)
        except TypeError:  # a torch older than 1.13 has no weights_only
            obj = torch.load(path, map_location="cpu")
    batches = [obj] if isinstance(obj, Mapping) else list(obj)
    for i, b in enumerate(batches):
        if not isinstance(b, Mapping):
            raise TableSpecError(f"{path}: batch {i} is a {type(b).__name__}, expected a dict "
                                 "{feature: (values, lengths)}")
    return batches


def _tables_command(args):
    configs = _read_json(args.configs)
    if not isinstance(configs, list):
        raise TableSpecError(f"{args.configs}: expected a list of table configs")
    batches = [b for path in args.samples for b in _load_samples_file(path)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SampleWarning)
        specs = write_table_specs(args.out, configs, batches or None, args.profile,
                                  args.batch_size)
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    measured = len(specs["tables"]) - len(specs["from_profile"])
    print(f"wrote {args.out}: {len(specs['tables'])} tables, batch {specs['batch_size']}, "
          f"{measured} measured from {len(batches)} sample batches")
    if specs["from_profile"]:
        print(f"from profile {specs['profile']}: {', '.join(specs['from_profile'])}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m embshard.torchrec",
                                     description="TorchRec model tables to embshard's table specs")
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("tables", help="write a table-spec JSON for embshard plan --tables")
    t.add_argument("--configs", required=True,
                   help="JSON list of {name, num_embeddings, embedding_dim, feature_names}")
    t.add_argument("--samples", nargs="*", default=[],
                   help="batch files: torch.save'd (or .json) dict {feature: (values, lengths)} "
                        "or a list of them")
    t.add_argument("--profile", default="2021", help="fallback profile (2021, 2022)")
    t.add_argument("--batch-size", type=int, default=None,
                   help="batch size without samples (default 4096); with samples, must match")
    t.add_argument("-o", "--out", required=True, help="table-spec JSON to write")
    args = parser.parse_args(argv)
    try:
        return _tables_command(args)
    except (TableSpecError, OSError, json.JSONDecodeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
