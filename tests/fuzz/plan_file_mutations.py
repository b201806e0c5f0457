#!/usr/bin/env python3
"""The Python plan reader (python/embshard/plan_file.py) under seeded random
mutation: the plan seeds of tests/fuzz/corpus/plan/, changed byte by byte and
field by field, each read back with load_plan. Returning a plan or raising
PlanError is a clean outcome; any other exception is a finding, written to
--findings and named, and the exit status is 1. The kept findings of
tests/fuzz/regressions/plan_py/ are read first.

Pure Python (no libFuzzer, no atheris): plan_file.py and _errors.py are
loaded on their own, so the package's extension need not be built.

  plan_file_mutations.py --repo DIR [--iterations N] [--seconds S] [--seed K]
"""

import argparse
import importlib
import json
import math
import os
import random
import sys
import tempfile
import time
import types


def load_reader(repo):
    package = types.ModuleType("embshard_plan_fuzz")
    package.__path__ = [os.path.join(repo, "python", "embshard")]
    sys.modules["embshard_plan_fuzz"] = package
    return importlib.import_module("embshard_plan_fuzz.plan_file")


ODD_VALUES = [None, True, False, 0, -1, 1, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1,
              0.5, -0.0, 1e308, 1e-320, math.inf, -math.inf, math.nan, "", "x", "rank:0/cuda:0",
              "rank:99999/cuda:0", "rank:-1/cpu", "row_wise", "data_parallel", "dense",
              "fused", "\udcff", [], {}, [0], [0, 0], [1, 1], [[0]], {"a": 1}]


DEEP = "@deep:{}@"  # stands for a nesting too deep to build as a Python value


def nodes(value):
    """Every (path, value) of a JSON tree, the root included."""
    stack = [((), value)]
    while stack:
        path, v = stack.pop()
        yield path, v
        if isinstance(v, dict):
            stack.extend((path + (k,), x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((path + (i,), x) for i, x in enumerate(v))


def replace(root, path, new):
    if not path:
        return new
    parent = root
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = new
    return root


def mutate_tree(rng, tree):
    tree = json.loads(json.dumps(tree))
    for _ in range(rng.randint(1, 3)):
        all_nodes = list(nodes(tree))
        path, value = rng.choice(all_nodes)
        choice = rng.randrange(8)
        if choice == 0 and path:  # drop the field or element
            parent = tree
            for key in path[:-1]:
                parent = parent[key]
            del parent[path[-1]]
        elif choice == 1:
            tree = replace(tree, path, rng.choice(ODD_VALUES))
        elif choice == 2 and isinstance(value, (int, float)) and not isinstance(value, bool):
            tree = replace(tree, path, value + rng.choice([-1, 1, -value - 1, value]))
        elif choice == 3 and isinstance(value, list) and value:
            value.append(json.loads(json.dumps(rng.choice(value))))
        elif choice == 4 and isinstance(value, dict):
            value[rng.choice(["format", "version", "tables", "shards", "ranks", "extra"])] = \
                rng.choice(ODD_VALUES)
        elif choice == 5:  # another node's value here
            tree = replace(tree, path, json.loads(json.dumps(rng.choice(all_nodes)[1])))
        elif choice == 6:
            tree = replace(tree, path, DEEP.format(rng.choice([10, 3000, 100000])))
        elif choice == 7 and isinstance(value, str):
            tree = replace(tree, path, value + rng.choice(["0", "/", ":", "\x00", "é"]))
    text = json.dumps(tree, allow_nan=True)
    for depth in (10, 3000, 100000):
        text = text.replace(json.dumps(DEEP.format(depth)), "[" * depth + "0" + "]" * depth)
    return text.encode("utf-8", "surrogatepass")


def mutate_bytes(rng, data):
    data = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(len(data) + 1)
        op = rng.randrange(4)
        if op == 0 and at < len(data):
            data[at] = rng.randrange(256)
        elif op == 1:
            data[at:at] = bytes([rng.choice(b'[]{}",:0123456789-.eE\\\n ')])
        elif op == 2 and at < len(data):
            del data[at:at + rng.randint(1, 16)]
        else:
            data[at:at] = rng.choice([b"NaN", b"Infinity", b"1e999", b"-0", b"\xff\xfe",
                                      b"[" * 5000, b"null", b"18446744073709551616",
                                      b"9" * 5000])
    return bytes(data)


def read_dir(path):
    if not os.path.isdir(path):
        return []
    return [os.path.join(path, f) for f in sorted(os.listdir(path)) if not f.startswith(".")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True)
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=0, help="stop after this long (0: none)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--findings", default=None, help="where findings are written")
    args = parser.parse_args()

    plan_file = load_reader(args.repo)
    fuzz_dir = os.path.join(args.repo, "tests", "fuzz")
    seeds = [open(p, "rb").read() for p in read_dir(os.path.join(fuzz_dir, "corpus", "plan"))]
    kept = [open(p, "rb").read() for p in read_dir(os.path.join(fuzz_dir, "regressions", "plan_py"))]
    if not seeds:
        print("plan_file_mutations: no seeds in tests/fuzz/corpus/plan", file=sys.stderr)
        return 1
    trees = [json.loads(s) for s in seeds]
    findings_dir = args.findings or tempfile.mkdtemp(prefix="plan_py_findings_")
    os.makedirs(findings_dir, exist_ok=True)
    rng = random.Random(args.seed)
    start = time.monotonic()
    outcomes = {"read": 0, "PlanError": 0}
    findings = []

    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "plan.json")
        inputs = iter(kept + seeds)
        for i in range(len(kept) + len(seeds) + args.iterations):
            if args.seconds and time.monotonic() - start > args.seconds:
                break
            data = next(inputs, None)
            if data is None:
                data = (mutate_tree(rng, rng.choice(trees)) if rng.random() < 0.7
                        else mutate_bytes(rng, rng.choice(seeds)))
            with open(path, "wb") as f:
                f.write(data)
            try:
                plan_file.load_plan(path)
                outcomes["read"] += 1
            except plan_file.PlanError:
                outcomes["PlanError"] += 1
            except Exception as e:  # noqa: BLE001: every other exception is the finding
                name = os.path.join(findings_dir, f"finding-{len(findings)}.json")
                with open(name, "wb") as f:
                    f.write(data)
                findings.append(f"{type(e).__name__}: {str(e)[:200]} (input: {name})")
    total = outcomes["read"] + outcomes["PlanError"] + len(findings)
    print(f"plan_file_mutations: {total} inputs in {time.monotonic() - start:.1f} s: "
          f"{outcomes['read']} read, {outcomes['PlanError']} refused with PlanError, "
          f"{len(findings)} findings")
    for f in findings[:20]:
        print("  FINDING", f)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
