#!/usr/bin/env python3
"""Rewrites a compute-costs file (bench compute --pieces) so that every row
block and replica slice carries its whole table's reuse histograms instead of
those measured on its own lookups: the features the planner gave pieces before
it measured them from the trace. `embshard validate` on both files shows what
measuring them is worth.

usage: inherit_histograms.py WORKLOAD_DIR IN.jsonl[.gz] OUT.jsonl
"""
import gzip
import json
import os
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip())
    workload, src, dst = sys.argv[1:]
    with open(f"{workload}/tables.json") as f:
        spec = json.load(f)
    tables = spec["tables"]
    opener = gzip.open if src.endswith(".gz") else open
    changed = 0
    with opener(src, "rt") as fin, open(dst + ".tmp", "w") as fout:
        for n, line in enumerate(fin):
            record = json.loads(line)
            for t in record.get("tables", []) if n > 0 else []:
                if "row_offset" not in t and "batch_slice" not in t:
                    continue
                whole = tables[t["table"]]
                if whole["name"] != t["name"]:
                    sys.exit(f"{src}: line {n + 1}: table {t['table']} is '{t['name']}', "
                             f"{workload}/tables.json has '{whole['name']}' there")
                for field in ("row_reuse_histogram", "lookup_reuse_histogram"):
                    t[field] = whole[field]
                changed += 1
            fout.write(json.dumps(record) + "\n")
    os.replace(dst + ".tmp", dst)
    print(f"{dst}: {changed} pieces given their table's histograms")


if __name__ == "__main__":
    main()
