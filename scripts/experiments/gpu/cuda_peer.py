#!/usr/bin/env python3
"""PyTorch's embedding bag on a CUDA GPU, timed for one shape: the peer that
embshard's CUDA TBE operator (include/embshard/kernel/tbe_cuda.h) is compared
with. Prints one JSON object.

Tables of `--rows` x dim (dims from `--dims`, cycled over `--tables`), batch
`--batch`, every bag exactly `--pooling` indices drawn uniformly (seeded), one
torch.nn.EmbeddingBag per table (sparse gradients, include_last_offset), the
outputs concatenated as embshard's fused output is. Timed with CUDA events,
median over `--repeats` after `--warmup` untimed calls:

  fwd_ms:   the forward of all tables (+ torch.cat)
  train_ms: forward, backward of a fixed output gradient, and torch.optim.SGD's
            step on the sparse gradients (torch has no row-wise Adagrad)

fwd_gb_per_s counts the useful bytes as embshard's TbeUsefulBytes does:
lookups x dim x 4 read plus batch x total_dim x 4 written.

Example (the shape of test_tbe_cuda's first figure):
  python3 scripts/experiments/gpu/cuda_peer.py --tables 1 --rows 2000000 --dims 128 --batch 4096 --pooling 32
"""
import argparse
import json
import statistics

import torch


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tables", type=int, default=1)
    p.add_argument("--rows", type=int, default=1000000)
    p.add_argument("--dims", default="128", help="comma-separated, cycled over the tables")
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--pooling", type=int, default=32, help="indices per bag")
    p.add_argument("--mode", choices=["sum", "mean"], default="sum")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def timed(fn, repeats, warmup):
    """Median ms of fn() over `repeats` calls, each between two CUDA events."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(warmup + repeats):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(stop))
    return statistics.median(times)


def main():
    args = parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("cuda_peer.py: torch sees no CUDA device")
    device = torch.device("cuda")
    dims = [int(d) for d in args.dims.split(",")]
    table_dims = [dims[t % len(dims)] for t in range(args.tables)]
    gen = torch.Generator(device=device)
    gen.manual_seed(args.seed)
    bags, inputs = [], []
    offsets = torch.arange(0, args.batch + 1, device=device, dtype=torch.int64) * args.pooling
    for dim in table_dims:
        bag = torch.nn.EmbeddingBag(args.rows, dim, mode=args.mode, sparse=True,
                                    include_last_offset=True, device=device)
        with torch.no_grad():
            bag.weight.uniform_(-0.1, 0.1, generator=gen)
        idx = torch.randint(0, args.rows, (args.batch * args.pooling,), device=device,
                            dtype=torch.int64, generator=gen)
        bags.append(bag)
        inputs.append((idx, offsets))
    total_dim = sum(table_dims)
    grad = torch.full((args.batch, total_dim), 1e-3, device=device)
    optimizer = torch.optim.SGD([b.weight for b in bags], lr=args.lr)

    def forward():
        return torch.cat([bag(idx, off) for bag, (idx, off) in zip(bags, inputs)], dim=1)

    def forward_only():
        with torch.no_grad():
            forward()

    def train():
        forward().backward(grad)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    fwd_ms = timed(forward_only, args.repeats, args.warmup)
    train_ms = timed(train, args.repeats, args.warmup)
    lookups = args.tables * args.batch * args.pooling
    useful = 4 * (args.batch * args.pooling * sum(table_dims) + args.batch * total_dim)
    print(json.dumps({
        "peer": "torch.nn.EmbeddingBag (sparse=True) + torch.optim.SGD",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(device),
        "tables": args.tables, "rows": args.rows, "dims": table_dims, "batch": args.batch,
        "pooling": args.pooling, "mode": args.mode, "lookups": lookups,
        "repeats": args.repeats, "warmup": args.warmup,
        "fwd_ms": fwd_ms, "train_ms": train_ms,
        "useful_bytes": useful, "fwd_gb_per_s": useful / (fwd_ms * 1e6),
    }, indent=1))


if __name__ == "__main__":
    main()
