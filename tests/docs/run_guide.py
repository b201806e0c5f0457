#!/usr/bin/env python3
"""Runs every command of docs/guide.md, in order, and fails on the first that fails.

The guide's ```sh blocks run in bash (set -euo pipefail) and its ```python
blocks in this Python, each block in a process of its own, all in one
temporary directory laid out like the source checkout's root (a copy of
examples/ and a link to models/), with the build's binaries first on PATH and
PYTHONPATH=<build>/python. A block whose info string says `no-run` is shown
to readers but not run here: the install commands (they would build the
project again, minutes) and the TorchRec code (TorchRec is not installed
where the tests run; examples/torchrec_model.py --plan-only covers the part
that needs no TorchRec). Blocks of other languages (json, text) are output or
file contents, not commands.

Usage: run_guide.py --bin-dir build --python-dir build/python --repo . [--guide docs/guide.md] [--keep]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

FENCE = re.compile(r"^```(\S*)(.*)$")


def blocks(path):
    """[(line, language, flags, code)] of every fenced block of the file."""
    found, current = [], None
    for number, line in enumerate(open(path, encoding="utf-8").read().splitlines(), 1):
        m = FENCE.match(line)
        if current is None and m:
            current = (number, m.group(1), m.group(2).split(), [])
        elif current is not None and line.startswith("```"):
            found.append((current[0], current[1], current[2], "\n".join(current[3]) + "\n"))
            current = None
        elif current is not None:
            current[3].append(line)
    if current is not None:
        sys.exit(f"{path}:{current[0]}: a code block is never closed")
    return found


def workdir(repo, keep):
    root = tempfile.mkdtemp(prefix="embshard-guide-")
    shutil.copytree(os.path.join(repo, "examples"), os.path.join(root, "examples"))
    os.symlink(os.path.join(repo, "models"), os.path.join(root, "models"))
    # `python3` in the guide's shell commands is this Python, the one the
    # extension was built for (another python3 may come first on PATH).
    shim = os.path.join(root, ".bin")
    os.mkdir(shim)
    os.symlink(sys.executable, os.path.join(shim, "python3"))
    if keep:
        print(f"working directory (kept): {root}")
    return root, shim


def run_block(root, env, number, language, code):
    if language == "sh":
        command = ["bash", "-euo", "pipefail", "-c", code]
    else:
        path = os.path.join(root, f".guide_block_{number}.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(code)
        command = [sys.executable, path]
    start = time.monotonic()
    run = subprocess.run(command, cwd=root, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    return run.returncode, run.stdout, time.monotonic() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", required=True, help="the directory of the embshard binary")
    parser.add_argument("--python-dir", required=True, help="the directory holding the embshard package")
    parser.add_argument("--repo", required=True, help="the source checkout")
    parser.add_argument("--guide", help="default: REPO/docs/guide.md")
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    args = parser.parse_args()
    guide = args.guide or os.path.join(args.repo, "docs", "guide.md")
    repo = os.path.abspath(args.repo)
    root, shim = workdir(repo, args.keep)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([shim, os.path.abspath(args.bin_dir), env.get("PATH", "")])
    env["PYTHONPATH"] = os.path.abspath(args.python_dir)
    ran = skipped = 0
    total = time.monotonic()
    try:
        for number, language, flags, code in blocks(guide):
            if language not in ("sh", "python"):
                continue
            if "no-run" in flags:
                skipped += 1
                continue
            print(f"--- {os.path.basename(guide)}:{number} ({language})", flush=True)
            rc, output, seconds = run_block(root, env, number, language, code)
            print(output, end="")
            print(f"--- exit {rc} in {seconds:.1f} s", flush=True)
            if rc != 0:
                print(f"FAILED: the {language} block at {guide}:{number} exited {rc}:\n{code}")
                return 1
            ran += 1
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{guide}: {ran} blocks ran in {time.monotonic() - total:.0f} s "
          f"({skipped} marked no-run); every one exited 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
