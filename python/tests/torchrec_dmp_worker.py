"""The model, batches and training of test_torchrec_dmp.py: one rank's
DistributedModelParallel run (a spawned process), and the unsharded reference
trained on the same batches. Needs torch and TorchRec.

The model: an EmbeddingBagCollection of 8 tables ('shared' looked up by three
features), a dense layer for 4 dense features, and a linear layer over both
to one logit; the loss is binary cross-entropy with logits, averaged over a
rank's batch.

The optimizers: a sharded table's fused kernel (FBGEMM's, on the host for a
CPU) applies EXACT_SGD in the backward pass; the dense layers and the
data_parallel tables (under DistributedDataParallel) step by plain SGD at the
same rate. Both see the mean of the ranks' loss gradients: DDP averages its
parameters' gradients, and TorchRec divides the gradients its all-to-alls
send back by the world size (comm_ops.GRADIENT_DIVISION, on by default). So
the reference is SGD on the mean of the ranks' mean losses: the mean loss
of the global batch.
"""

import json
import os
import traceback

import torch

TABLES = [  # name, rows, dim, features
    ("big_a", 8192, 16, ["f_a"]),
    ("big_b", 2048, 32, ["f_b"]),
    ("shared", 256, 16, ["f_s1", "f_s2", "f_s3"]),
    ("small", 16, 8, ["f_small"]),
    ("t4", 100, 8, ["f4"]),
    ("t5", 200, 12, ["f5"]),
    ("t6", 300, 16, ["f6"]),
    ("t7", 50, 4, ["f7"]),
]
FEATURES = [f for _, _, _, features in TABLES for f in features]
ROWS = {f: rows for _, rows, _, features in TABLES for f in features}
DENSE_IN, DENSE_OUT = 4, 8
BATCH_PER_RANK = 16
STEPS = 20
LEARNING_RATE = 0.5  # the sharded tables' EXACT_SGD and the dense SGD alike
MODEL_SEED = 7


def embedding_bag_configs():
    from torchrec.modules.embedding_configs import EmbeddingBagConfig
    return [EmbeddingBagConfig(name=name, num_embeddings=rows, embedding_dim=dim,
                               feature_names=list(features))
            for name, rows, dim, features in TABLES]


class Model(torch.nn.Module):
    def __init__(self, device=None):
        super().__init__()
        from torchrec.modules.embedding_modules import EmbeddingBagCollection
        self.sparse = EmbeddingBagCollection(tables=embedding_bag_configs(), device=device)
        width = sum(dim * len(features) for _, _, dim, features in TABLES)
        self.dense = torch.nn.Linear(DENSE_IN, DENSE_OUT, device=device)
        self.over = torch.nn.Linear(DENSE_OUT + width, 1, device=device)

    def forward(self, dense, features):
        # By name: a sharded collection orders its outputs by shard, not by feature.
        pooled = self.sparse(features).to_dict()
        pooled = torch.cat([pooled[f] for f in FEATURES], dim=1)
        return self.over(torch.cat([torch.relu(self.dense(dense)), pooled], dim=1)).squeeze(1)


def reference_model():
    """The unsharded model, its weights drawn from MODEL_SEED (the sharded
    runs copy them)."""
    torch.manual_seed(MODEL_SEED)
    model = Model(torch.device("cpu"))
    with torch.no_grad():
        for _, p in model.sparse.named_parameters():
            p.uniform_(-0.5, 0.5)  # wider than the default, so the tables move the loss
    return model


def batch(step, rank):
    """Rank `rank`'s batch of step `step`: (dense, KeyedJaggedTensor, labels),
    the same wherever it is drawn."""
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor
    g = torch.Generator().manual_seed(1_000_003 * step + 101 * rank + 1)
    lengths, values = [], []
    for f in FEATURES:
        n = torch.randint(0, 4, (BATCH_PER_RANK,), generator=g)
        lengths.append(n)
        # Half the lookups on the first rows: rows read several times a batch.
        hot = torch.randint(0, 2, (int(n.sum()),), generator=g).bool()
        rows = torch.where(hot, torch.randint(0, min(8, ROWS[f]), hot.shape, generator=g),
                           torch.randint(0, ROWS[f], hot.shape, generator=g))
        values.append(rows)
    kjt = KeyedJaggedTensor.from_lengths_sync(keys=FEATURES, values=torch.cat(values),
                                              lengths=torch.cat(lengths))
    dense = torch.randn(BATCH_PER_RANK, DENSE_IN, generator=g)
    labels = torch.randint(0, 2, (BATCH_PER_RANK,), generator=g).float()
    return dense, kjt, labels


def loss_of(model, dense, kjt, labels):
    return torch.nn.functional.binary_cross_entropy_with_logits(model(dense, kjt), labels)


def train_reference(world_size, steps=STEPS):
    """([global mean loss per step], {table: final weight}) of the unsharded
    model trained by SGD on the mean of the ranks' mean losses."""
    model = reference_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    losses = []
    for step in range(steps):
        optimizer.zero_grad()
        loss = sum(loss_of(model, *batch(step, r)) for r in range(world_size)) / world_size
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    weights = {name: model.sparse.embedding_bags[name].weight.detach().clone()
               for name, _, _, _ in TABLES}
    return losses, weights


