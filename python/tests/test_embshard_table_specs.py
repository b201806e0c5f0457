"""Tests of embshard.torchrec's way in without TorchRec: table specs from a model's
configs and batches, the reuse bins, the command line, and the built CLI planning from
them. ctest -R python (or PYTHONPATH=build/python python3 -m unittest in
python/tests/); test_embshard_torchrec.py says how TorchRec's classes are stood
in for, and when tests skip.
"""

import bisect
import contextlib
import dataclasses
import enum
import io
import itertools
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import unittest
import warnings

import embshard.torchrec as et
from test_embshard_torchrec import HAVE_TORCH, NO_TORCH, PACKAGE_ROOT, assign, broken, delete, find_cli


# ---- the way in: stand-ins of TorchRec's classes --------------------------------

class DataType(enum.Enum):
    """Stand-in for torchrec.types.DataType (some of its members)."""
    FP32 = "FP32"
    FP16 = "FP16"
    BF16 = "BF16"
    INT8 = "INT8"
    INT2 = "INT2"


@dataclasses.dataclass
class EmbeddingBagConfig:
    """Stand-in for torchrec.modules.embedding_configs.EmbeddingBagConfig (its
    fields that matter here, in its order)."""
    num_embeddings: int
    embedding_dim: int
    name: str = ""
    data_type: DataType = DataType.FP32
    feature_names: list = dataclasses.field(default_factory=list)
    pooling: str = "SUM"


class JaggedTensor:
    """Stand-in for torchrec.sparse.jagged_tensor.JaggedTensor."""

    def __init__(self, values, lengths):
        self._values, self._lengths = values, lengths

    def values(self):
        return self._values

    def lengths(self):
        return self._lengths

    def offsets(self):
        return list(itertools.accumulate(list(self._lengths), initial=0))


class KeyedJaggedTensor(JaggedTensor):
    """Stand-in for torchrec.sparse.jagged_tensor.KeyedJaggedTensor: values of
    all keys concatenated, lengths key-major (all samples of key 0, then key 1)."""

    def __init__(self, keys, values, lengths, stride=None):
        super().__init__(values, lengths)
        self._keys = list(keys)
        self._stride = stride if stride is not None else len(lengths) // max(len(keys), 1)

    def keys(self):
        return self._keys

    def stride(self):
        return self._stride

    def length_per_key(self):
        n = self._stride
        lengths = list(self._lengths)
        return [sum(lengths[k * n:(k + 1) * n]) for k in range(len(self._keys))]

    def __getitem__(self, key):
        k = self._keys.index(key)
        start = sum(self.length_per_key()[:k])
        n = self._stride
        return JaggedTensor(self._values[start:start + self.length_per_key()[k]],
                            self._lengths[k * n:(k + 1) * n])

    def to_dict(self):
        return {key: self[key] for key in self._keys}


def make_kjt(bags, tensor=list):
    """A KJT from {feature: [bag of sample 0, bag of sample 1, ...]}; `tensor`
    turns the flat lists into the container under test (list, torch.tensor...)."""
    keys = list(bags)
    values = [i for k in keys for bag in bags[k] for i in bag]
    lengths = [len(bag) for k in keys for bag in bags[k]]
    return KeyedJaggedTensor(keys, tensor(values), tensor(lengths))


def zipf_bags(rng, rows, batch, mean_pooling, exponent=1.05):
    """`batch` bags of Zipf-distributed rows (row 0 the hottest), 1..2*mean-1 long."""
    cum = list(itertools.accumulate(1.0 / (r + 1) ** exponent for r in range(rows)))
    bags = []
    for _ in range(batch):
        n = rng.randint(1, 2 * mean_pooling - 1)
        bags.append([min(bisect.bisect(cum, rng.random() * cum[-1]), rows - 1) for _ in range(n)])
    return bags


