"""FBGEMM's CPU table-batched embedding, timed beside embshard's kernels.

`embshard bench kernel` (src/bench/fbgemm_peer.cpp) runs this module under
the Python that imports fbgemm_gpu and drives it in lock step with its own
kernels, so that both see the same state of a shared machine:

    python -m embshard.fbgemm_peer serve DIR

DIR holds:
  peer.json         {"format": "embshard-fbgemm-peer", "version": 1,
                     "threads": N, "flush_bytes": BYTES}
  commands, replies two FIFOs: one JSON object a line each way
  NAME.json         a case: {"batch_size": B, "pooling": "sum"|"mean",
                     "tables": [{"rows": R, "dim": D, "num_indices": N}, ...],
                     "sgd_learning_rate": LR, "adagrad_learning_rate": LR,
                     "adagrad_eps": EPS}
  NAME.weights.f32  every table's rows, row-major, tables in order (float32)
  NAME.offsets.i64  per table its B + 1 offsets, first 0 (int64)
  NAME.indices.i64  per table its indices, tables in order (int64)
  NAME.grad.f32     the output's gradient, [B, sum of dims] (float32)
(little endian). Commands, each answered by {"ok": true, ...} or, after
which the module exits, {"ok": false, "error": MESSAGE}:
  {"op": "load", "case": NAME}             build the case's modules
  {"op": "forward_output", "path": P}      one untimed forward, output to P
  {"op": "train_rows", "optimizer": "sgd"|"rowwise_adagrad",
   "rows_path": P, "path": Q}              P holds (table, row) int64 pairs;
                                           writes those rows before, then after
                                           one untimed training step, to Q
  {"op": "time", "what": "forward"|"train_sgd"|"train_rowwise_adagrad"}
                                           evicts the caches, times one call:
                                           {"ok": true, "ms": MS}
  {"op": "quit"}

FBGEMM runs as TorchRec runs it on a CPU: SplitTableBatchedEmbeddingBagsCodegen
with EmbeddingLocation.HOST and ComputeDevice.CPU, fp32 weights and output,
the optimizer fused into the backward (EXACT_SGD, EXACT_ROWWISE_ADAGRAD: the
updates of embshard's tbe.h), its default bounds check, called through the
module's forward. The two optimizers' modules share one weight buffer, on
transparent huge pages like embshard's.

Pure Python, torch and fbgemm_gpu: never embshard's compiled extension.
"""
import gc
import json
import os
import sys
import time

# Torch's CPU allocator puts large tensors on transparent huge pages only
# when asked before it allocates; embshard's weights are on them (HugeBuffer).
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

FORMAT = "embshard-fbgemm-peer"
VERSION = 1
OPTIMIZERS = ("sgd", "rowwise_adagrad")
TIMED = ("forward", "train_sgd", "train_rowwise_adagrad")


class PeerError(Exception):
    """Bad input: the message names the file, the field and the value."""


def _field(obj, key, kind, where, low=None):
    if not isinstance(obj, dict) or key not in obj:
        raise PeerError(f"{where}: no field '{key}'")
    value = obj[key]
    ok = isinstance(value, kind) and not isinstance(value, bool)
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok:
        raise PeerError(f"{where}: '{key}' is {value!r}, not a {kind.__name__}")
    if low is not None and value < low:
        raise PeerError(f"{where}: '{key}' is {value!r}, below {low}")
    return value


def _read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise PeerError(f"{path}: cannot read: {e.strerror}")
    except ValueError as e:
        raise PeerError(f"{path}: not JSON: {e}")


def read_settings(folder):
    path = os.path.join(folder, "peer.json")
    s = _read_json(path)
    if not isinstance(s, dict) or s.get("format") != FORMAT:
        raise PeerError(f"{path}: 'format' is {s.get('format') if isinstance(s, dict) else s!r},"
                        f" not '{FORMAT}'")
    if s.get("version") != VERSION:
        raise PeerError(f"{path}: 'version' is {s.get('version')!r}; this module reads {VERSION}")
    return {"threads": _field(s, "threads", int, path, 1),
            "flush_bytes": _field(s, "flush_bytes", int, path, 0)}


