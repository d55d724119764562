"""Exact global retrieval metrics inside DDP validation, without gathering embeddings.

Each rank embeds its own slice of the validation set and calls
``retrieval_checks.evaluate(..., process_group=...)`` once: every rank gets the same
result, equal bit for bit to evaluating the whole set in one process, and the gate
passes or fails identically on every rank.

Run on CPU (Gloo) with two processes::

    torchrun --nproc_per_node=2 examples/ddp_validation.py

On GPUs (one process per GPU, NCCL)::

    torchrun --nproc_per_node=4 examples/ddp_validation.py --backend nccl

The data is synthetic (class prototypes plus noise, embedded by a fixed random
linear model), so the script needs no download.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

import retrieval_checks as rc

N_ITEMS, N_CLASSES, D_IN, D_OUT = 3000, 60, 64, 32


def validation_set(seed: int = 0):
    """The whole validation set: inputs (N x D_IN float32) and class labels."""
    rng = np.random.default_rng(seed)
    prototypes = rng.standard_normal((N_CLASSES, D_IN))
    labels = rng.integers(0, N_CLASSES, N_ITEMS)
    inputs = prototypes[labels] + 1.0 * rng.standard_normal((N_ITEMS, D_IN))
    return inputs.astype(np.float32), labels


def model(seed: int = 1):
    """A fixed embedding model (a random linear map)."""
    import torch

    torch.manual_seed(seed)
    return torch.nn.Linear(D_IN, D_OUT, bias=False)


def rank_slice(n: int, rank: int, world: int) -> np.ndarray:
    """This rank's item indices: contiguous and disjoint (no sampler padding, so no
    item is counted twice; DistributedSampler's padding would be refused)."""
    return np.arange(n * rank // world, n * (rank + 1) // world)


def validate(process_group=None, rank: int = 0, world: int = 1, device: str = "cpu"):
    """Embed this rank's slice and evaluate the whole set (leave-one-out retrieval
    by class label): one call, exact global metrics, the same on every rank."""
    import torch

    inputs, labels = validation_set()
    idx = rank_slice(len(inputs), rank, world)
    net = model().to(device).eval()
    with torch.no_grad():
        emb = net(torch.from_numpy(inputs[idx]).to(device))
    result = rc.evaluate(
        emb,
        None,
        query_labels=labels[idx],
        query_ids=idx,
        metrics=["map@R", "hit_rate@1", "mrr"],
        device=device,
        process_group=process_group,
    )
    rc.assert_metric(result, "hit_rate@1", at_least=0.5)  # the gate: same verdict on every rank
    return result


def main() -> None:
    import torch
    import torch.distributed as dist

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    args = parser.parse_args()
    dist.init_process_group(
        args.backend
    )  # torchrun sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    device = "cpu"
    if args.backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", rank))
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    try:
        result = validate(dist.group.WORLD, rank, world, device)
        if rank == 0:
            print(
                {name: round(value, 4) for name, value in result.items()}, f"over {world} rank(s)"
            )
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
