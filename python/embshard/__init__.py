"""embshard: plans how to shard a DLRM's embedding tables across devices.

A plan from your tables, or from TorchRec's EmbeddingBagConfigs with a few
sample batches, and TorchRec's sharding plan back:

    import embshard
    plan = embshard.plan(configs, samples=[kjt0, kjt1], devices=8, mem_per_device="40GB")
    print(plan.report())          # a row per device: memory, predicted costs
    print(plan.explain())         # why each table is where it is
    sharding_plan = plan.to_torchrec("sparse_arch.embedding_bag_collection")
    model = DistributedModelParallel(model, plan=sharding_plan, ...)

or in place of TorchRec's planner, with its shape:

    planner = embshard.EmbshardPlanner(topology=Topology(world_size=8, compute_device="cuda"),
                                       batch_size=512, constraints=constraints)
    sharding_plan = planner.collective_plan(model, sharders, pg)

TorchRec's fields are those of TorchRec 1.9; torchrec itself is imported only
to build its ShardingPlan objects (without it, the same content comes back
as dicts). The search runs in embshard's C++ library (the extension
embshard._embshard) without the GIL; its notes go to
logging.getLogger("embshard"); its errors raise EmbshardError with the
library's message. The shipped cost models are found beside the package
(the file embshard-data-dir) or through $EMBSHARD_DATA_DIR.

Modules: embshard.torchrec (table specs from configs and samples, plan files
to TorchRec; `python3 -m embshard.torchrec tables ...`), embshard.plan_file
(the plan file reader), embshard.breakdown (where predicted and measured
costs part; `python3 -m embshard.breakdown ...`).
"""

import logging

from ._errors import EmbshardError

EmbshardError.__module__ = "embshard"  # tracebacks name it as users import it
from .planner import EmbshardPlanner
from .planning import Device, Plan, Shard, Table, plan

__all__ = ["EmbshardError", "EmbshardPlanner", "Device", "Plan", "Shard", "Table", "plan",
           "planner_names", "cost_model_names", "sharding_type_names", "__version__"]

# A library says nothing unless its user configures logging.
logging.getLogger("embshard").addHandler(logging.NullHandler())

try:
    from ._embshard import __version__
except ImportError:  # the pure-Python modules work without the extension
    __version__ = "unbuilt"


def planner_names():
    """The planners plan(algo=...) takes."""
    from .planning import _native
    return list(_native().planner_names())


def cost_model_names():
    """The cost models plan(cost_model=...) takes."""
    from .planning import _native
    return list(_native().cost_model_names())


def sharding_type_names():
    """The TorchRec sharding types plans may use (plan(sharding_types=...))."""
    from .planning import _native
    return list(_native().sharding_type_names())