def _read_array(torch, path, dtype, count, into=None):
    """`count` elements of `dtype` from `path`, which must hold exactly that many."""
    size = torch.tensor([], dtype=dtype).element_size()
    try:
        actual = os.path.getsize(path)
    except OSError as e:
        raise PeerError(f"{path}: cannot read: {e.strerror}")
    if actual != count * size:
        raise PeerError(f"{path}: {actual} bytes, expected {count * size} "
                        f"({count} x {size}-byte values)")
    out = into if into is not None else torch.empty(count, dtype=dtype)
    with open(path, "rb") as f:
        view = memoryview(out.numpy()).cast("B")
        if f.readinto(view) != actual:
            raise PeerError(f"{path}: short read")
    return out


def read_case(torch, folder, name):
    """The case NAME: its description and tensors, every field checked."""
    path = os.path.join(folder, name + ".json")
    c = _read_json(path)
    batch = _field(c, "batch_size", int, path, 1)
    pooling = c.get("pooling")
    if pooling not in ("sum", "mean"):
        raise PeerError(f"{path}: 'pooling' is {pooling!r}, not 'sum' or 'mean'")
    tables = c.get("tables")
    if not isinstance(tables, list) or not tables:
        raise PeerError(f"{path}: 'tables' is {tables!r}, not a non-empty list")
    shapes = []
    for i, t in enumerate(tables):
        where = f"{path}: tables[{i}]"
        rows = _field(t, "rows", int, where, 1)
        dim = _field(t, "dim", int, where, 1)
        if dim > 1024:
            raise PeerError(f"{where}: 'dim' is {dim}, above 1024")
        shapes.append((rows, dim, _field(t, "num_indices", int, where, 0)))
    case = {"name": name, "batch_size": batch, "pooling": pooling, "shapes": shapes,
            "sgd_lr": _field(c, "sgd_learning_rate", float, path),
            "adagrad_lr": _field(c, "adagrad_learning_rate", float, path),
            "adagrad_eps": _field(c, "adagrad_eps", float, path)}
    base = os.path.join(folder, name)
    num_indices = sum(n for _, _, n in shapes)
    total_dim = sum(d for _, d, _ in shapes)
    offsets = _read_array(torch, base + ".offsets.i64", torch.int64, len(shapes) * (batch + 1))
    indices = _read_array(torch, base + ".indices.i64", torch.int64, num_indices)
    case["offsets"], case["indices"] = _combined_offsets(torch, base, shapes, batch, offsets,
                                                         indices)
    case["grad"] = _read_array(torch, base + ".grad.f32", torch.float32,
                               batch * total_dim).view(batch, total_dim)
    case["weights_path"] = base + ".weights.f32"
    case["num_weights"] = sum(r * d for r, d, _ in shapes)
    return case


def _combined_offsets(torch, base, shapes, batch, offsets, indices):
    """FBGEMM's [T x B + 1] offsets into the tables' concatenated indices,
    after checking each table's own offsets and indices."""
    offsets = offsets.view(len(shapes), batch + 1)
    combined, start = [], 0
    for t, (rows, _, count) in enumerate(shapes):
        own = offsets[t]
        where = f"{base}.offsets.i64: table {t}"
        if own[0].item() != 0:
            raise PeerError(f"{where}: first offset {own[0].item()}, not 0")
        if own[-1].item() != count:
            raise PeerError(f"{where}: last offset {own[-1].item()}, not its num_indices {count}")
        steps = own[1:] - own[:-1]
        if bool((steps < 0).any()):
            b = int((steps < 0).nonzero()[0])
            raise PeerError(f"{where}: offsets decrease at bag {b}: {own[b].item()} then "
                            f"{own[b + 1].item()}")
        mine = indices[start:start + count]
        bad = (mine < 0) | (mine >= rows)
        if bool(bad.any()):
            k = int(bad.nonzero()[0])
            raise PeerError(f"{base}.indices.i64: table {t} index {k} is {mine[k].item()}, "
                            f"outside [0, {rows})")
        combined.append(own[:-1] + start)
        start += count
    combined.append(torch.tensor([start], dtype=torch.int64))
    return torch.cat(combined), indices


