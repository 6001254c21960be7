"""The one training loop: AdamW, warmup then cosine learning-rate decay, clipping.

The course's TrainerConfig/Trainer interface, with what a long CPU or GPU run needs behind
it: mixed precision where the hardware runs it fast, optional torch.compile, losses read
back from the device only every `log_every` steps, periodic atomic checkpoints that
`resume` continues from exactly, a stop on a non-finite loss, and a JSON-lines record of
every epoch next to the params.

By default it trains what the course's own trainer.py trains, step for step (RECIPES
says what that means and what the alternative changes); packing, the fused kernels and
the fast dropout compute the same loss and gradients.

Resuming is exact (the same final params as an uninterrupted run) with num_workers 0 and
the same precision and device: the checkpoint, written at the end of each epoch, holds
the model, the optimizer, the epoch, the tokens seen (the learning-rate schedule depends
on tokens only, never on max_epochs) and the torch/Python RNG states. With num_workers > 0
each worker's RNG stream restarts on resume, so the random corruption spans differ.

On CUDA, span-corruption batches are made on the device (corruption.CorruptionBatches,
TrainerConfig.device_batches): the same distribution as the dataset's __getitem__, the same
batches of documents in the same order, the same token count for the schedule; its
generator's state is checkpointed too. Under torchrun the loop trains with
DistributedDataParallel through a few hooks (distributed.py: each process's slice of a
batch, its loss weight, process 0 writing).
"""

import functools
import json
import math
import os
import random
import sys
import time
import zipfile
from dataclasses import dataclass

import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from tqdm import tqdm

from . import distributed
from .corruption import CorruptionBatches
from .dataset import CharCorruptionDataset
from .kernels import is_fast
from .packing import Packing, cpu_length_groups, group_rows, packed_batch, whole_batch
from .utils import atomic_save, autocast_context, resolve_precision


@dataclass(frozen=True)
class Recipe:
    shuffle: bool  # a new random order of the items every epoch (else index order)
    decay_matmuls_only: bool  # weight decay on matmul weights only (else on every name without
                              # "bias" or "LayerNorm.weight" in it: with minGPT's names, all but biases)
    schedule_from_first_step: bool  # the first step already runs at the scheduled rate (else at the
                                    # base rate; each step sets the rate of the next)
    floor_after_final: bool  # stay at 10% after final_tokens (else the cosine climbs back up)


# "course": what every edition's trainer.py does (2021-2025), the default of every stage.
# "ours": the changes we think are improvements. A run's record names the recipe it used.
RECIPES = {
    "course": Recipe(shuffle=False, decay_matmuls_only=False, schedule_from_first_step=False,
                     floor_after_final=False),
    "ours": Recipe(shuffle=True, decay_matmuls_only=True, schedule_from_first_step=True, floor_after_final=True),
}
COURSE_NO_DECAY = ("bias", "LayerNorm.weight")  # matched as substrings of parameter names, as the course does


class TrainerConfig:
    max_epochs = 10
    batch_size = 64
    learning_rate = 3e-4
    betas = (0.9, 0.95)
    grad_norm_clip = 1.0
    weight_decay = 0.1  # on which parameters: see RECIPES
    lr_decay = False
    warmup_tokens = 375e6  # linear warmup over these tokens, then cosine decay...
    final_tokens = 260e9  # ...to 10% of the learning rate at these tokens
    ckpt_path = None  # periodic training checkpoint (model, optimizer, RNG), for resume
    num_workers = 0
    # Beyond the course:
    recipe = "course"  # a key of RECIPES
    precision = "auto"  # auto | fp32 | bf16
    compile = False
    backend = "inductor"
    log_every = 20  # steps between loss read-backs
    device_batches = None  # span-corruption batches made on the device (corruption.py); None: on CUDA
    length_groups = None  # attention groups per packed batch; None: by device
    ckpt_every_epochs = 1
    resume = False
    log_path = None  # JSON-lines run record
    run_info = None  # dict written at the head of the record
    progress = True
    tb_writer = None

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)


