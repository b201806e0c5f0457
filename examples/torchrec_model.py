"""A TorchRec model whose embedding tables embshard plans.

Eight tables in one EmbeddingBagCollection; `item_id` is looked up by three
features (the item, the clicked items, the bought items) and `creator` by
two. embshard's EmbshardPlanner takes the place of TorchRec's
EmbeddingShardingPlanner, measures pooling and reuse on sample batches, and
its plan goes to DistributedModelParallel.

    python3 examples/torchrec_model.py --plan-only      # no TorchRec needed
    torchrun --nproc_per_node=4 examples/torchrec_model.py   # GPUs, TorchRec
    python3 examples/torchrec_model.py                  # one CPU process, TorchRec

--plan-only plans the same tables with embshard.plan and prints the report
and the ShardingPlan's content as dicts. Everything else needs TorchRec.
"""

import argparse
import os
import random
import sys

import embshard

# TorchRec's EmbeddingBagConfig fields: EmbeddingBagConfig(**table) builds one.
TABLES = [
    {"name": "user_id", "num_embeddings": 2_000_000, "embedding_dim": 128,
     "feature_names": ["user_id"]},
    {"name": "item_id", "num_embeddings": 1_000_000, "embedding_dim": 128,
     "feature_names": ["item_id", "clicked_items", "bought_items"]},
    {"name": "query", "num_embeddings": 500_000, "embedding_dim": 64, "feature_names": ["query"]},
    {"name": "creator", "num_embeddings": 100_000, "embedding_dim": 64,
     "feature_names": ["creator", "followed_creators"]},
    {"name": "brand", "num_embeddings": 50_000, "embedding_dim": 32, "feature_names": ["brand"]},
    {"name": "category", "num_embeddings": 10_000, "embedding_dim": 32,
     "feature_names": ["category"]},
    {"name": "country", "num_embeddings": 1_000, "embedding_dim": 16,
     "feature_names": ["country"]},
    {"name": "hour_of_week", "num_embeddings": 168, "embedding_dim": 8,
     "feature_names": ["hour_of_week"]},
]
# Mean bag length of each feature.
POOLING = {"user_id": 1, "item_id": 1, "clicked_items": 20, "bought_items": 5, "query": 4,
           "creator": 1, "followed_creators": 10, "brand": 3, "category": 2, "country": 1,
           "hour_of_week": 1}
ROWS = {f: t["num_embeddings"] for t in TABLES for f in t["feature_names"]}
BATCH_PER_RANK = 2048


def sample_batch(rng, batch_size=BATCH_PER_RANK):
    """One rank's batch as {feature: (values, lengths)}: bag lengths around
    the feature's pooling factor, row indices log-uniform (row r drawn with
    weight about 1/r: a few hot rows, a long tail). Take real batches from
    your data loader instead."""
    batch = {}
    for feature, pooling in POOLING.items():
        lengths = [rng.randint(0, 2 * pooling) if pooling > 1 else 1 for _ in range(batch_size)]
        rows = ROWS[feature]
        values = [int(rows ** rng.random()) - 1 for _ in range(sum(lengths))]
        batch[feature] = (values, lengths)
    return batch


def plan_only(devices, mem_per_device):
    """embshard alone: the configs as dicts, the batches as dicts."""
    rng = random.Random(1)
    plan = embshard.plan(TABLES, samples=[sample_batch(rng) for _ in range(2)], devices=devices,
                         mem_per_device=mem_per_device)
    print(plan.report())
    print(plan.explain())
    for module, tables in plan.to_torchrec("ebc", as_dicts=True).items():
        for name, sharding in tables.items():
            print(f"{module}.{name}: {sharding['sharding_type']} on ranks {sharding['ranks']}")


def with_torchrec():
    """EmbshardPlanner in place of TorchRec's planner, then one training step."""
    try:
        import torch
        import torch.distributed as dist
        import torchrec
        from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
        from torchrec.distributed.model_parallel import DistributedModelParallel
        from torchrec.distributed.planner import Topology
        from torchrec.distributed.planner.types import ParameterConstraints
        from torchrec.distributed.types import ShardingEnv
        from torch.distributed.optim import (
            _apply_optimizer_in_backward as apply_optimizer_in_backward)
        from torchrec.optim.rowwise_adagrad import RowWiseAdagrad
    except ImportError as e:
        sys.exit(f"this example needs TorchRec ({e}); install it with the torch it names "
                 "(pip install torchrec), or run it with --plan-only")

    # torchrun sets RANK, WORLD_SIZE and LOCAL_RANK; alone it is one CPU process.
    cuda = torch.cuda.is_available() and "LOCAL_RANK" in os.environ
    for key, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "localhost"),
                       ("MASTER_PORT", "29500")):
        os.environ.setdefault(key, value)
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{os.environ['LOCAL_RANK']}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)

    def kjt(batch):
        keys = list(batch)
        return torchrec.KeyedJaggedTensor.from_lengths_sync(
            keys=keys,
            values=torch.tensor([v for k in keys for v in batch[k][0]], dtype=torch.int64),
            lengths=torch.tensor([n for k in keys for n in batch[k][1]], dtype=torch.int32))

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            # On "meta": DistributedModelParallel allocates each rank's shards only.
            self.ebc = torchrec.EmbeddingBagCollection(
                tables=[torchrec.EmbeddingBagConfig(**t) for t in TABLES],
                device=torch.device("meta"))
            width = sum(t["embedding_dim"] * len(t["feature_names"]) for t in TABLES)
            self.over = torch.nn.Linear(width, 1, device=device)

        def forward(self, features):
            return self.over(self.ebc(features).values())

    model = Model()
    # Row-wise Adagrad, the optimizer embshard's memory model counts.
    apply_optimizer_in_backward(RowWiseAdagrad, model.ebc.parameters(), {"lr": 0.01})

    rng = random.Random(rank)
    samples = [kjt(sample_batch(rng)) for _ in range(2)]
    topology = Topology(world_size=world_size, compute_device=device.type,
                        local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", world_size)))
    # The one line that changes: EmbeddingShardingPlanner -> embshard.EmbshardPlanner.
    planner = embshard.EmbshardPlanner(
        topology=topology, batch_size=BATCH_PER_RANK, samples=samples,
        constraints={"hour_of_week": ParameterConstraints(sharding_types=["table_wise"])})
    sharders = [EmbeddingBagCollectionSharder()]
    plan = planner.collective_plan(model, sharders, dist.GroupMember.WORLD)
    if rank == 0:
        print(planner.last_plan.report() if planner.last_plan else "plan received from rank 0")
        print(plan)

    model = DistributedModelParallel(model, env=ShardingEnv.from_process_group(dist.GroupMember.WORLD),
                                     device=device, plan=plan, sharders=sharders)
    loss = model(samples[0].to(device)).sum()
    loss.backward()
    print(f"rank {rank}: one step, loss {loss.item():.4f}")
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan-only", action="store_true",
                        help="plan with embshard alone; no TorchRec needed")
    parser.add_argument("--devices", type=int, default=4, help="--plan-only: devices")
    parser.add_argument("--mem-per-device", default="1GB", help="--plan-only: memory per device")
    args = parser.parse_args()
    if args.plan_only:
        plan_only(args.devices, args.mem_per_device)
    else:
        with_torchrec()


if __name__ == "__main__":
    main()
