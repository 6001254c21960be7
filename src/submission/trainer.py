"""The one training loop: AdamW, warmup then cosine learning-rate decay, clipping.

The course's TrainerConfig/Trainer interface, with what a long CPU or GPU run needs behind
it: mixed precision where the hardware runs it fast, optional torch.compile, losses read
back from the device only every `log_every` steps, periodic atomic checkpoints that
`resume` continues from exactly, a stop on a non-finite loss, and a JSON-lines record of
every epoch next to the params. Trainer._train is the loop itself, to be read top to
bottom; how its batches are made and where it resumes are the Trainer's other methods,
what it reports (progress bars, losses, TensorBoard, the record) is Recorder's, and
writing and reading the checkpoint file is checkpoint.py's.

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
import sys
import time
from dataclasses import dataclass

import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from tqdm import tqdm

from . import distributed
from .checkpoint import CheckpointError, atomic_save, read_checkpoint, restore, rng_states, set_rng_states
from .config import Config
from .corruption import CorruptionBatches
from .dataset import CharCorruptionDataset
from .kernels import is_fast
from .packing import Packing, cpu_length_groups, group_rows, packed_batch, whole_batch
from .utils import autocast_context, resolve_precision


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


class TrainerConfig(Config):
    """The course's training settings and ours; a keyword that is not one of them is an error."""

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


