#!/usr/bin/env python3
"""Where a plan's predicted and measured costs part: compute or exchanges.

Reads the per-device iteration traces `embshard eval --trace-dir` writes
(task<i>_<algorithm>.json): one directory from a run with --predict-only,
one or more from measured runs of the same tasks (several: each device's
figures are their mean); or one measured directory alone, whose traces
carry the model's prediction of each plan beside the measurement. For
every algorithm, the mean over tasks of the iteration's critical path as
the models charge it,

    max over devices (compute + backward exchange) + max over devices (forward exchange),

with compute and exchanges each taken predicted or measured, and each
figure's ratio to the algorithm named by --against. Last, a floor of the
measured plan: its devices' measured compute spread evenly over them, plus
the least backward and forward exchange a device had, and its ratio to
--against's measured critical path. A placement of the same pieces cannot
do much better than its floor (fused costs move a little with what is fused
together), so a target below it needs other pieces, or cheaper exchanges.

usage: python3 -m embshard.breakdown [--algos A,B,...] [--against ALGO] [PREDICTED_DIR] MEASURED_DIR...
"""
import argparse
import json
import os
import re
import sys

TRACE = re.compile(r"^task(\d+)_(.+)\.json$")
COMBINATIONS = [
    ("predicted compute, predicted exchanges", "p", "p"),
    ("measured compute, predicted exchanges", "m", "p"),
    ("predicted compute, measured exchanges", "p", "m"),
    ("both measured", "m", "m"),
]
FLOOR = "measured, compute spread evenly (floor)"


class BreakdownError(Exception):
    pass


def device_parts(path, pid=0):
    """{device: [compute, forward, backward] ms} from one trace file: its own
    figures (pid 0), or a measured trace's prediction of them (pid 1)."""
    try:
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BreakdownError(f"{path}: not an embshard iteration trace ({e})")
    parts = {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X" or e.get("pid", 0) != pid:
            continue
        try:
            device, ms, name = int(e["tid"]), float(e["dur"]) / 1000, e["name"]
        except (KeyError, TypeError, ValueError):
            raise BreakdownError(f"{path}: an event without tid, dur or name: {e}")
        p = parts.setdefault(device, [0.0, 0.0, 0.0])
        if e.get("cat") == "compute":
            p[0] += ms
        elif name == "forward all-to-all":
            p[1] += ms
        elif name == "backward all-to-all":
            p[2] += ms
    if not parts:
        raise BreakdownError(f"{path}: no device in the trace" if pid == 0 else
                             f"{path}: no predicted figures beside the measured ones (a trace "
                             "from before they were written): give a --predict-only run's "
                             "directory first")
    return parts


def mean_parts(paths):
    runs = [device_parts(p) for p in paths]
    devices = sorted(runs[0])
    for path, run in zip(paths[1:], runs[1:]):
        if sorted(run) != devices:
            raise BreakdownError(f"{path}: devices {sorted(run)}, but {paths[0]} has {devices}")
    return {d: [sum(r[d][k] for r in runs) / len(runs) for k in range(3)] for d in devices}


def critical_path(compute_from, comm_from):
    return max(compute_from[d][0] + comm_from[d][2] for d in compute_from) + max(
        comm_from[d][1] for d in comm_from)


def floor(parts):
    """The plan's measured compute spread evenly, plus its least exchanges."""
    n = len(parts)
    return (sum(p[0] for p in parts.values()) / n + min(p[2] for p in parts.values())
            + min(p[1] for p in parts.values()))


def breakdown(predicted_dir, measured_dirs, algos=None):
    """{algorithm: {combination label: mean ms over tasks}} and the task count per
    algorithm; `algos`: only these (None: every one with a predicted trace).
    `predicted_dir` None: the first measured directory's predicted figures."""
    plans = {}
    listed = predicted_dir if predicted_dir is not None else measured_dirs[0]
    for name in sorted(os.listdir(listed)):
        m = TRACE.match(name)
        if m and (algos is None or m.group(2) in algos):
            plans.setdefault(m.group(2), []).append(name)
    for algo in algos or []:
        if algo not in plans:
            raise BreakdownError(f"{listed}: no trace of algorithm '{algo}'")
    if not plans:
        raise BreakdownError(f"{listed}: no task<i>_<algorithm>.json trace")
    result, tasks = {}, {}
    for algo, names in plans.items():
        sums = {label: 0.0 for label in [c[0] for c in COMBINATIONS] + [FLOOR]}
        for name in names:
            measured = [os.path.join(d, name) for d in measured_dirs]
            for path in measured:
                if not os.path.exists(path):
                    raise BreakdownError(f"{path}: missing (the predicted run has {name})")
            predicted = (device_parts(os.path.join(predicted_dir, name)) if predicted_dir is not None
                         else device_parts(measured[0], pid=1))
            parts = {"p": predicted, "m": mean_parts(measured)}
            if sorted(parts["p"]) != sorted(parts["m"]):
                raise BreakdownError(f"{name}: the predicted and measured traces have other devices")
            for label, compute, comm in COMBINATIONS:
                sums[label] += critical_path(parts[compute], parts[comm])
            sums[FLOOR] += floor(parts["m"])
        result[algo] = {label: s / len(names) for label, s in sums.items()}
        tasks[algo] = len(names)
    return result, tasks


def report(result, tasks, against):
    algos = sorted(result)
    if against is not None and against not in result:
        raise BreakdownError(f"--against {against}: no such algorithm among {', '.join(algos)}")
    lines = []
    for algo in algos:
        lines.append(f"{algo} ({tasks[algo]} tasks), mean critical path ms"
                     + (f" and x {against}" if against else ""))
        for label in [c[0] for c in COMBINATIONS] + [FLOOR]:
            ms = result[algo][label]
            # A floor is compared with what the other plan measured.
            to = result[against]["both measured" if label == FLOOR else label] if against else 0
            ratio = f"  {ms / to:.3f}" if against else ""
            lines.append(f"  {label:<40} {ms:8.3f}{ratio}")
    return "\n".join(lines) + "\n"


def main(argv):
    parser = argparse.ArgumentParser(prog="python3 -m embshard.breakdown",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--algos", help="comma-separated: only these algorithms")
    parser.add_argument("--against", help="algorithm the ratios are taken to")
    parser.add_argument("dirs", nargs="+", metavar="[PREDICTED_DIR] MEASURED_DIR")
    args = parser.parse_args(argv)
    try:
        algos = args.algos.split(",") if args.algos else None
        predicted_dir, measured_dirs = (None, args.dirs) if len(args.dirs) == 1 else (
            args.dirs[0], args.dirs[1:])
        result, tasks = breakdown(predicted_dir, measured_dirs, algos)
        sys.stdout.write(report(result, tasks, args.against))
    except (BreakdownError, OSError) as e:
        sys.stderr.write(f"embshard.breakdown: error: {e}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