class NonFiniteLoss(RuntimeError):
    pass


class CheckpointError(RuntimeError):
    """A checkpoint that --resume cannot continue from, phrased for one line of output."""


def device_epoch(batches, batch_size, shuffle, pack, groups):
    """One epoch of (batch, untrimmed size) from a CorruptionBatches, as the DataLoader path
    gives them: the documents in index order (or a new random order when `shuffle`), cut
    into batches of batch_size, the last one short."""
    n = len(batches)
    order = (torch.randperm(n, generator=batches.generator, device=batches.device) if shuffle
             else torch.arange(n, device=batches.device))
    for idx in order.split(batch_size):
        x, y = batches(idx)  # under torchrun every process draws the whole batch and keeps its slice
        lo, hi, _ = distributed.share(len(idx))
        x, y = x[lo:hi], y[lo:hi]
        yield (Packing(group_rows(x, y, groups)[0]) if pack else (x, y)), y.numel()


def batch_loss(model, batch, device):
    """The loss of one batch (a Packing, or a whole (x, y)), still on the device. A Packing
    gives the whole batch's loss."""
    if isinstance(batch, Packing):
        return model.packed_loss(batch.to(device, non_blocking=True))
    x, y = (t.to(device, non_blocking=True) for t in batch)
    return model(x, y)[1]


def target_count(batch):
    """The batch's non-PAD targets, the loss's denominator."""
    return ((batch.targets if isinstance(batch, Packing) else batch[1]) != 0).sum()


def forward_backward(model, batch, precision, device, weight=None):
    """Forward and backward of one batch; returns the loss, still on the device. `weight`
    scales the gradient (a process's share of a global batch under torchrun); a model that
    DistributedDataParallel wraps (distributed.wrap) computes batch_loss itself."""
    with autocast_context(precision, device):
        if isinstance(model, DistributedDataParallel):
            loss = model(batch, device)
        else:
            loss = batch_loss(model, batch, device)
    (loss if weight is None else loss * weight.to(loss.dtype)).backward()
    return loss.detach()


def decay_groups(model, weight_decay, recipe="course"):
    """AdamW's two parameter groups: decayed and not, by the recipe's rule."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if RECIPES[recipe].decay_matmuls_only:
            decayed = p.dim() >= 2 and not name.endswith(("tok_emb.weight", "pos_emb"))
        else:
            decayed = not any(word in name for word in COURSE_NO_DECAY)
        (decay if decayed else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def lr_multiplier(tokens, config):
    """Linear warmup over warmup_tokens, then a cosine from 1 to 0.1 at final_tokens.

    Past final_tokens the course's cosine (minGPT's) is not clamped: it climbs back to the
    full rate at 2 * final_tokens - warmup_tokens and goes down again, which the course's
    650-epoch pretraining (final_tokens at 200 epochs) does. The "ours" recipe stays at 0.1.
    """
    if not config.lr_decay:
        return 1.0
    if tokens < config.warmup_tokens:
        return float(tokens) / float(max(1, config.warmup_tokens))
    progress = float(tokens - config.warmup_tokens) / float(max(1, config.final_tokens - config.warmup_tokens))
    if RECIPES[config.recipe].floor_after_final:
        progress = min(progress, 1.0)
    return max(0.1, 0.5 * (1.0 + math.cos(math.pi * progress)))


def set_lr(optimizer, lr):
    for group in optimizer.param_groups:
        group["lr"] = lr


def read_checkpoint(path):
    """torch.load of a training checkpoint, or the CheckpointError that says why it cannot be."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
        state["model"], state["epoch"], state["tokens"]
        return state
    except Exception as e:  # noqa: BLE001 - damaged archives raise many kinds
        if not zipfile.is_zipfile(path):  # torch.save writes a zip archive, its directory at the end
            reason = f"{os.path.getsize(path)} bytes, not a complete torch.save archive"
        else:
            reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:120]
        return CheckpointError(f"{path}: cannot resume: not a readable training checkpoint, truncated "
                               f"or corrupt ({reason}); delete it to start over")


