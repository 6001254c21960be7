"""Params files and training checkpoints: written whole, read back with one-line errors.

A params file is a model's state_dict, what the course's train() writes and evaluation and
finetuning read. A training checkpoint (<params>.ckpt, trainer.py) also holds the optimizer,
the epoch, the tokens seen and the RNG states, so that --resume continues the run exactly.

Every write goes through a temporary file and a rename: a run killed at any moment leaves
the previous file or the new one, never half of one. Every problem a user can cause when
reading (no file, an empty or truncated one, another model's params) becomes one line that
names the file and says what is wrong, raised as ParamsError or CheckpointError.
"""

import contextlib
import os
import random
import signal
import threading
import zipfile

import torch

from . import variants


class ParamsError(ValueError):
    """A params file that cannot be read or does not fit the model, phrased for one line of output."""


class CheckpointError(RuntimeError):
    """A checkpoint that --resume cannot continue from, phrased for one line of output."""


# --- writing ---------------------------------------------------------------------------

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


# --- reading ---------------------------------------------------------------------------

def why_unreadable(path, error):
    """Why torch.load could not read `path`, in a few words for one line of output."""
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive; its directory sits at the end
        return f"{os.path.getsize(path)} bytes, not a complete torch.save archive"
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:120]


def strip_module_prefix(state_dict):
    """Keys saved from a DataParallel-wrapped model carry 'module.'; the model's do not."""
    if state_dict and all(k.startswith("module.") for k in state_dict):
        return {k[len("module."):]: v for k, v in state_dict.items()}
    return state_dict


def describe_mismatch(model, state, path):
    """Say how a checkpoint's model differs from `model`: variant, vocabulary, sizes."""
    mine = model.state_dict()
    def variant(keys):
        return variants.recognise(keys).name
    def layers(keys):  # the Perceiver's down and up blocks are layers too
        return len({k.split(".")[1] for k in keys if k.startswith("blocks.")}) + 2 * ("down_block.C" in keys)
    diffs = []
    if variant(state) != variant(mine):
        diffs.append(f"it is a {variant(state)} model, this run builds {variant(mine)}")
    for key, axis, what in (("tok_emb.weight", 0, "vocabulary size"), ("pos_emb", 1, "block size"),
                            ("blocks.0.attn.rope_cache", 0, "block size"), ("tok_emb.weight", 1, "embedding width"),
                            ("down_block.C", 1, "bottleneck_dim")):
        if key in state and key in mine and state[key].dim() == mine[key].dim() \
                and state[key].shape[axis] != mine[key].shape[axis]:
            diffs.append(f"{what} {state[key].shape[axis]} vs {mine[key].shape[axis]} here")
    w2 = "blocks.0.attn.w2"
    if w2 in state and w2 in mine and state[w2].dim() == 2 and state[w2].shape[0] != mine[w2].shape[0] \
            and not any(d.startswith("embedding width") for d in diffs):
        diffs.append(f"head width (n_embd / n_head) {state[w2].shape[0]} vs {mine[w2].shape[0]} here")
    if layers(state) != layers(mine):
        diffs.append(f"{layers(state)} layers vs {layers(mine)} here")
    if not diffs:
        missing = sorted(set(mine) - set(state))[:3]
        extra = sorted(set(state) - set(mine))[:3]
        diffs.append(f"keys differ (missing {missing}, unexpected {extra})")
    return f"{path}: params do not fit this model: " + "; ".join(diffs)


def read_params_file(path):
    """torch.load(path) on CPU, tensors only; every failure a ParamsError that says what is wrong."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb"):
            pass
    except FileNotFoundError:
        raise ParamsError(f"{path}: params file not found") from None
    except IsADirectoryError:
        raise ParamsError(f"{path}: params file is a directory, not a file") from None
    except OSError as e:
        raise ParamsError(f"{path}: cannot read params file: {e.strerror}") from None
    if size == 0:
        raise ParamsError(f"{path}: params file is empty (0 bytes): truncated, or written by a killed run")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises many kinds for damaged archives
        raise ParamsError(f"{path}: not a readable params file: truncated or corrupt "
                          f"({why_unreadable(path, e)})") from None


def load_params(model, path):
    """Load a state_dict strictly, on CPU first, with or without a 'module.' prefix."""
    state = read_params_file(path)
    if isinstance(state, dict) and isinstance(state.get("model"), dict) and "optimizer" in state:
        raise ParamsError(f"{path}: is a training checkpoint, not a params file; continue the run "
                          f"that wrote it with --resume, or give the params file it was written beside")
    if not isinstance(state, dict) or not state or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ParamsError(f"{path}: not a model state_dict (a params file holds only named weight tensors)")
    state = strip_module_prefix(state)
    try:
        model.load_state_dict(state)
    except RuntimeError:
        raise ParamsError(describe_mismatch(model, state, path)) from None
    return model


# --- training checkpoints --------------------------------------------------------------

def read_checkpoint(path):
    """torch.load of a training checkpoint, or the CheckpointError that says why it cannot be.

    The error is returned, not raised: under torchrun process 0 reads the file and sends
    the result, whichever it is, to the others.
    """
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
        state["model"], state["epoch"], state["tokens"]
        return state
    except Exception as e:  # noqa: BLE001 - damaged archives raise many kinds
        return CheckpointError(f"{path}: cannot resume: not a readable training checkpoint, truncated "
                               f"or corrupt ({why_unreadable(path, e)}); delete it to start over")


def restore(model, optimizer, state, path):
    """Load a checkpoint's model and optimizer state; a CheckpointError if they do not fit."""
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    except (RuntimeError, ValueError, KeyError):
        raise CheckpointError("cannot resume: " + describe_mismatch(model, state["model"], path)
                              + "; give the run the same variant and sizes, or delete the checkpoint "
                                "to start over") from None


def rng_states():
    """The torch, Python and CUDA random number generators' states, for a checkpoint."""
    return {"torch": torch.get_rng_state(), "python": random.getstate(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def set_rng_states(saved):
    """Put back what rng_states() returned (CUDA's only where this run has CUDA)."""
    torch.set_rng_state(saved["torch"])
    random.setstate(saved["python"])
    if saved["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(saved["cuda"])
