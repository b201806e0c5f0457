"""embshard.fbgemm_peer (bench kernel's FBGEMM peer) under the TorchRec Python:
its input checks, and its protocol end to end on a tiny case against
torch's embedding_bag."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import torch

import embshard.fbgemm_peer as fp

ROWS, DIMS, BATCH = [30, 7], [8, 16], 4
# Per table: bags of the batch (the second's first bag empty, duplicates in both).
BAGS = [[[1, 2, 1], [5], [0, 29, 29, 3], [7]], [[], [6, 6], [0], [1, 2, 3, 4, 5]]]


def write_case(folder, name="c", **changes):
    """A valid case NAME, with top-level fields changed or dropped (None)."""
    case = {"batch_size": BATCH, "pooling": "sum",
            "tables": [{"rows": r, "dim": d, "num_indices": sum(map(len, bags))}
                       for r, d, bags in zip(ROWS, DIMS, BAGS)],
            "sgd_learning_rate": 0.1, "adagrad_learning_rate": 0.1, "adagrad_eps": 1e-8}
    for key, value in changes.items():
        if value is None:
            case.pop(key)
        else:
            case[key] = value
    with open(os.path.join(folder, name + ".json"), "w") as f:
        json.dump(case, f)
    gen = torch.Generator().manual_seed(3)
    weights = torch.rand(sum(r * d for r, d in zip(ROWS, DIMS)), generator=gen)
    offsets, indices = [], []
    for bags in BAGS:
        lengths = torch.tensor([0] + [len(b) for b in bags])
        offsets.append(torch.cumsum(lengths, 0))
        indices += [i for b in bags for i in b]
    files = {"weights.f32": weights, "offsets.i64": torch.cat(offsets),
             "indices.i64": torch.tensor(indices, dtype=torch.int64),
             "grad.f32": torch.rand(BATCH, sum(DIMS), generator=gen)}
    for suffix, tensor in files.items():
        with open(os.path.join(folder, f"{name}.{suffix}"), "wb") as f:
            f.write(tensor.numpy().tobytes())
    return weights, files["grad.f32"]


class InputChecks(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def error(self, **changes):
        write_case(self.dir, **changes)
        with self.assertRaises(fp.PeerError) as e:
            fp.read_case(torch, self.dir, "c")
        return str(e.exception)

    def test_a_valid_case_reads(self):
        write_case(self.dir)
        case = fp.read_case(torch, self.dir, "c")
        # FBGEMM's offsets: table-major over the concatenated indices.
        self.assertEqual(case["offsets"].tolist(), [0, 3, 4, 8, 9, 9, 11, 12, 17])

    def test_fields_are_named(self):
        self.assertIn("c.json: no field 'batch_size'", self.error(batch_size=None))
        self.assertIn("'pooling' is 'max', not 'sum' or 'mean'", self.error(pooling="max"))
        self.assertIn("tables[1]: 'dim' is 0, below 1",
                      self.error(tables=[{"rows": 30, "dim": 8, "num_indices": 9},
                                         {"rows": 7, "dim": 0, "num_indices": 8}]))
        self.assertIn("'sgd_learning_rate' is 'fast', not a float",
                      self.error(sgd_learning_rate="fast"))

    def test_files_of_the_wrong_size_are_named(self):
        self.assertIn("c.indices.i64: 136 bytes, expected 144",
                      self.error(tables=[{"rows": 30, "dim": 8, "num_indices": 9},
                                         {"rows": 7, "dim": 16, "num_indices": 9}]))

    def test_bad_indices_and_offsets_are_named(self):
        write_case(self.dir)
        path = os.path.join(self.dir, "c.indices.i64")
        bad = torch.tensor([1, 2, 1, 5, 0, 29, 29, 3, 7, 6, 6, 0, 1, 2, 3, 4, 7])
        with open(path, "wb") as f:
            f.write(bad.numpy().tobytes())
        with self.assertRaises(fp.PeerError) as e:
            fp.read_case(torch, self.dir, "c")
        self.assertIn("table 1 index 7 is 7, outside [0, 7)", str(e.exception))
        with open(os.path.join(self.dir, "c.offsets.i64"), "wb") as f:
            f.write(torch.tensor([0, 3, 2, 8, 9, 0, 0, 2, 3, 8]).numpy().tobytes())
        with self.assertRaises(fp.PeerError) as e:
            fp.read_case(torch, self.dir, "c")
        self.assertIn("table 0: offsets decrease at bag 1: 3 then 2", str(e.exception))

    def test_settings_are_checked(self):
        with open(os.path.join(self.dir, "peer.json"), "w") as f:
            json.dump({"format": "embshard-fbgemm-peer", "version": 1, "threads": 0,
                       "flush_bytes": 0}, f)
        with self.assertRaises(fp.PeerError) as e:
            fp.read_settings(self.dir)
        self.assertIn("'threads' is 0, below 1", str(e.exception))


class Serve(unittest.TestCase):
    """The module as `bench kernel` runs it: a process answering over FIFOs."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        with open(os.path.join(self.dir, "peer.json"), "w") as f:
            json.dump({"format": "embshard-fbgemm-peer", "version": 1, "threads": 1,
                       "flush_bytes": 1 << 20}, f)
        for fifo in ("commands", "replies"):
            os.mkfifo(os.path.join(self.dir, fifo))
        self.proc = subprocess.Popen([sys.executable, "-m", "embshard.fbgemm_peer", "serve",
                                      self.dir], stderr=subprocess.PIPE, text=True)
        # In the order the module opens them: each open waits for the other end.
        self.replies = open(os.path.join(self.dir, "replies"))
        self.commands = open(os.path.join(self.dir, "commands"), "w")

    def tearDown(self):
        self.commands.close()
        self.replies.close()
        self.proc.wait(timeout=60)
        self.proc.stderr.close()
        self.tmp.cleanup()

    def ask(self, **command):
        self.commands.write(json.dumps(command) + "\n")
        self.commands.flush()
        return json.loads(self.replies.readline())

    def test_forward_and_steps_match_torch(self):
        self.assertTrue(json.loads(self.replies.readline())["ready"])
        weights, grad = write_case(self.dir)
        self.assertTrue(self.ask(op="load", case="c")["ok"])
        out = os.path.join(self.dir, "out.f32")
        self.assertTrue(self.ask(op="forward_output", path=out)["ok"])
        got = torch.from_file(out, size=BATCH * sum(DIMS)).view(BATCH, -1)
        tables, start = [], 0
        for r, d in zip(ROWS, DIMS):
            tables.append(weights[start:start + r * d].view(r, d))
            start += r * d
        expected = torch.cat([torch.stack([t[b].sum(0) if b else torch.zeros(t.shape[1])
                                           for b in bags], 0)
                              for t, bags in zip(tables, BAGS)], 1)
        torch.testing.assert_close(got, expected)

        # One SGD step on row 29 of table 0 (twice in bag 2) and row 6 of table 1 (twice in bag 1).
        rows = os.path.join(self.dir, "rows.i64")
        with open(rows, "wb") as f:
            f.write(torch.tensor([[0, 29], [1, 6]]).numpy().tobytes())
        self.assertTrue(self.ask(op="train_rows", optimizer="sgd", rows_path=rows, path=out)["ok"])
        got = torch.from_file(out, size=2 * (8 + 16))
        before, after = got[:24], got[24:]
        torch.testing.assert_close(before, torch.cat([tables[0][29], tables[1][6]]))
        expected_update = -0.1 * torch.cat([2 * grad[2, :8], 2 * grad[1, 8:]])
        torch.testing.assert_close(after - before, expected_update, atol=1e-6, rtol=1e-4)

        for what in fp.TIMED:
            reply = self.ask(op="time", what=what)
            self.assertGreater(reply["ms"], 0.0)
        self.assertTrue(self.ask(op="quit")["ok"])
        self.assertEqual(self.proc.wait(timeout=60), 0)

    def test_a_bad_command_is_answered_then_the_process_ends(self):
        self.replies.readline()
        reply = self.ask(op="time", what="forward")
        self.assertFalse(reply["ok"])
        self.assertIn("no case loaded", reply["error"])
        self.assertEqual(self.proc.wait(timeout=60), 1)
        self.assertIn("embshard.fbgemm_peer: no case loaded", self.proc.stderr.read())


if __name__ == "__main__":
    unittest.main()
