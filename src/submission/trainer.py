"""The one training loop: AdamW, warmup then cosine learning-rate decay, clipping.

The course's TrainerConfig/Trainer interface, with what a long CPU or GPU run needs behind
it: mixed precision where the hardware runs it fast, optional torch.compile, losses read
back from the device only every `log_every` steps, periodic atomic checkpoints that
`resume` continues from exactly, a stop on a non-finite loss, and a JSON-lines record of
every epoch next to the params.
"""

import json
import math
import os
import random
import time

import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

from .utils import atomic_save, autocast_context, resolve_precision


class TrainerConfig:
    max_epochs = 10
    batch_size = 64
    learning_rate = 3e-4
    betas = (0.9, 0.95)
    grad_norm_clip = 1.0
    weight_decay = 0.1  # only on the weights of matrix multiplications
    lr_decay = False
    warmup_tokens = 375e6  # linear warmup over these tokens, then cosine decay...
    final_tokens = 260e9  # ...to 10% of the learning rate at these tokens
    ckpt_path = None  # periodic training checkpoint (model, optimizer, RNG), for resume
    num_workers = 0
    # Beyond the course:
    precision = "auto"  # auto | fp32 | bf16
    compile = False
    backend = "inductor"
    log_every = 20  # steps between loss read-backs
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


def decay_groups(model, weight_decay):
    """AdamW groups: weight decay on matmul weights, never on biases, norms or embeddings."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        matmul = p.dim() >= 2 and not name.endswith(("tok_emb.weight", "pos_emb"))
        (decay if matmul else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def lr_multiplier(tokens, config):
    if not config.lr_decay:
        return 1.0
    if tokens < config.warmup_tokens:
        return float(tokens) / float(max(1, config.warmup_tokens))
    progress = float(tokens - config.warmup_tokens) / float(max(1, config.final_tokens - config.warmup_tokens))
    return max(0.1, 0.5 * (1.0 + math.cos(math.pi * progress)))


class Trainer:

    def __init__(self, model, train_dataset, test_dataset, config):
        self.model = model
        self.train_dataset = train_dataset
        self.test_dataset = test_dataset
        self.config = config
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device)

    def save_checkpoint(self, optimizer, epoch, tokens):
        atomic_save({
            "model": self.model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "epoch": epoch,
            "tokens": tokens,
            "rng": {"torch": torch.get_rng_state(), "python": random.getstate(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None},
        }, self.config.ckpt_path)

    def load_checkpoint(self, optimizer):
        state = torch.load(self.config.ckpt_path, map_location="cpu", weights_only=False)
        self.model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"]["torch"])
        random.setstate(state["rng"]["python"])
        if state["rng"]["cuda"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        return state["epoch"] + 1, state["tokens"]

    def log(self, record):
        if self.config.log_path:
            with open(self.config.log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")

    def train(self):
        model, config, device = self.model, self.config, self.device
        cuda = device.type == "cuda"
        self.precision = resolve_precision(config.precision, device)
        optimizer = torch.optim.AdamW(decay_groups(model, config.weight_decay), lr=config.learning_rate,
                                      betas=config.betas, fused=cuda)
        step_model = torch.compile(model, backend=config.backend) if config.compile else model
        workers = config.num_workers if cuda else min(config.num_workers, max(0, (os.cpu_count() or 1) - 1))
        loader = DataLoader(self.train_dataset, shuffle=True, batch_size=config.batch_size,
                            num_workers=workers, pin_memory=cuda, persistent_workers=workers > 0,
                            drop_last=False)
        first_epoch, tokens = 0, 0
        if config.resume and config.ckpt_path and os.path.exists(config.ckpt_path):
            first_epoch, tokens = self.load_checkpoint(optimizer)
            print(f"resuming from {config.ckpt_path} at epoch {first_epoch + 1}")
        self.log({"event": "start", "precision": self.precision, "device": str(device),
                  "first_epoch": first_epoch, **(config.run_info or {})})

        steps_per_epoch = len(loader)
        total = tqdm(total=steps_per_epoch * config.max_epochs, initial=steps_per_epoch * first_epoch,
                     desc="total", unit="step", position=0, disable=not config.progress, dynamic_ncols=True)
        step, last_loss = steps_per_epoch * first_epoch, float("nan")
        for epoch in range(first_epoch, config.max_epochs):
            model.train()
            t0, losses = time.time(), []
            bar = tqdm(loader, total=steps_per_epoch, desc=f"epoch {epoch + 1}/{config.max_epochs}",
                       position=1, leave=False, disable=not config.progress, dynamic_ncols=True)
            pending = []
            for x, y in bar:
                x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                with autocast_context(self.precision, device):
                    _, loss = step_model(x, y)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_norm_clip)
                tokens += y.numel()  # the course counts every target position, PAD included
                lr = config.learning_rate * lr_multiplier(tokens, config)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                optimizer.step()
                step += 1
                pending.append(loss.detach())
                if len(pending) == config.log_every or step % steps_per_epoch == 0:
                    values = torch.stack(pending).float().cpu().tolist()
                    pending = []
                    bad = next((i for i, v in enumerate(values) if not math.isfinite(v)), None)
                    if bad is not None:
                        bad_step = step - len(values) + bad + 1
                        self.log({"event": "non-finite loss", "step": bad_step, "epoch": epoch + 1})
                        raise NonFiniteLoss(
                            f"loss became {values[bad]} at step {bad_step} (epoch {epoch + 1}); "
                            + (f"last good checkpoint: {config.ckpt_path}" if config.ckpt_path
                               else "no checkpoint was kept (set ckpt_path)"))
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
            if config.ckpt_path and ((epoch + 1) % config.ckpt_every_epochs == 0 or epoch + 1 == config.max_epochs):
                self.save_checkpoint(optimizer, epoch, tokens)
        total.close()
        self.final_loss = last_loss
        self.log({"event": "end", "final_loss": last_loss, "tokens": tokens})
