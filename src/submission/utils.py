"""Sampling, evaluation and the small pieces every stage shares (seeding, precision).

Params files and checkpoints (written whole, read back with one-line errors): checkpoint.py.
"""

import contextlib
import random

import numpy as np
import torch
import torch.nn.functional as F



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
    decoding (decoding.greedy_decode) is tested against.
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
