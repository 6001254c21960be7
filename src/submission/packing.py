"""Packing: a training batch without its padding, which the fast path trains on.

A pretraining row fills on average under half of its 127 positions (the document is
truncated to a random length), a question row well under half. The loss ignores PAD
targets and attention is causal, so the positions after a row's last target change
nothing: the trainer cuts them off (length_groups), and GPT.packed_loss runs the rest
back to back (Packing). A plain model (GPTConfig.implementation) takes each batch whole
(whole_batch), as the course does.
"""

import torch
from torch.utils.data import default_collate

# Attention runs per length group on a padded block: on a CPU groups of about 8 rows, at most
# 8 groups (measured: batch 16 -> 2 groups, 32 -> 4, 128 -> 8 were fastest); one on a GPU.
CPU_LENGTH_GROUPS = 8
CPU_ROWS_PER_GROUP = 8


def cpu_length_groups(batch_size):
    return min(CPU_LENGTH_GROUPS, max(1, batch_size // CPU_ROWS_PER_GROUP))


def length_groups(batch, groups=1):
    """Stack a batch, sort its rows by length and cut it into `groups` slices, each trimmed
    to the last column where one of its rows still has a non-PAD target.

    The positions cut off change nothing computed for the others. Returns ([(x, y), ...],
    untrimmed size); the learning-rate schedule counts the untrimmed size, as the course does.
    """
    return group_rows(*default_collate(batch), groups)


def group_rows(x, y, groups=1):
    """length_groups of a batch already stacked as (x, y)."""
    ends = row_ends(y)
    if groups > 1:
        order = torch.argsort(ends, stable=True)
        x, y, ends = x[order], y[order], ends[order]
    chunks = []
    for rows in torch.arange(len(x)).tensor_split(min(groups, len(x))):
        end = max(1, int(ends[rows].max()))
        chunks.append((x[rows, :end].contiguous(), y[rows, :end].contiguous()))
    return chunks, y.numel()


def packed_batch(batch, groups):
    """Collate: the batch packed without padding (Packing), and its untrimmed size."""
    chunks, untrimmed = length_groups(batch, groups)
    return Packing(chunks), untrimmed


def whole_batch(batch):
    """Collate: the batch as the course computes it, padding and all."""
    x, y = default_collate(batch)
    return (x, y), y.numel()


def row_ends(y):
    """One past each row's last non-PAD target (0 for a row of PAD only)."""
    return torch.where(y != 0, torch.arange(1, y.size(1) + 1, device=y.device), 0).amax(1)


class Packing:
    """A training batch with its padding taken out: the real positions of each length group
    (see length_groups), stored back to back.

    Position-wise layers (embeddings, layer norms, MLPs, head, loss) then run once over the
    packed tokens: no padding at all, and one large matrix product instead of one per group.
    Attention mixes positions, so each group is unpacked to its padded block for it. A
    position is real if its row still has a target at or after it; cut positions change
    nothing else, as attention is causal and the loss ignores PAD targets.
    """

    def __init__(self, chunks):
        self.shapes, self.index = [], []
        tokens, targets, pos = [], [], []
        for x, y in chunks:
            B, T = x.shape
            index = (torch.arange(T, device=y.device) < row_ends(y)[:, None]).view(-1).nonzero().squeeze(1)
            self.shapes.append((B, T))
            self.index.append(index)
            tokens.append(x.reshape(-1)[index])
            targets.append(y.reshape(-1)[index])
            pos.append(index % T)
        self.tokens, self.targets, self.pos = torch.cat(tokens), torch.cat(targets), torch.cat(pos)
        self.sizes = [len(i) for i in self.index]

    def to(self, device, non_blocking=False):
        for name in ("tokens", "targets", "pos"):
            setattr(self, name, getattr(self, name).to(device, non_blocking=non_blocking))
        self.index = [i.to(device, non_blocking=non_blocking) for i in self.index]
        return self

    def unpack(self, h):
        """Packed (N, C) -> one zero-padded (B, T, C) block per group."""
        return [h.new_zeros(B * T, h.size(1)).index_copy(0, i, part).view(B, T, -1)
                for (B, T), i, part in zip(self.shapes, self.index, h.split(self.sizes))]

    def pack(self, blocks):
        return torch.cat([b.reshape(-1, b.size(-1)).index_select(0, i) for b, i in zip(blocks, self.index)])