class Peer:
    """One case's FBGEMM modules (SGD and row-wise Adagrad over shared weights)."""

    def __init__(self, torch, settings):
        self.torch = torch
        torch.set_num_threads(settings["threads"])
        # Read and written before every timed call, as embshard's CacheFlusher
        # does: no call finds the previous one's rows in cache.
        self.flush_buffer = torch.zeros(max(settings["flush_bytes"], 1), dtype=torch.uint8)
        self.case = self.modules = self.weights = None

    def load(self, folder, name):
        torch = self.torch
        from fbgemm_gpu.split_embedding_configs import EmbOptimType, SparseType
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
            EmbeddingLocation, PoolingMode)
        from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
            ComputeDevice, SplitTableBatchedEmbeddingBagsCodegen)

        self.case = self.modules = self.weights = None  # the last case's memory back first
        gc.collect()
        case = read_case(torch, folder, name)
        weights = _read_array(torch, case["weights_path"], torch.float32, case["num_weights"])
        specs = [(rows, dim, EmbeddingLocation.HOST, ComputeDevice.CPU)
                 for rows, dim, _ in case["shapes"]]
        common = dict(weights_precision=SparseType.FP32, output_dtype=SparseType.FP32,
                      pooling_mode=PoolingMode.SUM if case["pooling"] == "sum"
                      else PoolingMode.MEAN,
                      device=torch.device("cpu"), preallocated_host_buffers={"weights": weights})
        self.modules = {
            "sgd": SplitTableBatchedEmbeddingBagsCodegen(
                specs, optimizer=EmbOptimType.EXACT_SGD, learning_rate=case["sgd_lr"], **common),
            "rowwise_adagrad": SplitTableBatchedEmbeddingBagsCodegen(
                specs, optimizer=EmbOptimType.EXACT_ROWWISE_ADAGRAD,
                learning_rate=case["adagrad_lr"], eps=case["adagrad_eps"], **common),
        }
        for m in self.modules.values():
            if m.weights_host.data_ptr() != weights.data_ptr():
                raise PeerError("fbgemm_gpu copied the preallocated weights: the modules "
                                "would train different copies")
        self.weights = weights
        self.case = case
        return {"huge_page_bytes": _huge_page_bytes()}

    def _need_case(self):
        if self.case is None:
            raise PeerError("no case loaded: 'load' comes first")
        return self.case

    def forward(self):
        c = self._need_case()
        with self.torch.no_grad():
            return self.modules["sgd"](c["indices"], c["offsets"])

    def train(self, optimizer):
        c = self._need_case()
        out = self.modules[optimizer](c["indices"], c["offsets"])
        out.backward(c["grad"])  # the fused optimizer updates the weights here

    def rows(self, pairs):
        """The weights' rows at (table, row) pairs, concatenated."""
        shapes = self._need_case()["shapes"]
        starts, start = [], 0
        for rows, dim, _ in shapes:
            starts.append(start)
            start += rows * dim
        parts = []
        for k, (t, r) in enumerate(pairs):
            if not 0 <= t < len(shapes) or not 0 <= r < shapes[t][0]:
                raise PeerError(f"rows_path: pair {k} is table {t} row {r}, not in the case")
            dim = shapes[t][1]
            parts.append(self.weights[starts[t] + r * dim:starts[t] + (r + 1) * dim].clone())
        return self.torch.cat(parts) if parts else self.torch.empty(0)

    def time_ms(self, what):
        self.flush_buffer.add_(1)
        call = {"forward": self.forward, "train_sgd": lambda: self.train("sgd"),
                "train_rowwise_adagrad": lambda: self.train("rowwise_adagrad")}[what]
        start = time.perf_counter()
        call()
        return (time.perf_counter() - start) * 1e3