class Trainer:

    def __init__(self, model, train_dataset, test_dataset, config):
        self.model = model
        self.train_dataset = train_dataset
        self.test_dataset = test_dataset
        self.config = config
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device)
        self.checkpointed_epoch = None
        self.corruption = None
        self.sampler = None

    def use_device_batches(self):
        """Whether to make span-corruption batches on the device (see TrainerConfig.device_batches)."""
        wanted = self.config.device_batches
        if wanted is None:
            wanted = self.device.type == "cuda"
        return bool(wanted) and isinstance(self.train_dataset, CharCorruptionDataset)

    def save_checkpoint(self, optimizer, epoch, tokens):
        rng = {"torch": torch.get_rng_state(), "python": random.getstate(),
               "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}
        # under torchrun: every process's own streams, and the shared ones (alike everywhere)
        per_process = distributed.gather(rng) if distributed.world()[1] > 1 else None
        if distributed.is_main():
            atomic_save({
                "model": self.model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "epoch": epoch,
                "tokens": tokens,
                "rng": {**rng, "per_process": per_process,
                        "corruption": self.corruption.state() if self.corruption is not None else None,
                        "sampler": self.sampler.generator.get_state() if self.sampler is not None else None},
                "run_info": self.config.run_info,
            }, self.config.ckpt_path)
        self.checkpointed_epoch = epoch + 1

    def load_checkpoint(self, optimizer):
        """Model, optimizer and RNG state from ckpt_path; (next epoch index, tokens seen)."""
        path = self.config.ckpt_path
        # under torchrun process 0 reads it and sends it to the others (no shared disk needed)
        state = distributed.same(read_checkpoint(path) if distributed.is_main() else None)
        if isinstance(state, CheckpointError):
            raise state
        model_state, epoch, tokens = state["model"], state["epoch"], state["tokens"]
        try:
            self.model.load_state_dict(model_state)
            optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError):
            from .helper import describe_mismatch  # helper imports this module
            raise CheckpointError("cannot resume: " + describe_mismatch(self.model, model_state, path)
                                  + "; give the run the same variant and sizes, or delete the checkpoint "
                                    "to start over") from None
        torch.set_rng_state(state["rng"]["torch"])
        random.setstate(state["rng"]["python"])
        if state["rng"]["cuda"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        if self.corruption is not None and state["rng"].get("corruption") is not None:
            self.corruption.set_state(state["rng"]["corruption"])
        if self.sampler is not None and state["rng"].get("sampler") is not None:
            self.sampler.generator.set_state(state["rng"]["sampler"])
        rank, processes = distributed.world()
        if processes > 1:  # each process's own streams, if this run has as many processes as the saved one
            own = (state["rng"].get("per_process") or [])
            if len(own) == processes:
                torch.set_rng_state(own[rank]["torch"])
                random.setstate(own[rank]["python"])
                if own[rank]["cuda"] is not None and torch.cuda.is_available():
                    torch.cuda.set_rng_state_all(own[rank]["cuda"])
            else:
                distributed.split_rng()
        self.warn_if_changed(state.get("run_info"))
        self.checkpointed_epoch = epoch + 1
        return epoch + 1, tokens

    def warn_if_changed(self, saved):
        """Resuming with other data or another schedule is allowed, but is then not the same run."""
        now = self.config.run_info
        if not saved or not now:
            return
        changed = [f"{k} {saved['config'].get(k)} -> {now['config'].get(k)}"
                   for k in now.get("config", {}) if k != "max_epochs"
                   and saved.get("config", {}).get(k) != now["config"].get(k)]
        if sorted(saved.get("data", {}).values()) != sorted(now.get("data", {}).values()):
            changed.append("data files' checksums differ")
        if changed:
            print(f"warning: resuming {self.config.ckpt_path} with a changed run ({'; '.join(changed)}); "
                  f"the result will differ from an uninterrupted run", file=sys.stderr)

    def log(self, record):
        if self.config.log_path and distributed.is_main():
            with open(self.config.log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")

    def train(self):
        try:
            self._train()
        except KeyboardInterrupt:  # Ctrl-C (run.py turns SIGTERM into this too): say so in the record
            self.log({"event": "interrupted", "last_checkpoint_epoch": self.checkpointed_epoch})
            raise

    def _train(self):
        model, config, device = self.model, self.config, self.device
        cuda = device.type == "cuda"
        self.precision = resolve_precision(config.precision, device)
        if config.recipe not in RECIPES:
            raise ValueError(f"unknown recipe {config.recipe!r}: choose one of {', '.join(RECIPES)}")
        optimizer = torch.optim.AdamW(decay_groups(model, config.weight_decay, config.recipe), lr=config.learning_rate,
                                      betas=config.betas, fused=cuda)
        step_model = torch.compile(model, backend=config.backend) if config.compile else model
        rank, processes = distributed.world()
        if processes > 1:  # torchrun: DDP averages the gradients; model stays unwrapped
            step_model = distributed.wrap(step_model, batch_loss, device)
        main = rank == 0
        groups = config.length_groups or (1 if cuda else cpu_length_groups(config.batch_size))
        # packed batches (packing.py) for a fast model; a plain one, and a compiled one (which
        # compiles forward()), gets each batch whole, padding included
        pack = is_fast(model.config) and not config.compile
        collate = functools.partial(packed_batch, groups=groups) if pack else whole_batch
        workers = config.num_workers if cuda else min(config.num_workers, max(0, (os.cpu_count() or 1) - 1))
        shuffle = RECIPES[config.recipe].shuffle
        self.corruption = self.sampler = None
        if self.use_device_batches():
            # seeded from the global generator, so the run's seed decides its draws too
            seed = distributed.same(int(torch.randint(1 << 62, (1,))))
            self.corruption = CorruptionBatches(self.train_dataset, device, seed=seed)
            steps_per_epoch = math.ceil(len(self.corruption) / config.batch_size)

            def epoch_batches():
                return device_epoch(self.corruption, config.batch_size, shuffle, pack, groups)
        else:
            if processes > 1:  # this process's slice of each batch, in the order every process agrees on
                self.sampler = distributed.ShareSampler(len(self.train_dataset), config.batch_size, shuffle,
                                                        seed=distributed.same(int(torch.randint(1 << 62, (1,)))))
                batching = dict(batch_sampler=self.sampler)
            else:
                batching = dict(shuffle=shuffle, batch_size=config.batch_size, drop_last=False)
            loader = DataLoader(self.train_dataset, num_workers=workers, pin_memory=cuda,
                                persistent_workers=workers > 0, collate_fn=collate, **batching)
            steps_per_epoch = len(loader)

            def epoch_batches():
                return loader
        distributed.split_rng()
        first_epoch, tokens = 0, 0
        self.checkpointed_epoch = None  # the last epoch whose checkpoint this run wrote or read
        if config.resume and config.ckpt_path and distributed.same(os.path.exists(config.ckpt_path)):
            first_epoch, tokens = self.load_checkpoint(optimizer)
            # the rate the next step would have had; a changed --learning_rate applies from it on
            set_lr(optimizer, config.learning_rate * lr_multiplier(tokens, config))
            if first_epoch >= config.max_epochs:
                print(f"{config.ckpt_path} already holds epoch {first_epoch} of {config.max_epochs}: "
                      f"nothing left to train (raise --max_epochs to go on)")
            else:
                print(f"resuming from {config.ckpt_path} at epoch {first_epoch + 1} of {config.max_epochs}")
        elif config.resume:
            print(f"warning: no checkpoint at {config.ckpt_path}; starting from the beginning", file=sys.stderr)
        t_start = time.time()
        self.log({"event": "start", "precision": self.precision, "device": str(device), "recipe": config.recipe,
                  "device_batches": self.corruption is not None, "first_epoch": first_epoch,
                  **(config.run_info or {})})

        total = tqdm(total=steps_per_epoch * config.max_epochs, initial=steps_per_epoch * first_epoch,
                     desc="total", unit="step", position=0, disable=not (config.progress and main),
                     dynamic_ncols=True)
        step, last_loss = steps_per_epoch * first_epoch, float("nan")
        for epoch in range(first_epoch, config.max_epochs):
            model.train()
            t0, losses = time.time(), []
            bar = tqdm(epoch_batches(), total=steps_per_epoch, desc=f"epoch {epoch + 1}/{config.max_epochs}",
                       position=1, leave=False, disable=not (config.progress and main), dynamic_ncols=True)
            pending = []
            for in_epoch, (batch, untrimmed) in enumerate(bar):
                optimizer.zero_grad(set_to_none=True)
                weight = None
                if processes > 1:  # weigh this slice by its share of the global batch's targets
                    rows = min(config.batch_size, len(self.train_dataset) - in_epoch * config.batch_size)
                    weight, untrimmed = distributed.weigh(target_count(batch).to(device), untrimmed, rows)
                loss = forward_backward(step_model, batch, self.precision, device, weight)
                if weight is not None:
                    loss = loss * weight / processes  # summed over processes: the global batch's loss
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_norm_clip)
                tokens += untrimmed  # the course counts every target position, PAD included
                lr = config.learning_rate * lr_multiplier(tokens, config)
                if RECIPES[config.recipe].schedule_from_first_step:
                    set_lr(optimizer, lr)
                optimizer.step()
                # The course sets the rate after the step, for the next one: its first step runs
                # at the base rate the optimizer was built with, before any warmup.
                set_lr(optimizer, lr)
                step += 1
                pending.append(loss.detach())
                if len(pending) == config.log_every or step % steps_per_epoch == 0:
                    values = torch.stack(pending)
                    if processes > 1:
                        values = distributed.sum_over_processes(values)
                    values = values.float().cpu().tolist()
                    pending = []
                    bad = next((i for i, v in enumerate(values) if not math.isfinite(v)), None)
                    if bad is not None:
                        bad_step = step - len(values) + bad + 1
                        self.log({"event": "non-finite loss", "step": bad_step, "epoch": epoch + 1})
                        if self.checkpointed_epoch:
                            kept = (f"the last good checkpoint, {config.ckpt_path} (epoch {self.checkpointed_epoch}), "
                                    f"is kept: lower the learning rate and continue with --resume")
                        else:
                            kept = "no checkpoint was written yet: lower the learning rate and start again"
                        raise NonFiniteLoss(f"loss became {values[bad]} at step {bad_step} (epoch {epoch + 1}); "
                                            f"training stopped and no params were written; {kept}")
                    losses += values
                    last_loss = values[-1]
                    bar.set_postfix(loss=f"{last_loss:.4f}", lr=f"{lr:.2e}")
                    if config.tb_writer is not None:
                        config.tb_writer.add_scalar("train/loss", last_loss, step)
                        config.tb_writer.add_scalar("train/lr", lr, step)
                total.update(1)
            bar.close()
            mean = sum(losses) / max(1, len(losses))
            total.set_postfix(loss=f"{mean:.4f}", lr=f"{lr:.2e}")
            self.log({"event": "epoch", "epoch": epoch + 1, "mean_loss": mean, "last_loss": last_loss,
                      "lr": lr, "tokens": tokens, "seconds": round(time.time() - t0, 3)})
            if config.tb_writer is not None:
                config.tb_writer.add_scalar("train/epoch_loss", mean, epoch + 1)
                config.tb_writer.flush()
            if config.ckpt_path and ((epoch + 1) % config.ckpt_every_epochs == 0 or epoch + 1 == config.max_epochs):
                self.save_checkpoint(optimizer, epoch, tokens)
        total.close()
        self.final_loss = last_loss
        self.log({"event": "end", "final_loss": last_loss, "tokens": tokens,
                  "seconds": round(time.time() - t_start, 3)})
