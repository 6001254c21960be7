"""Data-parallel training over several processes, as torchrun launches them.

    torchrun --standalone --nproc_per_node=2 src/run.py --function pretrain ...

Every process holds the whole model and takes its share of each of the course's batches
(the global batch stays `batch_size` rows, cut into one slice per process); backward's
gradients are averaged across processes by DistributedDataParallel. The course's loss is a
mean over the batch's non-PAD targets, so each process weighs its slice's mean by its share
of the global batch's targets (times the number of processes, which DDP divides by): the
averaged gradient is then that of the global batch, and the update the one a single process
makes on it. Process 0 writes params, checkpoints, the run record and the progress bars.

Outside torchrun (no WORLD_SIZE in the environment) nothing here changes anything: the
world is one process and every helper is the identity.
"""

import os
import random

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


def launched():
    """True in a process torchrun started as one of several."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def setup():
    """Join the process group torchrun describes in the environment (nccl on CUDA, one GPU
    per process by LOCAL_RANK; gloo on CPU). Nothing to do outside torchrun."""
    if not launched() or dist.is_initialized():
        return
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")


def teardown():
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def world():
    """(rank, number of processes); (0, 1) outside a process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def is_main():
    return world()[0] == 0


def same(value):
    """Process 0's `value` (any picklable object), on every process."""
    if world()[1] == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather(value):
    """Every process's `value`, as a list in rank order, on every process."""
    out = [None] * world()[1]
    dist.all_gather_object(out, value)
    return out


def split_rng():
    """Give each process its own torch and Python random streams (dropout masks, span
    draws, DataLoader workers), derived from one seed all processes agree on."""
    rank, size = world()
    if size == 1:
        return
    base = same(int(torch.randint(1 << 62, (1,))))
    torch.manual_seed(base + rank)
    random.seed(base + rank)


def share(rows):
    """(lo, hi, empty) of this process's slice of a global batch of `rows` rows.

    Slices differ by at most one row. A process left without a row (the last batch can be
    shorter than the number of processes) takes row 0 with weight zero: every process must
    run forward and backward for the gradient all-reduce.
    """
    rank, size = world()
    lo, hi = rows * rank // size, rows * (rank + 1) // size
    return (0, 1, True) if hi == lo else (lo, hi, False)


class ShareSampler:
    """A DataLoader batch sampler: this process's slice of each of the course's batches
    (index order, or one random order per epoch from a generator seeded alike everywhere)."""

    def __init__(self, n_items, batch_size, shuffle, seed):
        self.n_items, self.batch_size, self.shuffle = n_items, batch_size, shuffle
        self.generator = torch.Generator()
        self.generator.manual_seed(seed)

    def __len__(self):
        return -(-self.n_items // self.batch_size)

    def __iter__(self):
        order = torch.randperm(self.n_items, generator=self.generator) if self.shuffle else torch.arange(self.n_items)
        for batch in order.split(self.batch_size):
            lo, hi, _ = share(len(batch))
            yield batch[lo:hi].tolist()


def weigh(targets, untrimmed, rows):
    """This process's loss weight and the global batch's untrimmed size.

    targets: the number of non-PAD targets in this process's slice (a tensor on the
    device); untrimmed: its untrimmed size; rows: the global batch's rows. One all-reduce
    of the target count, no read-back to the host.
    """
    lo, hi, empty = share(rows)
    own = targets.double() * (0.0 if empty else 1.0)
    total = own.clone()
    dist.all_reduce(total)
    return world()[1] * own / total.clamp(min=1), untrimmed // (hi - lo) * rows


def sum_over_processes(values):
    values = values.clone()
    dist.all_reduce(values)
    return values


class _BatchLoss(nn.Module):
    """The model's loss on a training batch as one forward(), which DDP wraps."""

    def __init__(self, model, loss_fn):
        super().__init__()
        self.model, self.loss_fn = model, loss_fn

    def forward(self, batch, device):
        return self.loss_fn(self.model, batch, device)


def wrap(model, loss_fn, device):
    """DDP around loss_fn(model, batch, device). The model itself stays unwrapped, so its
    state_dict (params, checkpoints) has the single-process names, no 'module.' prefix."""
    ids = [torch.cuda.current_device()] if device.type == "cuda" else None
    return DistributedDataParallel(_BatchLoss(model, loss_fn), device_ids=ids)