def model_configs():
    """Eight tables, two of them with several features (shared embeddings)."""
    tables = [("user_id", 1000, 64, ["user_id"]),
              ("item_id", 500, 32, ["item_id", "clicked_items"]),
              ("category", 100, 16, ["category", "clicked_categories", "liked_categories"]),
              ("country", 50, 8, ["country"]),
              ("query", 2000, 128, ["query"]),
              ("brand", 300, 32, ["brand"]),
              ("hour", 24, 4, ["hour"]),
              ("creator", 800, 64, ["creator"])]
    return [EmbeddingBagConfig(num_embeddings=rows, embedding_dim=dim, name=name, feature_names=features)
            for name, rows, dim, features in tables]


def model_batches(seed=7, batch=64, num_batches=3, tensor=list):
    rng = random.Random(seed)
    pooling = {"user_id": 1, "item_id": 1, "clicked_items": 6, "category": 1, "clicked_categories": 4,
               "liked_categories": 3, "country": 1, "query": 3, "brand": 2, "hour": 1, "creator": 2}
    rows = {f: c.num_embeddings for c in model_configs() for f in c.feature_names}
    return [make_kjt({f: zipf_bags(rng, rows[f], batch, pooling[f]) for f in pooling}, tensor)
            for _ in range(num_batches)]


def one_table(rows=100, features=("f",)):
    return [EmbeddingBagConfig(num_embeddings=rows, embedding_dim=16, name="t", feature_names=list(features))]


