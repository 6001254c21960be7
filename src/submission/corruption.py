"""Span-corruption batches built on the device with tensor operations.

At a millisecond or two per GPU step the course's `CharCorruptionDataset.__getitem__`
(Python strings, one row at a time, a DataLoader behind it) cannot keep up. This module
holds every document once, as a padded id tensor on the device, and builds whole batches
from a tensor of document indices: truncation lengths, span lengths and span starts are
drawn as tensors from one torch.Generator, and the rows are assembled with a gather. No
Python loop over rows, no read-back to the host.

`__getitem__` stays the definition; the draws here have its distribution (tested against
it on CPU, row format and distributions):

    n     = min(len(doc), U[4, max_length])
    span  = min(n, U[1, 2 * max(1, round(n / 4)) - 1])      round halves to even
    start = U[0, n - span]
    row   = doc[:start] MASK doc[start+span:n] MASK doc[start:start+span] PAD...
"""

import torch

from .dataset import MASK_CHAR, MIN_DOC_CHARS, PAD_CHAR

# Integers are drawn as (a uniform 62-bit integer) mod k: exact integer arithmetic on every
# device, with a bias of at most k / 2**62 (k <= the block size).
_RANDOM_BITS = 1 << 62


class CorruptionBatches:
    """Batches (x, y) of span-corruption rows of `dataset`'s documents, made on `device`.

    `dataset` is a CharCorruptionDataset; only the first max_length characters of a
    document can ever be drawn, so only those are kept. `seed` seeds the generator (a
    generator on `device`); `state()`/`set_state()` save and restore it for resume.
    """

    def __init__(self, dataset, device="cpu", seed=0):
        self.device = torch.device(device)
        self.block_size = dataset.block_size
        self.max_length = dataset.max_length
        self.pad_id = dataset.stoi[PAD_CHAR]
        self.mask_id = dataset.stoi[MASK_CHAR]
        docs = [dataset.vocab.encode(d[:self.max_length]) for d in dataset.data]
        ids = torch.full((len(docs), self.max_length), self.pad_id, dtype=torch.long)
        for i, d in enumerate(docs):
            ids[i, :len(d)] = torch.tensor(d, dtype=torch.long)
        self.docs = ids.to(self.device)
        self.lengths = torch.tensor([len(d) for d in docs], dtype=torch.long, device=self.device)
        self.generator = torch.Generator(self.device)
        self.generator.manual_seed(seed)
        self._positions = torch.arange(self.block_size, device=self.device)

    def __len__(self):
        return len(self.lengths)

    def state(self):
        return self.generator.get_state()

    def set_state(self, state):
        self.generator.set_state(state)

    def _below(self, k):
        """A uniform integer in [0, k) for every entry of k (k >= 1)."""
        bits = torch.randint(_RANDOM_BITS, k.shape, generator=self.generator, device=self.device)
        return bits % k

    def draw(self, idx):
        """(n, span, start) for the documents `idx`: truncated length, span length, span start."""
        cut = MIN_DOC_CHARS + self._below(torch.full_like(idx, self.max_length - MIN_DOC_CHARS + 1))
        n = torch.minimum(self.lengths[idx], cut)
        quarter = torch.round(n / 4).long().clamp(min=1)  # torch.round halves to even, as Python's round
        span = torch.minimum(n, 1 + self._below(2 * quarter - 1))
        start = self._below(n - span + 1)
        return n, span, start

    def rows(self, idx, n, span, start):
        """The (B, block_size) rows prefix MASK suffix MASK span PAD... of the documents `idx`."""
        j = self._positions[None, :]
        n, span, start = n[:, None], span[:, None], start[:, None]
        second = n - span + 1  # position of the second MASK
        end = n + 2  # first PAD position
        source = torch.where(j < start, j,  # the prefix, in place
                             torch.where(j < second, j - 1 + span,  # the suffix, one right of where it was
                                         j - second - 1 + start))  # the span after the second MASK
        ids = self.docs[idx].gather(1, source.clamp(0, self.max_length - 1))
        ids = torch.where((j == start) | (j == second), self.mask_id, ids)
        return torch.where(j >= end, self.pad_id, ids)

    def __call__(self, idx):
        """(x, y) for the documents `idx` (a long tensor on the device): x = row[:-1], y = row[1:]."""
        idx = idx.to(self.device)
        row = self.rows(idx, *self.draw(idx))
        return row[:, :-1], row[:, 1:]