def _huge_page_bytes():
    """This process's anonymous memory on transparent huge pages (Linux)."""
    try:
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                if line.startswith("AnonHugePages:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _write(tensor, path):
    with open(path, "wb") as f:
        f.write(memoryview(tensor.contiguous().numpy()).cast("B"))


def handle(peer, folder, command):
    """One command's reply (a dict); raises PeerError on bad input."""
    op = command.get("op") if isinstance(command, dict) else None
    if op == "load":
        name = command.get("case")
        if not isinstance(name, str) or not name or "/" in name:
            raise PeerError(f"load: 'case' is {name!r}, not a case name")
        return peer.load(folder, name)
    if op == "forward_output":
        _write(peer.forward(), _path(command, "path"))
        return {}
    if op == "train_rows":
        optimizer = command.get("optimizer")
        if optimizer not in OPTIMIZERS:
            raise PeerError(f"train_rows: 'optimizer' is {optimizer!r}, not one of {OPTIMIZERS}")
        raw = _read_pairs(peer.torch, _path(command, "rows_path"))
        before = peer.rows(raw)
        peer.train(optimizer)
        _write(peer.torch.cat([before, peer.rows(raw)]), _path(command, "path"))
        return {}
    if op == "time":
        what = command.get("what")
        if what not in TIMED:
            raise PeerError(f"time: 'what' is {what!r}, not one of {TIMED}")
        return {"ms": peer.time_ms(what)}
    raise PeerError(f"unknown command {command!r}")


def _path(command, key):
    value = command.get(key)
    if not isinstance(value, str) or not value:
        raise PeerError(f"{command.get('op')}: '{key}' is {value!r}, not a path")
    return value


def _read_pairs(torch, path):
    """(table, row) pairs from a file of int64 pairs."""
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise PeerError(f"{path}: cannot read: {e.strerror}")
    if size % 16 != 0:
        raise PeerError(f"{path}: {size} bytes, not a whole number of (table, row) int64 pairs")
    count = size // 16
    return [tuple(p) for p in _read_array(torch, path, torch.int64, 2 * count)
            .view(count, 2).tolist()]


def serve(folder):
    """Answers commands from FOLDER/commands on FOLDER/replies until 'quit'."""
    settings = read_settings(folder)
    try:
        import torch
        import fbgemm_gpu  # registers torch.ops.fbgemm
    except ImportError as e:
        raise PeerError(f"{sys.executable} cannot import torch and fbgemm_gpu ({e}); "
                        "scripts/install_torchrec.sh makes a Python that can")

    peer = Peer(torch, settings)
    with open(os.path.join(folder, "replies"), "w") as replies, \
            open(os.path.join(folder, "commands")) as commands:
        def reply(obj):
            replies.write(json.dumps(obj) + "\n")
            replies.flush()

        reply({"ok": True, "ready": True, "torch": torch.__version__,
               "fbgemm_gpu": getattr(fbgemm_gpu, "__version__", "unknown"),
               "threads": torch.get_num_threads()})
        gc.disable()  # no collector pause inside a timed call; collected at each load
        for line in commands:
            try:
                try:
                    command = json.loads(line)
                except ValueError as e:
                    raise PeerError(f"commands: not JSON: {line.strip()!r} ({e})")
                if isinstance(command, dict) and command.get("op") == "quit":
                    reply({"ok": True})
                    return
                reply({"ok": True, **handle(peer, folder, command)})
            except Exception as e:
                # Said on the reply too, so that the benchmark names it; the
                # traceback of anything but bad input goes to the log.
                reply({"ok": False, "error": str(e) if isinstance(e, PeerError)
                       else f"{type(e).__name__}: {e}"})
                raise
    # The other end closed without 'quit': the benchmark is gone.


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != "serve":
        print("usage: python -m embshard.fbgemm_peer serve DIR", file=sys.stderr)
        return 2
    try:
        serve(argv[1])
    except PeerError as e:
        print(f"embshard.fbgemm_peer: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
