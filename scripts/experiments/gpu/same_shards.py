#!/usr/bin/env python3
"""Step time of the same shards in two bench compute files (the same pool
and seed, measured with two kernels): the median, p10, p90 and smallest
ratio NEW / OLD of the raw medians, over the shards that match table for
table. Usage: same_shards.py OLD.jsonl[.gz] NEW.jsonl[.gz]"""
import gzip
import json
import statistics
import sys


def records(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    key = lambda r: [(t["name"], t.get("rows"), t.get("dim"), t.get("row_offset")) for t in r["tables"]]
    return {r["sample"]: (key(r), r["raw_ms"]) for r in lines[1:]}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    old, new = records(sys.argv[1]), records(sys.argv[2])
    ratios = sorted(n[1] / old[s][1] for s, n in new.items() if s in old and old[s][0] == n[0])
    if not ratios:
        sys.exit(f"no shard of {sys.argv[2]} matches one of {sys.argv[1]}")
    print(f"{len(ratios)} of {len(new)} shards match: new / old median {statistics.median(ratios):.3f}, "
          f"p10 {ratios[len(ratios) // 10]:.3f}, p90 {ratios[len(ratios) * 9 // 10]:.3f}, "
          f"smallest {ratios[0]:.3f}")


if __name__ == "__main__":
    main()
