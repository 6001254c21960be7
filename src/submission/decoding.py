"""Greedy decoding of many prompts at once, with a key/value cache where the variant has one.

The course answers each question with `utils.sample`: one prompt at a time, the whole
sequence through the model again for every new token. Here a batch of prompts of
different lengths decodes together, each row at its own positions, and each new token
runs through the model alone, attending to the keys and values the cache kept. The
result is what `sample(..., sample=False)` gives (tests hold the two to it).
"""

import torch

from .utils import autocast_context


class DecodeCache:
    """Keys and values of every layer, for decoding a batch of right-padded prompts.

    Slot j of a layer holds position j. The model's first call fills the slots from the
    prompt batch (positions 0..T-1); each later call feeds one new token per row at `pos`,
    the position each row writes next, and the model moves the cache on after every call
    (`advance`). Rows of different lengths advance together, and a row only attends to
    slots up to its own position, so the padding behind a short prompt is overwritten
    before it is ever read.
    """

    def __init__(self, n_layer, lengths, capacity):
        self.lengths, self.capacity = lengths, capacity
        self.pos = None  # None while the prompts fill the cache; then (B,) positions
        self.layers = [LayerCache(self) for _ in range(n_layer)]

    def advance(self):
        """After a model call: each row's next token goes one position on (after the prompt, at its
        end). Held at the last slot: a row pushed past it has stopped, and its output is not read."""
        nxt = self.lengths if self.pos is None else self.pos + 1
        self.pos = torch.clamp(nxt, max=self.capacity - 1)


class LayerCache:
    """One layer's slots of a DecodeCache: what its attention reads and extends."""

    def __init__(self, cache):
        self.cache = cache
        self.k = self.v = None

    @property
    def pos(self):
        return self.cache.pos

    def extend(self, k, v):
        """Store the new keys/values; return all slots' keys, values and the attendable mask
        (None while the prompt fills the cache: causal attention over it as it is)."""
        B, H, T, _ = k.shape
        pos, capacity = self.cache.pos, self.cache.capacity
        if pos is None:
            self.k = k.new_zeros(B, H, capacity, k.shape[-1])
            self.v = v.new_zeros(B, H, capacity, v.shape[-1])
            self.k[:, :, :T], self.v[:, :, :T] = k, v
            return k, v, None
        rows = torch.arange(B, device=k.device)
        self.k[rows, :, pos] = k[:, :, 0]
        self.v[rows, :, pos] = v[:, :, 0]
        keep = torch.arange(capacity, device=k.device)[None, :] <= pos[:, None]
        return self.k, self.v, keep[:, None, None, :]


@torch.no_grad()
def greedy_decode(model, prompts, steps, stop_id=None, precision="fp32", batch_size=256):
    """Greedy completions of many prompts (lists of ids) at once.

    With a key/value cache where the variant has one (variants.Variant.kv_cache), else (the
    Perceiver, whose bottleneck slots change with every new token) by running the batch
    again after each token. Each row keeps its own positions, so the result is what
    `sample(..., sample=False)` gives one prompt at a time, as long as prompt + completion
    fit in the block (rows stop there). Rows stop early once they have produced `stop_id`.
    Returns each row's new ids, up to and including `stop_id`.
    """
    model.eval()
    device = next(model.parameters()).device
    limit = model.max_positions()
    cached = model.variant.kv_cache
    out = []
    for start in range(0, len(prompts), batch_size):
        chunk = prompts[start:start + batch_size]
        lengths = torch.tensor([len(p) for p in chunk], device=device)
        width = int(lengths.max())
        capacity = min(limit, width + steps)
        idx = torch.zeros(len(chunk), max(width, capacity), dtype=torch.long, device=device)
        for i, p in enumerate(chunk):
            idx[i, :len(p)] = torch.tensor(p, dtype=torch.long)
        rows = torch.arange(len(chunk), device=device)
        new = torch.zeros(len(chunk), steps, dtype=torch.long, device=device)
        done = torch.zeros(len(chunk), dtype=torch.bool, device=device)
        with autocast_context(precision, device):
            if cached:
                cache = DecodeCache(len(model.blocks), lengths, capacity)
                logits, _ = model(idx[:, :width], cache=cache)
            else:
                logits, _ = model(idx[:, :width])
            logits = logits[rows, lengths - 1]
            n = 0
            for n in range(steps):
                token = logits.float().argmax(-1)
                new[:, n] = token
                done |= lengths + n >= limit  # this token already lies outside the block
                if stop_id is not None:
                    done |= token == stop_id
                if bool(done.all()) or n == steps - 1:
                    break
                if cached:  # the token goes where the cache says, and the cache moves on
                    logits, _ = model(token[:, None], cache=cache)
                    logits = logits[:, 0]
                else:  # causal: what follows a row's last token never changes its logits
                    pos = torch.clamp(lengths + n, max=capacity - 1)
                    idx[rows, pos] = token
                    logits, _ = model(idx[:, :int(pos.max()) + 1])
                    logits = logits[rows, pos]
        for i in range(len(chunk)):
            room = max(0, limit - len(chunk[i]) + 1)  # the last token may sit past the block
            ids = new[i, :min(n + 1, room)].tolist()
            if stop_id in ids:
                ids = ids[:ids.index(stop_id) + 1]
            out.append(ids)
    return out
