#!/usr/bin/env python3
"""Two `bench comm` files of the same placements (same --seed and --samples),
compared three ways: raw, normalized as measured (each placement by its own
probe), and normalized by the probe's median over a window of placements
(this one and the W before it, in the file's order), recomputed here from the
records' figures and `probe_ms`. For the forward and the backward: median and
mean |a - b| / mean(a, b) % over every placement and rank, and the shift of
the set's median from the first file to the second.

Usage: scripts/probe_window.py A.jsonl[.gz] B.jsonl[.gz] [--windows 10,40,150]
(docs/interleaved_timing.md, "A wider reference exchange").
"""
import argparse
import gzip
import json
import statistics


def records(path):
    try:
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        lines = (gzip.open if gz else open)(path, "rt").read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise SystemExit(f"{path}: cannot be read: {e}")
    out = []
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise SystemExit(f"{path}: line {n} is not JSON: {e}")
    if not out:
        raise SystemExit(f"{path}: no records (a bench comm file: a header line, then one record per line)")
    for r in out:
        for field in ("fwd_ms", "bwd_ms", "raw_fwd_ms", "raw_bwd_ms", "probe_ms"):
            if not isinstance(r.get(field), list) or not r[field]:
                raise SystemExit(f"{path}: sample {r.get('sample')} has no {field} list")
    return out


def windowed(recs, field, window):
    out = []
    for i, r in enumerate(recs):
        lo = max(0, i - window)
        out.append([v * r["probe_ms"][k] / statistics.median(x["probe_ms"][k] for x in recs[lo:i + 1])
                    for k, v in enumerate(r[field])])
    return out


def compare(a, b):
    d = [abs(x - y) / ((x + y) / 2) * 100 for ra, rb in zip(a, b) for x, y in zip(ra, rb)]
    shift = (statistics.median(x for r in a for x in r) /
             statistics.median(x for r in b for x in r) - 1) * 100
    return f"{statistics.median(d):5.1f} / {statistics.mean(d):5.1f}   {shift:+6.1f}%"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--windows", default="10,40,150")
    o = p.parse_args()
    a, b = records(o.a), records(o.b)
    try:
        windows = [int(w) for w in o.windows.split(",")]
    except ValueError:
        raise SystemExit(f"--windows {o.windows}: not a list of whole numbers")
    if any(w < 0 for w in windows):
        raise SystemExit(f"--windows {o.windows}: a window is at least 0 placements")
    if [r.get("sample") for r in a] != [r.get("sample") for r in b]:
        raise SystemExit(f"{o.a} and {o.b} do not hold the same samples")
    print(f"{len(a)} placements, {o.a} against {o.b}: median / mean % apart, shift of the median")
    for field in ("fwd_ms", "bwd_ms"):
        print(f"{field[:3]}  per placement  {compare([r[field] for r in a], [r[field] for r in b])}")
        print(f"{field[:3]}  raw            {compare([r['raw_' + field] for r in a], [r['raw_' + field] for r in b])}")
        for w in windows:
            print(f"{field[:3]}  window {w:<7} {compare(windowed(a, field, w), windowed(b, field, w))}")


if __name__ == "__main__":
    main()