# ---- one rank of a DistributedModelParallel run -------------------------------

def _local_shards(state):
    """{table: [(row offset, col offset, tensor)]} of this rank's pieces of
    each table in a DistributedModelParallel state_dict (a replica: the whole)."""
    out = {}
    for key, value in state.items():
        parts = key.split(".")
        if "embedding_bags" not in parts or parts[-1] != "weight":
            continue
        table = parts[-2]
        if hasattr(value, "local_shards"):
            out[table] = [(s.metadata.shard_offsets[0], s.metadata.shard_offsets[1], s.tensor)
                          for s in value.local_shards()]
        else:
            out[table] = [(0, 0, value)]
    return out


def _load_reference(dmp, reference):
    """Every rank's shards and replicas set to the reference model's weights."""
    full = reference.state_dict()
    state = dmp.state_dict()
    with torch.no_grad():
        for table, pieces in _local_shards(state).items():
            weight = reference.sparse.embedding_bags[table].weight
            for r0, c0, t in pieces:
                t.copy_(weight[r0:r0 + t.shape[0], c0:c0 + t.shape[1]])
        for key, value in state.items():
            if "embedding_bags" not in key and key in full:
                value.copy_(full[key])


def _sharders():
    from fbgemm_gpu.split_embedding_configs import EmbOptimType
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    # The fused kernel's optimizer on a CPU: plain SGD on each row read.
    return [EmbeddingBagCollectionSharder(fused_params={"optimizer": EmbOptimType.EXACT_SGD,
                                                       "learning_rate": LEARNING_RATE})]


def run_rank(rank, world_size, port, local_world_size, planner_args, plan_json, out_dir):
    """One rank: plans with EmbshardPlanner.collective_plan (or, with
    plan_json, hands that plan file to TorchRec), shards the model under
    DistributedModelParallel on gloo, trains STEPS steps, and writes
    rank<N>.pt: the global mean loss per step and its final shards."""
    out = os.path.join(out_dir, f"rank{rank}.pt")
    # TorchRec and torch warn at length: their output goes to rank<N>.log,
    # which the test shows where a rank fails.
    log = os.open(os.path.join(out_dir, f"rank{rank}.log"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                          WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank % local_world_size),
                          LOCAL_WORLD_SIZE=str(local_world_size))
        torch.set_num_threads(1)
        import torch.distributed as dist
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
        torch.save(_train(rank, world_size, local_world_size, planner_args, plan_json), out)
        dist.destroy_process_group()
    except BaseException:
        torch.save({"error": traceback.format_exc()}, out)
        raise


def plan_for(world_size, local_world_size, planner_args, pg=None):
    """(ShardingPlan, planner): EmbshardPlanner's plan of the model for
    world_size CPU ranks (TorchRec's Topology, each rank's memory ddr_cap,
    none reserved), the rest of planner_args its own; with pg, planned on
    rank 0 and broadcast (collective_plan)."""
    import embshard
    from torchrec.distributed.planner.types import Topology
    args = dict(planner_args)
    topology = Topology(world_size=world_size, compute_device="cpu",
                        ddr_cap=args.pop("ddr_cap"), local_world_size=local_world_size)
    planner = embshard.EmbshardPlanner(topology=topology, reserved_fraction=0.0,
                                       cost_model="analytic", **args)
    model = Model(torch.device("meta"))
    if pg is None:
        return planner.plan(model), planner
    return planner.collective_plan(model, None, pg), planner


def _train(rank, world_size, local_world_size, planner_args, plan_json):
    import torch.distributed as dist
    import embshard.torchrec as et
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.types import ShardingEnv
    from torchrec.optim.optimizers import in_backward_optimizer_filter

    if plan_json is None:
        plan, _ = plan_for(world_size, local_world_size, planner_args, dist.GroupMember.WORLD)
    else:
        plan = et.to_torchrec_plan(json.loads(plan_json), "sparse", "cpu", local_world_size)
    reference = reference_model()
    dmp = DistributedModelParallel(Model(torch.device("cpu")), device=torch.device("cpu"),
                                   env=ShardingEnv.from_process_group(dist.GroupMember.WORLD),
                                   plan=plan, sharders=_sharders())
    _load_reference(dmp, reference)
    dense_params = [p for _, p in in_backward_optimizer_filter(dmp.named_parameters())]
    optimizer = torch.optim.SGD(dense_params, lr=LEARNING_RATE)
    losses = []
    for step in range(STEPS):
        optimizer.zero_grad()
        loss = loss_of(dmp, *batch(step, rank))
        loss.backward()
        optimizer.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(total.item() / world_size)
    shards = {table: [(r0, c0, t.detach().clone()) for r0, c0, t in pieces]
              for table, pieces in _local_shards(dmp.state_dict()).items()}
    types = {name: s.sharding_type for module in plan.plan.values() for name, s in module.items()}
    return {"losses": losses, "shards": shards, "types": types}