class NonFiniteLoss(RuntimeError):
    pass


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

    def train(self):
        try:
            self._train()
        except KeyboardInterrupt:  # Ctrl-C (run.py turns SIGTERM into this too): say so in the record
            self.log({"event": "interrupted", "last_checkpoint_epoch": self.checkpointed_epoch})
            raise

    def _train(self):
        """The course's loop. What surrounds it is in the methods below and in Recorder."""
        model, config = self.model, self.config
        self.precision = resolve_precision(config.precision, self.device)
        optimizer, step_model = self.make_optimizer(), self.make_step_model()
        epoch_batches, steps_per_epoch = self.make_batches()
        first_epoch, tokens = self.start(optimizer)
        record = Recorder(self, steps_per_epoch, first_epoch)
        for epoch in range(first_epoch, config.max_epochs):
            model.train()
            for in_epoch, (batch, untrimmed) in enumerate(record.epoch(epoch, epoch_batches())):
                optimizer.zero_grad(set_to_none=True)
                weight, untrimmed = self.share(batch, untrimmed, in_epoch)  # torchrun: this process's part
                loss = forward_backward(step_model, batch, self.precision, self.device, weight)
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_norm_clip)
                tokens += untrimmed  # the course counts every target position, PAD included
                lr = config.learning_rate * lr_multiplier(tokens, config)
                if RECIPES[config.recipe].schedule_from_first_step:
                    set_lr(optimizer, lr)
                optimizer.step()
                # The course sets the rate after the step, for the next one: its first step runs
                # at the base rate the optimizer was built with, before any warmup.
                set_lr(optimizer, lr)
                record.step(loss, weight, lr)
            record.epoch_end(epoch, lr, tokens)
            if self.checkpoint_due(epoch):
                self.save_checkpoint(optimizer, epoch, tokens)
        self.final_loss = record.end(tokens)

    # --- before the loop -------------------------------------------------------------------

    def make_optimizer(self):
        """AdamW over the recipe's decay groups, at the base rate (fused on CUDA)."""
        config = self.config
        if config.recipe not in RECIPES:
            raise ValueError(f"unknown recipe {config.recipe!r}: choose one of {', '.join(RECIPES)}")
        return torch.optim.AdamW(decay_groups(self.model, config.weight_decay, config.recipe),
                                 lr=config.learning_rate, betas=config.betas, fused=self.device.type == "cuda")

    def make_step_model(self):
        """The model the steps call: compiled if asked, wrapped for DistributedDataParallel under
        torchrun (the gradients are averaged; self.model stays unwrapped)."""
        step_model = torch.compile(self.model, backend=self.config.backend) if self.config.compile else self.model
        if distributed.world()[1] > 1:
            step_model = distributed.wrap(step_model, batch_loss, self.device)
        return step_model

    def make_batches(self):
        """(a function giving one epoch of (batch, untrimmed size), steps per epoch): span-corruption
        batches made on the device, or a DataLoader (under torchrun, of this process's slices)."""
        config, cuda = self.config, self.device.type == "cuda"
        groups = config.length_groups or (1 if cuda else cpu_length_groups(config.batch_size))
        # packed batches (packing.py) for a fast model; a plain one, and a compiled one (which
        # compiles forward()), gets each batch whole, padding included
        pack = is_fast(self.model.config) and not config.compile
        shuffle = RECIPES[config.recipe].shuffle
        self.corruption = self.sampler = None
        if self.use_device_batches():
            # seeded from the global generator, so the run's seed decides its draws too
            seed = distributed.same(int(torch.randint(1 << 62, (1,))))
            self.corruption = CorruptionBatches(self.train_dataset, self.device, seed=seed)
            return (lambda: device_epoch(self.corruption, config.batch_size, shuffle, pack, groups),
                    math.ceil(len(self.corruption) / config.batch_size))
        if distributed.world()[1] > 1:  # this process's slice of each batch, in the order every process agrees on
            self.sampler = distributed.ShareSampler(len(self.train_dataset), config.batch_size, shuffle,
                                                    seed=distributed.same(int(torch.randint(1 << 62, (1,)))))
            batching = dict(batch_sampler=self.sampler)
        else:
            batching = dict(shuffle=shuffle, batch_size=config.batch_size, drop_last=False)
        workers = config.num_workers if cuda else min(config.num_workers, max(0, (os.cpu_count() or 1) - 1))
        collate = functools.partial(packed_batch, groups=groups) if pack else whole_batch
        loader = DataLoader(self.train_dataset, num_workers=workers, pin_memory=cuda,
                            persistent_workers=workers > 0, collate_fn=collate, **batching)
        return (lambda: loader), len(loader)

    def use_device_batches(self):
        """Whether to make span-corruption batches on the device (see TrainerConfig.device_batches)."""
        wanted = self.config.device_batches
        if wanted is None:
            wanted = self.device.type == "cuda"
        return bool(wanted) and isinstance(self.train_dataset, CharCorruptionDataset)

    def start(self, optimizer):
        """(first epoch, tokens seen): (0, 0), or where the checkpoint left off with resume."""
        config = self.config
        distributed.split_rng()  # under torchrun: each process its own dropout (and corruption) stream
        self.checkpointed_epoch = None  # the last epoch whose checkpoint this run wrote or read
        if not (config.resume and config.ckpt_path and distributed.same(os.path.exists(config.ckpt_path))):
            if config.resume:
                print(f"warning: no checkpoint at {config.ckpt_path}; starting from the beginning", file=sys.stderr)
            return 0, 0
        first_epoch, tokens = self.load_checkpoint(optimizer)
        # the rate the next step would have had; a changed --learning_rate applies from it on
        set_lr(optimizer, config.learning_rate * lr_multiplier(tokens, config))
        if first_epoch >= config.max_epochs:
            print(f"{config.ckpt_path} already holds epoch {first_epoch} of {config.max_epochs}: "
                  f"nothing left to train (raise --max_epochs to go on)")
        else:
            print(f"resuming from {config.ckpt_path} at epoch {first_epoch + 1} of {config.max_epochs}")
        return first_epoch, tokens

    # --- in the loop -----------------------------------------------------------------------

    def share(self, batch, untrimmed, in_epoch):
        """(gradient weight, batch size for the schedule): (None, untrimmed) in one process.
        Under torchrun, this slice's weight by its share of the global batch's targets, and
        the global batch's untrimmed size."""
        if distributed.world()[1] == 1:
            return None, untrimmed
        rows = min(self.config.batch_size, len(self.train_dataset) - in_epoch * self.config.batch_size)
        return distributed.weigh(target_count(batch).to(self.device), untrimmed, rows)

    def checkpoint_due(self, epoch):
        config = self.config
        return bool(config.ckpt_path) and ((epoch + 1) % config.ckpt_every_epochs == 0
                                           or epoch + 1 == config.max_epochs)

    def save_checkpoint(self, optimizer, epoch, tokens):
        rng = rng_states()
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
        restore(self.model, optimizer, state, path)
        rng = state["rng"]
        set_rng_states(rng)
        if self.corruption is not None and rng.get("corruption") is not None:
            self.corruption.set_state(rng["corruption"])
        if self.sampler is not None and rng.get("sampler") is not None:
            self.sampler.generator.set_state(rng["sampler"])
        rank, processes = distributed.world()
        if processes > 1:  # each process's own streams, if this run has as many processes as the saved one
            own = rng.get("per_process") or []
            if len(own) == processes:
                set_rng_states(own[rank])
            else:
                distributed.split_rng()
        self.warn_if_changed(state.get("run_info"))
        self.checkpointed_epoch = state["epoch"] + 1
        return state["epoch"] + 1, state["tokens"]

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
        """Append one event to the JSON-lines run record (process 0 under torchrun)."""
        if self.config.log_path and distributed.is_main():
            with open(self.config.log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")


class Recorder:
    """What a run reports besides its weights: the progress bars, the losses (read back from
    the device every log_every steps, as reading one waits for the device; a non-finite one
    stops the run), TensorBoard scalars and the events of the JSON-lines record. The
    Trainer calls it at the start, at each epoch's start and end, after every step and at
    the end."""

    def __init__(self, trainer, steps_per_epoch, first_epoch):
        self.trainer, self.config = trainer, trainer.config
        self.steps_per_epoch, self.processes = steps_per_epoch, distributed.world()[1]
        self.show = self.config.progress and distributed.is_main()
        self.t_start = time.time()
        trainer.log({"event": "start", "precision": trainer.precision, "device": str(trainer.device),
                     "recipe": self.config.recipe, "device_batches": trainer.corruption is not None,
                     "first_epoch": first_epoch, **(self.config.run_info or {})})
        self.total = tqdm(total=steps_per_epoch * self.config.max_epochs, initial=steps_per_epoch * first_epoch,
                          desc="total", unit="step", position=0, disable=not self.show, dynamic_ncols=True)
        self.steps, self.last_loss = steps_per_epoch * first_epoch, float("nan")

    def epoch(self, epoch, batches):
        """The epoch's batches, behind its progress bar."""
        self.epoch_number, self.t0, self.losses, self.pending = epoch + 1, time.time(), [], []
        self.bar = tqdm(batches, total=self.steps_per_epoch, desc=f"epoch {epoch + 1}/{self.config.max_epochs}",
                        position=1, leave=False, disable=not self.show, dynamic_ncols=True)
        return self.bar

    def step(self, loss, weight, lr):
        if weight is not None:
            loss = loss * weight / self.processes  # summed over processes: the global batch's loss
        self.steps += 1
        self.pending.append(loss.detach())
        if len(self.pending) == self.config.log_every or self.steps % self.steps_per_epoch == 0:
            self.read_losses(lr)
        self.total.update(1)

    def read_losses(self, lr):
        values = torch.stack(self.pending)
        if self.processes > 1:
            values = distributed.sum_over_processes(values)
        values = values.float().cpu().tolist()
        self.pending = []
        self.stop_if_not_finite(values)
        self.losses += values
        self.last_loss = values[-1]
        self.bar.set_postfix(loss=f"{self.last_loss:.4f}", lr=f"{lr:.2e}")
        if self.config.tb_writer is not None:
            self.config.tb_writer.add_scalar("train/loss", self.last_loss, self.steps)
            self.config.tb_writer.add_scalar("train/lr", lr, self.steps)

    def stop_if_not_finite(self, values):
        """Raise NonFiniteLoss, naming the first bad step, before it reaches a checkpoint or params."""
        bad = next((i for i, v in enumerate(values) if not math.isfinite(v)), None)
        if bad is None:
            return
        step, epoch, config = self.steps - len(values) + bad + 1, self.epoch_number, self.config
        self.trainer.log({"event": "non-finite loss", "step": step, "epoch": epoch})
        if self.trainer.checkpointed_epoch:
            kept = (f"the last good checkpoint, {config.ckpt_path} (epoch {self.trainer.checkpointed_epoch}), "
                    f"is kept: lower the learning rate and continue with --resume")
        else:
            kept = "no checkpoint was written yet: lower the learning rate and start again"
        raise NonFiniteLoss(f"loss became {values[bad]} at step {step} (epoch {epoch}); "
                            f"training stopped and no params were written; {kept}")

    def epoch_end(self, epoch, lr, tokens):
        self.bar.close()
        mean = sum(self.losses) / max(1, len(self.losses))
        self.total.set_postfix(loss=f"{mean:.4f}", lr=f"{lr:.2e}")
        self.trainer.log({"event": "epoch", "epoch": epoch + 1, "mean_loss": mean, "last_loss": self.last_loss,
                          "lr": lr, "tokens": tokens, "seconds": round(time.time() - self.t0, 3)})
        if self.config.tb_writer is not None:
            self.config.tb_writer.add_scalar("train/epoch_loss", mean, epoch + 1)
            self.config.tb_writer.flush()

    def end(self, tokens):
        """Close the bars and write the last event; the last loss read."""
        self.total.close()
        self.trainer.log({"event": "end", "final_loss": self.last_loss, "tokens": tokens,
                          "seconds": round(time.time() - self.t_start, 3)})
        return self.last_loss
