"""Sampling, evaluation and the small pieces every stage shares (seeding, precision, files)."""

import contextlib
import os
import random
import signal
import threading

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


# --- files -----------------------------------------------------------------------------

def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: alive, someone else's
        return True
    return True


def remove_stale_tmp(path):
    """Remove `path.<pid>.tmp` files left by killed writers (their process is gone)."""
    folder, name = os.path.split(os.path.abspath(path))
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        pid = entry[len(name) + 1:-len(".tmp")]
        if entry.startswith(name + ".") and entry.endswith(".tmp") and pid.isdigit() \
                and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            with contextlib.suppress(OSError):
                os.remove(os.path.join(folder, entry))


@contextlib.contextmanager
def stop_signals_held():
    """Hold SIGTERM and SIGINT until the block ends, then deliver the first one that came.

    A stop signal's handler raises an exception wherever the program happens to be; inside
    torch.save it would surface as the zip writer's own error, not as the stop. Held, it
    lands after the file is complete and in place. Only the main thread receives signals.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = []
    previous = {}
    for signum in (signal.SIGTERM, signal.SIGINT):
        handler = signal.getsignal(signum)
        if handler not in (None, signal.SIG_IGN):  # None: set outside Python, which we cannot put back
            previous[signum] = signal.signal(signum, lambda n, _frame: held.append(n))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if held:
            signal.raise_signal(held[0])


def _atomic_write(path, write, mode):
    """write(f) into `path.<pid>.tmp`, flush it to disk, then rename it over `path`.

    A run killed at any moment leaves either the previous file or the new one, never half
    of one; the only possible leftover is the `.tmp` file, which the next write removes.
    A stop signal (SIGTERM, Ctrl-C) waits for the write to finish.
    """
    remove_stale_tmp(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    with stop_signals_held():
        try:
            with open(tmp, mode, **({"encoding": "utf-8"} if "b" not in mode else {})) as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)


def atomic_save(obj, path):
    """torch.save through a temporary file and a rename: a killed run never leaves half a file.

    Saving to an open file (not a name) also makes the bytes depend on `obj` alone, so two
    identical runs write byte-identical params.
    """
    _atomic_write(path, lambda f: torch.save(obj, f), "wb")


def atomic_write_text(text, path):
    _atomic_write(path, lambda f: f.write(text), "w")


def strip_module_prefix(state_dict):
    """Keys saved from a DataParallel-wrapped model carry 'module.'; the model's do not."""
    if state_dict and all(k.startswith("module.") for k in state_dict):
        return {k[len("module."):]: v for k, v in state_dict.items()}
    return state_dict
