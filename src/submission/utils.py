"""Sampling, evaluation and the small pieces every stage shares (seeding, precision).

Params files and checkpoints (written whole, read back with one-line errors): checkpoint.py.
"""

import contextlib
import random

import numpy as np
import torch
import torch.nn.functional as F

from .attention import DecodeCache


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def top_k_logits(logits, k):
    v, _ = torch.topk(logits, k)
    out = logits.clone()
    out[out < v[:, [-1]]] = -float("inf")
    return out


@torch.no_grad()
def sample(model, x, steps, temperature=1.0, sample=False, top_k=None):
    """Extend each row of x by `steps` tokens, one model call per token (the course's loop).

    The context is cropped to the model's block. Kept as the reference that batched greedy
    decoding (`greedy_decode`) is tested against.
    """
    block_size = model.max_positions() if hasattr(model, "max_positions") else model.get_block_size()
    model.eval()
    for _ in range(steps):
        x_cond = x if x.size(1) <= block_size else x[:, -block_size:]
        logits, _ = model(x_cond)
        logits = logits[:, -1, :] / temperature
        if top_k is not None:
            logits = top_k_logits(logits, top_k)
        probs = F.softmax(logits.float(), dim=-1)
        if sample:
            ix = torch.multinomial(probs, num_samples=1)
        else:
            _, ix = torch.topk(probs, k=1, dim=-1)
        x = torch.cat((x, ix), dim=1)
    return x


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
                caches = [DecodeCache(lengths - 1, capacity) for _ in model.blocks]
                logits, _ = model(idx[:, :width], caches=caches)
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
                pos = torch.clamp(lengths + n, max=capacity - 1)
                if cached:
                    for c in caches:
                        c.pos = pos
                    logits, _ = model(token[:, None], caches=caches)
                    logits = logits[:, 0]
                else:  # causal: what follows a row's last token never changes its logits
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


def evaluate_places(filepath, predicted_places):
    """(total, correct) of predictions against the file's answers; (0, 0) without answers."""
    with open(filepath, encoding="utf-8") as fin:
        lines = [x.strip().split("\t") for x in fin if x.strip()]
    if not lines or len(lines[0]) == 1:
        print("No gold birth places provided; returning (0,0)")
        return (0, 0)
    true_places = [x[1] for x in lines]
    total = len(true_places)
    assert total == len(predicted_places)
    correct = sum(1 for t, p in zip(true_places, predicted_places) if t == p)
    return (float(total), float(correct))


# --- precision -------------------------------------------------------------------------

def cpu_has_fast_bf16():
    """True when the CPU multiplies bf16 matrices natively (AVX512-BF16 or AMX)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "").split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(precision, device):
    """'auto' -> bf16 where the hardware runs it fast, else fp32."""
    device = torch.device(device)
    if precision not in ("auto", "fp32", "bf16"):
        raise ValueError(f"unknown precision {precision!r}: choose auto, fp32 or bf16")
    if precision != "auto":
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16" if cpu_has_fast_bf16() else "fp32"


def autocast_context(precision, device):
    device = torch.device(device)
    if precision == "bf16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
