#!/usr/bin/env python3
"""Times NeuroShard's own Python search (daochenzha/neuroshard, fetched by
the user and never committed here) on an embshard workload: the same tables,
devices, memory rule and search parameters as `embshard bench plan`.

Its cost networks get their published sizes and random weights: the search's
work (beam 3, 10 steps, top-10 + top-10 candidates, 11 dim caps, a greedy over
every cap) does not depend on what the weights say, only on how many greedy
runs fit the memory. One thread, as torch.set_num_threads(1) in its modules.

usage: neuroshard_reference.py NEUROSHARD_DIR WORKLOAD_DIR DEVICES [MEM_SLACK]
prints: seconds
"""
import json
import sys
import time


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    repo, workload, devices = sys.argv[1], sys.argv[2], int(sys.argv[3])
    slack = float(sys.argv[4]) if len(sys.argv) > 4 else 1.3
    sys.path.insert(0, repo)
    import torch
    from neuroshard.comm_cost_model import CommCostModel, CommCostNet
    from neuroshard.compute_cost_model import ComputeCostModel, ComputeCostNet
    from neuroshard.neurosharder import NeurSharder
    from neuroshard.utils import dict2tensor, table_size

    torch.manual_seed(0)
    torch.set_num_threads(1)
    with open(f"{workload}/tables.json") as f:
        tables = json.load(f)["tables"]
    configs = []
    for t in tables:
        c = {"row": int(t["rows"]), "dim": int(t["dim"]), "pooling_factor": float(t["pooling_factor"])}
        for i, v in enumerate(t["row_reuse_histogram"]):
            c[f"bin_{i:02d}"] = float(v)
        configs.append(c)
    sizes = [table_size(c["row"], c["dim"]) for c in configs]
    # bench plan's rule: slack x an even share, but every table fits whole.
    max_mem = max(slack * sum(sizes) / devices, max(sizes) * (1 + 1e-9))

    features = dict2tensor(configs)
    compute = ComputeCostModel()
    compute._cost_net = ComputeCostNet(features.shape[1], [128, 32], [32, 64])
    compute._feature_means = features.mean(dim=0)
    compute._feature_stds = features.std(dim=0) + 1e-6
    comm = []
    for inputs in (2 * devices, devices):  # forward: dims + delays; backward: dims
        m = CommCostModel(devices)
        m._cost_net = CommCostNet(inputs, [128, 64, 32, 16], devices)
        m._feature_means = torch.zeros(inputs)
        m._feature_stds = torch.ones(inputs)
        comm.append(m)
    sharder = NeurSharder(compute, comm[0], comm[1], configs, devices, max_mem)
    start = time.perf_counter()
    sharder.shard(k=3, n=10, max_length=10, search_steps=11)
    print(f"{time.perf_counter() - start:.4f}")


if __name__ == "__main__":
    main()
