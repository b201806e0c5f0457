"""`pip install --no-build-isolation --no-deps --target DIR .` from the source
tree, then a plan from the installed package alone. Slow (it builds the
library afresh the first time, into build-pip/): only with EMBSHARD_TEST_PIP=1.
Run by the Python under test (ctest: the one the package is built for)."""

import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

from test_embshard_torchrec import REPO

PLAN_SIX = """
import json, os, sys, embshard
with open(sys.argv[1]) as f:
    spec = json.load(f)
p = embshard.plan(spec, devices=16, mem_per_device="40GB", explain=False)
print(os.path.dirname(embshard.__file__))
print(p.cost_model)
print(sorted(p.to_torchrec(as_dicts=True)["sparse_arch.embedding_bag_collection"]))
"""


def measurement_files(models):
    """What the install leaves out of models/ (cmake/install.cmake), found in `models`."""
    found = []
    for folder, dirs, files in os.walk(models):
        found += [os.path.join(folder, d) for d in dirs if d in ("data", "__pycache__")]
        found += [os.path.join(folder, f) for f in files
                  if f.endswith((".jsonl.gz", ".svg")) or f in ("report.md", "report.json")]
    return found


def missing_build_tools():
    for module in ("pip", "setuptools", "wheel"):
        if importlib.util.find_spec(module) is None:
            return f"{module} not importable by {sys.executable}"
    return None


@unittest.skipUnless(os.environ.get("EMBSHARD_TEST_PIP") == "1", "EMBSHARD_TEST_PIP=1 runs it (slow)")
class PipInstall(unittest.TestCase):
    def test_install_and_plan(self):
        why = missing_build_tools()
        if why:
            self.skipTest(why)
        with tempfile.TemporaryDirectory() as tmp:
            target = os.path.join(tmp, "site")
            subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation",
                            "--no-deps", "--no-index", "--target", target, REPO], check=True)
            package = os.path.join(target, "embshard")
            with open(os.path.join(package, "embshard-data-dir")) as f:
                self.assertEqual(f.read().strip(), ".")
            for shipped in ("models/neural/manifest.json", "data/published"):
                self.assertTrue(os.path.exists(os.path.join(package, shipped)), shipped)
            self.assertEqual(measurement_files(os.path.join(package, "models")), [])
            # Away from the source tree, with nothing but the installed package.
            env = {k: v for k, v in os.environ.items()
                   if k not in ("PYTHONPATH", "EMBSHARD_DATA_DIR")}
            env["PYTHONPATH"] = target
            out = subprocess.run([sys.executable, "-c", PLAN_SIX,
                                  os.path.join(REPO, "examples", "six_tables.json")],
                                 cwd=tmp, env=env, capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            lines = out.stdout.splitlines()
            self.assertEqual(os.path.realpath(lines[0]), os.path.realpath(package))
            self.assertTrue(lines[1].startswith("neural"), lines[1])
            self.assertEqual(lines[2], str(sorted(["user_id", "item_id", "history", "query", "geo",
                                                   "device"])))


if __name__ == "__main__":
    unittest.main()