def specs_quietly(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", et.SampleWarning)
        return et.table_specs(*args, **kwargs)


def onehot(bin_shares):
    h = [0.0] * 17
    for b, share in bin_shares.items():
        h[b] = share
    return h


class ReuseBins(unittest.TestCase):
    def test_bins_match_embshard(self):
        # reuse_bin() in src/workload/table.cpp: (2^(k-1), 2^k], 16 beyond 32768.
        cases = {1: 0, 2: 1, 3: 2, 4: 2, 5: 3, 8: 3, 9: 4, 16384: 14, 16385: 15,
                 32768: 15, 32769: 16, 10**9: 16}
        for count, b in cases.items():
            self.assertEqual(et.reuse_bin(count), b, count)


class HandComputed(unittest.TestCase):
    def test_one_feature(self):
        # Rows 0..3 read 1, 2, 3 and 5 times over 2 samples: bins 0, 1, 2, 3.
        kjt = make_kjt({"f": [[0, 1, 2, 3, 3], [1, 2, 2, 3, 3, 3]]})
        t = et.table_specs(one_table(), kjt)["tables"][0]
        self.assertEqual(t["pooling_factor"], 5.5)
        self.assertEqual(t["unique_rows"], 4)
        self.assertEqual(t["row_reuse_histogram"], onehot({0: 0.25, 1: 0.25, 2: 0.25, 3: 0.25}))
        self.assertEqual(t["lookup_reuse_histogram"], onehot({0: 1 / 11, 1: 2 / 11, 2: 3 / 11, 3: 5 / 11}))

    def test_the_last_two_bins(self):
        kjt = make_kjt({"f": [[7] * 32769, [8] * 32768]})
        t = et.table_specs(one_table(), kjt)["tables"][0]
        self.assertEqual(t["row_reuse_histogram"], onehot({15: 0.5, 16: 0.5}))
        self.assertEqual(t["lookup_reuse_histogram"], onehot({15: 32768 / 65537, 16: 32769 / 65537}))

    def test_features_of_one_table_read_the_same_rows(self):
        # Row 1 is read once by "a" and twice by "b": three reads of one row.
        kjt = make_kjt({"a": [[1], [2]], "b": [[1, 1], []]})
        t = et.table_specs(one_table(features=("a", "b")), kjt)["tables"][0]
        self.assertEqual(t["pooling_factor"], 2.0)  # 4 lookups of the table / 2 samples
        self.assertEqual(t["unique_rows"], 2)
        self.assertEqual(t["row_reuse_histogram"], onehot({0: 0.5, 2: 0.5}))
        self.assertEqual(t["lookup_reuse_histogram"], onehot({0: 0.25, 2: 0.75}))

    def test_batches_are_averaged(self):
        b0 = make_kjt({"f": [[0, 0], [1, 2]]})        # 4 lookups, 3 rows: bins 1, 0, 0
        b1 = make_kjt({"f": [[5], [6]]})              # 2 lookups, 2 rows: bin 0
        b2 = make_kjt({"f": [[], []]})                # nothing read: no shares
        t = et.table_specs(one_table(), [b0, b1, b2])["tables"][0]
        self.assertAlmostEqual(t["pooling_factor"], (2 + 1 + 0) / 3)
        self.assertEqual(t["unique_rows"], round((3 + 2 + 0) / 3))
        self.assertEqual(t["row_reuse_histogram"], onehot({0: (2 / 3 + 1) / 2, 1: (1 / 3) / 2}))
        self.assertEqual(t["lookup_reuse_histogram"], onehot({0: (0.5 + 1) / 2, 1: 0.5 / 2}))

    def test_a_table_never_read(self):
        t = et.table_specs(one_table(), make_kjt({"f": [[], []]}))["tables"][0]
        self.assertEqual((t["pooling_factor"], t["unique_rows"]), (0.0, 0))
        self.assertEqual(t["row_reuse_histogram"], [0.0] * 17)  # embshard accepts all-zero shares


class InputShapes(unittest.TestCase):
    def test_kjt_dicts_and_jagged_tensors_agree(self):
        kjt = model_batches(num_batches=1)[0]
        pairs = {k: (jt.values(), jt.lengths()) for k, jt in kjt.to_dict().items()}
        a = specs_quietly(model_configs(), kjt)
        self.assertEqual(a, specs_quietly(model_configs(), [pairs]))
        self.assertEqual(a, specs_quietly(model_configs(), kjt.to_dict()))

    def test_configs_as_dicts(self):
        dicts = [{"name": c.name, "num_embeddings": c.num_embeddings, "embedding_dim": c.embedding_dim,
                  "feature_names": c.feature_names} for c in model_configs()]
        batches = model_batches()
        self.assertEqual(specs_quietly(dicts, batches), specs_quietly(model_configs(), batches))

    def test_specs_obey_embshard_rules(self):
        # What table_from_json (src/workload/workload.cpp) checks.
        specs = specs_quietly(model_configs(), model_batches())
        self.assertEqual(specs["batch_size"], 64)
        self.assertEqual(specs["from_profile"], [])
        self.assertEqual([t["name"] for t in specs["tables"]], [c.name for c in model_configs()])
        for t in specs["tables"]:
            self.assertTrue(isinstance(t["rows"], int) and t["rows"] > 0)
            self.assertTrue(1 <= t["dim"] <= 1024)
            self.assertGreater(t["pooling_factor"], 0)
            self.assertTrue(isinstance(t["unique_rows"], int) and 0 < t["unique_rows"] <= t["rows"])
            for h in ("row_reuse_histogram", "lookup_reuse_histogram"):
                self.assertEqual(len(t[h]), 17)
                self.assertTrue(all(x >= 0 for x in t[h]))
                self.assertAlmostEqual(sum(t[h]), 1.0, places=12)
        json.dumps(specs, allow_nan=False)

    def test_module_imports_and_measures_without_torch(self):
        # torch blocked: the import must not need it, nor measuring lists.
        code = ("import sys; sys.modules['torch'] = None\n"
                "import embshard.torchrec as et\n"
                "c = [{'name': 't', 'num_embeddings': 4, 'embedding_dim': 8, 'feature_names': ['f']}]\n"
                "print(et.table_specs(c, {'f': ([1, 1], [1, 1])})['tables'][0]['unique_rows'])\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=PACKAGE_ROOT))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "1")


class Fallback(unittest.TestCase):
    def test_without_samples_every_table_takes_the_profile(self):
        specs = et.table_specs(model_configs(), profile="2022")
        self.assertEqual(specs["batch_size"], 4096)
        self.assertEqual(specs["profile"], "2022")
        self.assertEqual(specs["from_profile"], [c.name for c in model_configs()])
        self.assertEqual(specs["tables"][0], {"name": "user_id", "rows": 1000, "dim": 64,
                                              "data_type": "fp32"})
        self.assertEqual(et.table_specs(model_configs(), batch_size=512)["batch_size"], 512)

    def test_data_types_come_from_the_configs(self):
        configs = [EmbeddingBagConfig(10, 8, name="a", data_type=DataType.FP16, feature_names=["a"]),
                   EmbeddingBagConfig(10, 8, name="b", data_type=DataType.INT8, feature_names=["b"]),
                   {"name": "c", "num_embeddings": 5, "embedding_dim": 4, "feature_names": ["c"],
                    "data_type": "BF16"},
                   {"name": "d", "num_embeddings": 5, "embedding_dim": 4, "feature_names": ["d"]}]
        types = [t["data_type"] for t in et.table_specs(configs)["tables"]]
        self.assertEqual(types, ["fp16", "int8", "bf16", "fp32"])

    def test_a_missing_feature_sends_its_table_to_the_profile(self):
        kjt = make_kjt({"a": [[1], [2]], "c": [[3], [3]]})
        configs = [EmbeddingBagConfig(10, 8, name="ab", feature_names=["a", "b"]),
                   EmbeddingBagConfig(10, 8, name="c", feature_names=["c"])]
        with self.assertWarnsRegex(et.SampleWarning, "'ab' \\(feature 'b' missing from samples\\[0\\]\\)"):
            specs = et.table_specs(configs, kjt)
        self.assertEqual(specs["from_profile"], ["ab"])
        self.assertEqual(specs["tables"][0], {"name": "ab", "rows": 10, "dim": 8, "data_type": "fp32"})
        self.assertEqual(specs["tables"][1]["unique_rows"], 1)

    def test_missing_from_one_batch_of_several(self):
        b0 = make_kjt({"f": [[1], [2]], "g": [[1], [2]]})
        b1 = make_kjt({"g": [[1], [2]]})
        configs = one_table() + [EmbeddingBagConfig(10, 8, name="u", feature_names=["g"])]
        with self.assertWarnsRegex(et.SampleWarning, "feature 'f' missing from samples\\[1\\]"):
            specs = et.table_specs(configs, [b0, b1])
        self.assertEqual(specs["from_profile"], ["t"])

    def test_unknown_features_are_ignored_with_a_warning(self):
        kjt = make_kjt({"f": [[1], [2]], "stray": [[999], [-5]]})
        with self.assertWarnsRegex(et.SampleWarning, "\\['stray'\\] are named by no config"):
            specs = et.table_specs(one_table(), kjt)
        self.assertEqual(specs["tables"][0]["unique_rows"], 2)


class Errors(unittest.TestCase):
    def assert_error(self, pattern, configs, samples=None, **kwargs):
        with self.assertRaisesRegex(et.TableSpecError, pattern):
            specs_quietly(configs, samples, **kwargs)

    def test_is_a_value_error(self):
        self.assertTrue(issubclass(et.TableSpecError, ValueError))

    def test_indices_outside_the_table(self):
        self.assert_error("samples\\[0\\]: table 't' feature 'f': index 100 outside \\[0, 100\\)",
                          one_table(), make_kjt({"f": [[1], [100]]}))
        self.assert_error("feature 'f': index -1 outside", one_table(), make_kjt({"f": [[-1], [0]]}))
        self.assert_error("feature 'f': index 1.5 is a float, not an integer", one_table(),
                          make_kjt({"f": [[1.5], [0]]}))
        self.assert_error("samples\\[1\\]: .*index 7 outside \\[0, 5\\)", one_table(rows=5),
                          [make_kjt({"f": [[1], [2]]}), make_kjt({"f": [[7], [2]]})])

    def test_bad_configs(self):
        def cfg(**kw):
            base = dict(num_embeddings=10, embedding_dim=8, name="t", feature_names=["f"])
            base.update(kw)
            return [EmbeddingBagConfig(**base)]
        self.assert_error("configs\\[0\\] \\(table 't'\\): embedding_dim is 2048, must be 1..1024",
                          cfg(embedding_dim=2048))
        self.assert_error("\\(table 't'\\): num_embeddings is 0", cfg(num_embeddings=0))
        self.assert_error("num_embeddings is 10.0", cfg(num_embeddings=10.0))
        self.assert_error("feature_names is \\[\\]", cfg(feature_names=[]))
        self.assert_error("configs\\[0\\]: name is ''", cfg(name=""))
        self.assert_error("table name 't' appears twice", cfg() + cfg())
        self.assert_error("configs: no tables", [])
        self.assert_error("configs\\[0\\] \\(table 't'\\): missing field 'embedding_dim'",
                          [{"name": "t", "num_embeddings": 3, "feature_names": ["f"]}])
        self.assert_error("\\(table 't'\\): data_type 'INT2' is not supported \\(embshard plans "
                          "fp32, fp16, bf16, int8, int4\\)", cfg(data_type=DataType.INT2))
        self.assert_error("\\(table 't'\\): data_type is 16", cfg(data_type=16))
        self.assert_error("profile is '2023'", cfg(), profile="2023")
        self.assert_error("batch_size is 0", cfg(), batch_size=0)

    def test_bad_batches(self):
        self.assert_error("samples\\[1\\]: batch size \\(stride\\) 3, expected 2", one_table(),
                          [make_kjt({"f": [[1], [2]]}), make_kjt({"f": [[1], [2], [3]]})])
        self.assert_error("samples\\[0\\]: batch size \\(stride\\) 2, expected 8", one_table(),
                          make_kjt({"f": [[1], [2]]}), batch_size=8)
        self.assert_error("feature 'f': lengths sum to 3 but there are 2 values", one_table(),
                          {"f": ([1, 2], [1, 2])})
        self.assert_error("feature 'f': lengths\\[1\\] is -1", one_table(), {"f": ([1], [2, -1])})
        self.assert_error("features have different batch sizes \\[1, 2\\]", one_table(),
                          {"f": ([1], [1]), "g": ([1, 2], [1, 1])})
        self.assert_error("3 lengths for 2 keys x stride 2", one_table(),
                          KeyedJaggedTensor(["f", "g"], [1, 2, 3], [1, 1, 1], stride=2))
        self.assert_error("samples\\[0\\]: lengths sum to 2 but there are 3 values", one_table(),
                          KeyedJaggedTensor(["f"], [1, 2, 3], [1, 1]))
        self.assert_error("samples\\[0\\]: a int, expected a KeyedJaggedTensor", one_table(), [5])


class WriteFile(unittest.TestCase):
    def test_written_atomically(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "tables.json")
            specs = et.write_table_specs(path, one_table(), make_kjt({"f": [[1], [2]]}))
            with open(path) as f:
                self.assertEqual(json.load(f), specs)
            # A failure leaves the previous file as it was and no temporary behind.
            with self.assertRaises(et.TableSpecError):
                et.write_table_specs(path, one_table(), make_kjt({"f": [[1], [200]]}))
            with open(path) as f:
                self.assertEqual(json.load(f), specs)
            self.assertEqual(os.listdir(tmp), ["tables.json"])

    def test_links_and_devices_are_written_through(self):
        with tempfile.TemporaryDirectory() as tmp:
            target, link = os.path.join(tmp, "target.json"), os.path.join(tmp, "link.json")
            with open(target, "w") as f:
                f.write("old")
            os.symlink(target, link)
            specs = et.write_table_specs(link, one_table(), make_kjt({"f": [[1], [2]]}))
            self.assertTrue(os.path.islink(link))
            with open(target) as f:
                self.assertEqual(json.load(f), specs)
            # A pipe (as /dev/null, a device): written into, left a pipe.
            pipe, got = os.path.join(tmp, "pipe"), []
            os.mkfifo(pipe)
            reader = threading.Thread(target=lambda: got.append(open(pipe).read()))
            reader.start()
            specs = et.write_table_specs(pipe, one_table(), make_kjt({"f": [[1], [2]]}))
            reader.join()
            self.assertEqual(json.loads(got[0]), specs)
            self.assertFalse(os.path.isfile(pipe))

    def test_an_unwritable_path_is_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "no_such_dir", "tables.json")
            with self.assertRaisesRegex(OSError, "cannot write " + re.escape(path)):
                et.write_table_specs(path, one_table(), make_kjt({"f": [[1], [2]]}))


def run_main(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = et.main(argv)
    return rc, out.getvalue(), err.getvalue()


class CommandLine(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.configs = os.path.join(self.tmp.name, "configs.json")
        with open(self.configs, "w") as f:
            json.dump([{"name": "ab", "num_embeddings": 10, "embedding_dim": 8, "feature_names": ["a", "b"]},
                       {"name": "c", "num_embeddings": 10, "embedding_dim": 4, "feature_names": ["c"]}], f)

    def write_json(self, name, obj):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            json.dump(obj, f)
        return path

    def test_tables_from_json_samples(self):
        s1 = self.write_json("s1.json", {"a": [[1, 2], [1, 1]], "b": [[3], [0, 1]], "x": [[0], [1, 0]]})
        s2 = self.write_json("s2.json", [{"a": [[4, 1], [1, 1]], "b": [[], [0, 0]]}])
        out = os.path.join(self.tmp.name, "tables.json")
        rc, stdout, stderr = run_main(["tables", "--configs", self.configs, "--samples", s1, s2, "-o", out])
        self.assertEqual(rc, 0, stderr)
        self.assertIn("2 tables, batch 2, 1 measured from 2 sample batches", stdout)
        self.assertIn("from profile 2021: c", stdout)
        self.assertIn("['x'] are named by no config", stderr)
        with open(out) as f:
            specs = json.load(f)
        self.assertEqual(specs["tables"][0]["pooling_factor"], (3 / 2 + 2 / 2) / 2)

    def test_errors_exit_1_with_the_message(self):
        s = self.write_json("s.json", {"a": [[1], [1]], "b": [[10], [1]], "c": [[0], [1]]})
        out = os.path.join(self.tmp.name, "tables.json")
        rc, _, stderr = run_main(["tables", "--configs", self.configs, "--samples", s, "-o", out])
        self.assertEqual(rc, 1)
        self.assertIn("error: samples[0]: table 'ab' feature 'b': index 10 outside [0, 10)", stderr)
        self.assertFalse(os.path.exists(out))

    def test_malformed_json_names_the_file(self):
        out = os.path.join(self.tmp.name, "tables.json")
        bad = os.path.join(self.tmp.name, "bad.json")
        with open(bad, "w") as f:
            f.write('[{"name": "ab",}]')
        rc, _, stderr = run_main(["tables", "--configs", bad, "-o", out])
        self.assertEqual(rc, 1)
        self.assertIn(f"error: {bad}: not valid JSON (Expecting property name", stderr)
        rc, _, stderr = run_main(["tables", "--configs", self.configs, "--samples", bad, "-o", out])
        self.assertEqual(rc, 1)
        self.assertIn(f"error: {bad}: not valid JSON (Expecting property name", stderr)
        self.assertFalse(os.path.exists(out))

    def test_without_samples(self):
        out = os.path.join(self.tmp.name, "tables.json")
        rc, stdout, _ = run_main(["tables", "--configs", self.configs, "--batch-size", "1024",
                                  "--profile", "2022", "-o", out])
        self.assertEqual(rc, 0)
        self.assertIn("from profile 2022: ab, c", stdout)


@unittest.skipUnless(HAVE_TORCH, NO_TORCH)
class TorchTensors(unittest.TestCase):
    def test_tensors_of_either_width_match_lists(self):
        import torch
        lists = specs_quietly(model_configs(), model_batches())
        for dtype in (torch.int32, torch.int64):
            batches = model_batches(tensor=lambda x: torch.tensor(x, dtype=dtype))
            self.assertEqual(specs_quietly(model_configs(), batches), lists)

    def test_torch_saved_samples_on_the_command_line(self):
        import torch
        with tempfile.TemporaryDirectory() as tmp:
            configs = os.path.join(tmp, "configs.json")
            with open(configs, "w") as f:
                json.dump([{**dataclasses.asdict(c), "data_type": c.data_type.value}
                           for c in model_configs()], f)
            batches = model_batches(tensor=torch.tensor)
            dicts = [{k: (jt.values(), jt.lengths()) for k, jt in b.to_dict().items()} for b in batches]
            torch.save(dicts[0], os.path.join(tmp, "b0.pt"))   # one batch
            torch.save(dicts[1:], os.path.join(tmp, "b12.pt"))  # a list of batches
            out = os.path.join(tmp, "tables.json")
            files = [os.path.join(tmp, "b0.pt"), os.path.join(tmp, "b12.pt")]
            rc, stdout, stderr = run_main(["tables", "--configs", configs, "--samples", *files, "-o", out])
            self.assertEqual(rc, 0, stderr)
            with open(out) as f:
                self.assertEqual(json.load(f), specs_quietly(model_configs(), batches))


def run_cli(cli, *args):
    out = subprocess.run([cli, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise AssertionError(f"{cli} {' '.join(args)} exited {out.returncode}:\n{out.stderr}")
    return out.stdout


@unittest.skipUnless(find_cli(), "no built CLI (set EMBSHARD_CLI or build <repo>/build/embshard)")
class WithTheCli(unittest.TestCase):
    def test_plan_from_measured_specs(self):
        cli = find_cli()
        configs = model_configs() + [EmbeddingBagConfig(num_embeddings=5000, embedding_dim=32, name="unseen",
                                                        feature_names=["unseen"])]
        with tempfile.TemporaryDirectory() as tmp:
            tables, plan_path = os.path.join(tmp, "tables.json"), os.path.join(tmp, "plan.json")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", et.SampleWarning)
                specs = et.write_table_specs(tables, configs, model_batches())
            self.assertEqual(specs["from_profile"], ["unseen"])
            run_cli(cli, "plan", "--tables", tables, "--devices", "4", "--cost-model", "analytic",
                    "--out", plan_path)
            d = et.to_parameter_sharding_dicts(et.load_plan(plan_path))
            self.assertEqual(list(d), [c.name for c in configs])
            plan = et.load_plan(plan_path)
            self.assertEqual(plan["batch_size"], 64)
            self.assertEqual(plan["tables"]["query"]["rows"], 2000)

    def test_the_cpp_reader_rejects_the_same_plans(self):
        # Faults put into a plan the CLI wrote: `embshard diff` (the C++ reader)
        # and load_plan both reject each with the same message.
        cli = find_cli()
        cpp_message = re.compile(r"embshard: error: (.*?)(?: \[(?:check failed:|at) .*\])?$")
        with tempfile.TemporaryDirectory() as tmp:
            tables, good = os.path.join(tmp, "tables.json"), os.path.join(tmp, "good.json")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", et.SampleWarning)
                et.write_table_specs(tables, model_configs(), model_batches())
            run_cli(cli, "plan", "--tables", tables, "--devices", "4", "--cost-model", "analytic",
                    "--out", good)
            plan = et.load_plan(good)
            name = next(n for n in plan["table_order"] if plan["tables"][n]["sharding_type"] == "table_wise")
            t = plan["tables"][name]
            rank = t["ranks"][0]

            def overlap(p):  # two halves of the columns, both at column 0
                half = dict(t["shards"][0], shard_sizes=[t["rows"], t["dim"] // 2])
                p["tables"][name].update(ranks=[rank, rank], shards=[half, dict(half)])
            faults = {
                "placement outside": assign(["tables", name, "shards", 0, "placement"], "rank:4/cuda:4"),
                "overlap": overlap,
                "ranks against placement": assign(["tables", name, "ranks"], [(rank + 1) % 4]),
                "no num_devices": delete(["num_devices"]),
                "table_order short": assign(["table_order"], plan["table_order"][1:]),
                "shard outside": assign(["tables", name, "shards", 0, "shard_sizes"],
                                        [t["rows"], t["dim"] + 1]),
                "negative offset": assign(["tables", name, "shards", 0, "shard_offsets"], [-1, 0]),
                "version": assign(["version"], 3),
                "table_wise in two overlapping shards": overlap,
                "two shards labelled row_wise": lambda p: (overlap(p), p["tables"][name].update(
                    sharding_type="row_wise")),
                "two shards labelled column_wise": lambda p: (overlap(p), p["tables"][name].update(
                    sharding_type="column_wise")),
                "a whole table labelled row_wise": assign(["tables", name, "sharding_type"], "row_wise"),
                "kernel": assign(["tables", name, "compute_kernel"], "gpu"),
                "kernel not a string": assign(["tables", name, "compute_kernel"], 5),
                "memory_bytes": assign(["tables", name, "memory_bytes"], t["memory_bytes"] + 1),
                "capacity": assign(["device_memory_bytes"], [1, 1, 1, 1]),
                "memory model": assign(["memory_model", "optimizer_bytes_per_row"], -4),
                "data type": assign(["tables", name, "data_type"], "fp8"),
                "data type in capitals": assign(["tables", name, "data_type"], "FP32"),
                "data type not a string": assign(["tables", name, "data_type"], 16),
            }
            for what, edit in faults.items():
                with self.subTest(what):
                    bad = os.path.join(tmp, "bad.json")
                    with open(bad, "w") as f:
                        json.dump(broken(edit, plan), f)
                    cpp = subprocess.run([cli, "diff", good, bad], capture_output=True, text=True)
                    self.assertEqual(cpp.returncode, 1, cpp.stderr)
                    with self.assertRaises(et.PlanError) as ours:
                        et.load_plan(bad)
                    self.assertTrue(str(ours.exception).startswith(f"{bad}: "), ours.exception)
                    self.assertEqual(str(ours.exception),
                                     cpp_message.search(cpp.stderr.strip()).group(1))

    @unittest.skipUnless(HAVE_TORCH, NO_TORCH)
    def test_statistics_match_embshard_inspect(self):
        # The same indices measured here and by `embshard import` + `inspect`.
        import torch
        cli = find_cli()
        rng = random.Random(11)
        batch = 64
        bags = {"f0": zipf_bags(rng, 50, batch, 8), "f1": zipf_bags(rng, 5000, batch, 3),
                "f2": [[0] * 700 if b == 0 else [1] * 40000 if b == 1 else [b] for b in range(batch)]}
        configs = [EmbeddingBagConfig(num_embeddings=5000, embedding_dim=8, name=f"t{i}", feature_names=[f])
                   for i, f in enumerate(bags)]
        ours = et.table_specs(configs, make_kjt(bags, torch.tensor))["tables"]
        # dlrm_datasets layout: indices table-major, offsets of T*B+1, lengths (T, B).
        lengths = torch.tensor([[len(bag) for bag in bags[f]] for f in bags])
        indices = torch.tensor([i for f in bags for bag in bags[f] for i in bag])
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.flatten().cumsum(0)])
        with tempfile.TemporaryDirectory() as tmp:
            torch.save((indices, offsets, lengths), os.path.join(tmp, "trace.pt"))
            run_cli(cli, "import", os.path.join(tmp, "trace.pt"), "-o", os.path.join(tmp, "w"), "-q")
            theirs = json.loads(run_cli(cli, "inspect", os.path.join(tmp, "w"), "--json"))["tables"]
        self.assertEqual(ours[2]["row_reuse_histogram"][16], 1 / 64)  # the 40000-read row
        for a, b in zip(ours, theirs):
            self.assertEqual(a["unique_rows"], b["unique_rows"])
            self.assertAlmostEqual(a["pooling_factor"], b["pooling_factor"], places=12)
            for h in ("row_reuse_histogram", "lookup_reuse_histogram"):
                for x, y in zip(a[h], b[h]):
                    self.assertAlmostEqual(x, y, places=12)


if __name__ == "__main__":
    unittest.main()
