"""Table specs from the real TorchRec classes: EmbeddingBagConfigs, an
EmbeddingBagCollection and KeyedJaggedTensors (torch tensors) give the same
figures, and the same plans, as the stand-ins of test_embshard_table_specs.py
built from the same data. Needs torch and TorchRec (scripts/install_torchrec.sh);
skipped without them. From python/tests:

    PYTHONPATH=<build>/python <repo>/.venv-torchrec/bin/python \
        -m unittest -v test_torchrec_table_specs
"""

import importlib.util
import unittest
import warnings

import embshard
import embshard.torchrec as et
import test_embshard_planner as standin_planner
from test_embshard_table_specs import make_kjt, model_batches, model_configs

HAVE_TORCHREC = importlib.util.find_spec("torchrec") is not None
NO_TORCHREC = "torchrec not importable (scripts/install_torchrec.sh installs it)"
if HAVE_TORCHREC:
    import torch
    from torchrec.modules.embedding_configs import EmbeddingBagConfig
    from torchrec.modules.embedding_modules import EmbeddingBagCollection
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor


def real_configs(configs):
    return [EmbeddingBagConfig(name=c.name, num_embeddings=c.num_embeddings,
                               embedding_dim=c.embedding_dim, feature_names=list(c.feature_names))
            for c in configs]


def real_kjt(kjt):
    """TorchRec's KeyedJaggedTensor of a stand-in's keys, values and lengths
    (int64 values, int32 lengths, as data loaders give them)."""
    return KeyedJaggedTensor.from_lengths_sync(
        keys=list(kjt.keys()), values=torch.tensor(list(kjt.values()), dtype=torch.int64),
        lengths=torch.tensor(list(kjt.lengths()), dtype=torch.int32))


def quietly(f, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", et.SampleWarning)
        return f(*args, **kwargs)


@unittest.skipUnless(HAVE_TORCHREC, NO_TORCHREC)
class RealClasses(unittest.TestCase):
    def setUp(self):
        self.standin_configs, self.standin_batches = model_configs(), model_batches()
        self.configs = real_configs(self.standin_configs)
        self.batches = [real_kjt(b) for b in self.standin_batches]

    def test_the_same_figures(self):
        ours = et.table_specs(self.configs, self.batches)
        self.assertEqual(ours, et.table_specs(self.standin_configs, self.standin_batches))
        self.assertEqual(ours["from_profile"], [])
        self.assertEqual(ours["batch_size"], 64)
        # Per-rank batches joined into global batches: 3 batches, 1 whole pair.
        joined = quietly(et.table_specs, self.configs, self.batches, ranks=2)
        self.assertEqual(joined, quietly(et.table_specs, self.standin_configs,
                                         self.standin_batches, ranks=2))
        self.assertEqual(joined["batch_size"], 128)

    def test_jagged_tensor_dicts(self):
        batch = self.batches[0]
        want = et.table_specs(self.configs, batch)
        self.assertEqual(et.table_specs(self.configs, batch.to_dict()), want)
        pairs = {k: (jt.values(), jt.lengths()) for k, jt in batch.to_dict().items()}
        self.assertEqual(et.table_specs(self.configs, pairs), want)

    def test_a_collections_own_configs(self):
        ebc = EmbeddingBagCollection(tables=self.configs, device=torch.device("meta"))
        self.assertEqual(et.table_specs(ebc.embedding_bag_configs(), self.batches),
                         et.table_specs(self.standin_configs, self.standin_batches))

    def test_the_same_plan(self):
        args = dict(devices=4, mem_per_device="1MB", cost_model="analytic", explain=False)
        ours = embshard.plan(self.configs, samples=self.batches, **args)
        theirs = embshard.plan(self.standin_configs, samples=self.standin_batches, **args)
        self.assertEqual(ours.json["tables"], theirs.json["tables"])
        self.assertEqual(ours.predicted_cost_ms, theirs.predicted_cost_ms)
        self.assertEqual(ours.batch_size, 64)

    def test_the_same_plan_through_the_planner(self):
        # Four ranks' KJTs: the planner joins them into the plan's global batch.
        standin = [make_kjt({"f": [[10 * r + b, 10 * r + b + 1] for b in range(8)]})
                   for r in range(4)]
        one = [EmbeddingBagConfig(name="t", num_embeddings=100_000, embedding_dim=16,
                                  feature_names=["f"])]
        plans = []
        for configs, samples, module in (
                (one, [real_kjt(b) for b in standin], None),
                (standin_planner.one_table(), standin, standin_planner.dlrm)):
            p = standin_planner.planner(samples=samples)
            model = module(configs) if module else \
                EmbeddingBagCollection(tables=configs, device=torch.device("meta"))
            quietly(p.plan, model)
            plans.append(p.last_plan)
        self.assertEqual(plans[0].json["tables"], plans[1].json["tables"])
        self.assertEqual(plans[0].batch_size, 8 * 4)

    def test_a_variable_batch_per_feature_is_refused(self):
        kjt = KeyedJaggedTensor(keys=["user_id", "item_id"], values=torch.tensor([1, 2, 3]),
                                lengths=torch.tensor([1, 1, 1]),
                                stride_per_key_per_rank=[[1], [2]])
        with self.assertRaisesRegex(et.TableSpecError, "variable batch per feature is not "
                                                       "supported"):
            et.table_specs(self.configs, kjt)


if __name__ == "__main__":
    unittest.main()
