#!/usr/bin/env python3
"""Fails on an #include against embshard's layer order (docs/architecture.md).

A file of a layer may include the public headers (include/embshard/<layer>/)
of its own layer and of the layers below it, and the private headers
(src/<layer>/) of its own layer only. Run from anywhere:
    check_layers.py [--repo DIR]          check the tree; exit 1 on a violation
    check_layers.py --self-test           plant a wrong include in a copy; expect it caught
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Lowest first. tools/ (the CLI) and python/ (the extension) sit on top.
LAYERS = ["util", "workload", "kernel", "measure", "cost", "plan", "search", "bench", "eval",
          "tools", "python"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of_file(rel):
    """The layer of a source file, by its directory; None outside the layers."""
    parts = rel.split("/")
    if parts[0] == "include" and len(parts) > 2 and parts[1] == "embshard":
        return parts[2] if parts[2] in LAYERS else None
    if parts[0] == "src" and len(parts) > 1:
        return parts[1] if parts[1] in LAYERS else None
    if parts[0] in ("tools", "python"):
        return parts[0]
    return None


def target_of_include(repo, rel, included):
    """(layer, private) of an included header, None for one outside the layers."""
    if included.startswith("embshard/"):
        parts = included.split("/")
        return (parts[1], False) if len(parts) > 2 and parts[1] in LAYERS else None
    # Relative to the including file, or to src/ (the private include root).
    for base in (os.path.dirname(rel), "src"):
        candidate = os.path.normpath(os.path.join(base, included))
        if os.path.exists(os.path.join(repo, candidate)):
            layer = layer_of_file(candidate)
            if layer is None:
                return None
            return (layer, candidate.startswith("src/"))
    return None


def violations(repo):
    found = []
    for top in ("include", "src", "tools", "python/src"):
        for root, _, files in os.walk(os.path.join(repo, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cpp", ".cu", ".cuh")):
                    continue
                rel = os.path.relpath(os.path.join(root, name), repo)
                layer = layer_of_file(rel)
                if layer is None:
                    continue
                with open(os.path.join(repo, rel), encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = target_of_include(repo, rel, m.group(1))
                        if target is None:
                            continue
                        to, private = target
                        if LAYERS.index(to) > LAYERS.index(layer):
                            found.append(f"{rel}:{number}: {layer} includes \"{m.group(1)}\" of "
                                         f"{to}, a layer above it")
                        elif private and to != layer:
                            found.append(f"{rel}:{number}: {layer} includes \"{m.group(1)}\", "
                                         f"a private header of {to}")
    return found


def self_test(repo):
    """A copy of the tree with `cost` including `search` must fail the check."""
    with tempfile.TemporaryDirectory() as tmp:
        for top in ("include", "src", "tools", "python"):
            shutil.copytree(os.path.join(repo, top), os.path.join(tmp, top),
                            ignore=shutil.ignore_patterns("*.so", "__pycache__", "build*"))
        planted = os.path.join(tmp, "src", "cost", "registry.cpp")
        with open(planted, "a", encoding="utf-8") as f:
            f.write('#include "embshard/search/planner.h"\n')
        out = subprocess.run([sys.executable, __file__, "--repo", tmp], capture_output=True,
                             text=True)
        if out.returncode != 1 or "src/cost/registry.cpp" not in out.stdout:
            print("check_layers.py --self-test: a planted include of search from cost was not "
                  f"caught (exit {out.returncode}):\n{out.stdout}{out.stderr}")
            return 1
        print("check_layers.py --self-test: the planted include was caught:\n" + out.stdout)
        return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    repo = os.path.abspath(args.repo)
    if args.self_test:
        return self_test(repo)
    found = violations(repo)
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} include(s) against the layer order {' < '.join(LAYERS)}")
        return 1
    print(f"layers in order: {' < '.join(LAYERS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
