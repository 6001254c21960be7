"""Our Trainer trains what the course's trainer.py trains.

`course_loop` below is a plain statement of the course's training loop (every edition,
2021-2025), written from its facts rather than taken from it:
- a DataLoader without shuffling: each epoch visits the items in index order;
- AdamW with weight decay on every parameter whose name contains neither "bias" nor
  "LayerNorm.weight" (with minGPT's module names: all but the biases);
- the optimizer built at the base rate; after each step the rate of the next step is set
  from the target positions seen so far (PAD included), so the first step runs at the
  full base rate;
- warmup, then max(0.1, 0.5 * (1 + cos(pi * progress))) with progress not clamped, so the
  rate climbs back after final_tokens.
Both loops start from the same weights and see the same random corruption draws (Python's
`random`, seeded alike); dropout is 0 and everything fp32, so they may differ only by the
order of float summation (our Trainer packs the batch and runs the fused kernels).
"""

import math
import random
from pathlib import Path

import pytest
import torch

from submission import CharCorruptionDataset, GPTConfig, Trainer, TrainerConfig
from submission import trainer as trainer_mod
from submission.helper import initialize_synthesizer_model, initialize_vanilla_model, pretrain

ROOT = Path(__file__).resolve().parent.parent

BLOCK = 24
BATCH = 4
TEXT = "\n".join([
    "Ada Lovelace was born in London and wrote the first program .",
    "Alan Turing was born in Maida Vale , London .",
    "",  # an empty document: the course counts it, and it must not crash an item
    "Grace Hopper was born in New York City .",
    "ab",  # shorter than the 4 characters a truncation keeps
    "Emmy Noether was born in Erlangen , Bavaria .",
    "Sofia Kovalevskaya was born in Moscow .",
    "Kurt Goedel was born in Brno .",
    "Hedy Lamarr was born in Vienna , Austria .",
    "Srinivasa Ramanujan was born in Erode .",
]) + "\n"  # a trailing newline: one more, empty, document, as in the 2021-2023 wiki.txt
EPOCHS = 2  # 11 documents in batches of 4: 3 steps an epoch, the last one of 3 rows
TOKENS_PER_FULL_STEP = BATCH * (BLOCK - 1)


def schedule():
    """Warmup, decay and the climb back after final_tokens, all within the 6 steps."""
    return dict(learning_rate=3e-3, lr_decay=True, warmup_tokens=int(1.5 * TOKENS_PER_FULL_STEP),
                final_tokens=int(2.5 * TOKENS_PER_FULL_STEP), weight_decay=0.1, betas=(0.9, 0.95),
                grad_norm_clip=1.0, batch_size=BATCH, max_epochs=EPOCHS)


def course_lr_mult(tokens, warmup, final):
    if tokens < warmup:
        return tokens / max(1, warmup)
    progress = (tokens - warmup) / max(1, final - warmup)
    return max(0.1, 0.5 * (1.0 + math.cos(math.pi * progress)))


def course_loop(model, dataset, s):
    """The course's loop, on a plain whole batch; returns each step's loss and rate."""
    no_decay = ["bias", "LayerNorm.weight"]
    named = list(model.named_parameters())
    optimizer = torch.optim.AdamW([
        {"params": [p for n, p in named if not any(nd in n for nd in no_decay)], "weight_decay": s["weight_decay"]},
        {"params": [p for n, p in named if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ], lr=s["learning_rate"], betas=s["betas"])
    tokens, losses, rates = 0, [], []
    for _ in range(s["max_epochs"]):
        model.train()
        for first in range(0, len(dataset), s["batch_size"]):
            items = [dataset[i] for i in range(first, min(first + s["batch_size"], len(dataset)))]
            x = torch.stack([a for a, _ in items])
            y = torch.stack([b for _, b in items])
            _, loss = model(x, y)
            model.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), s["grad_norm_clip"])
            rates.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            tokens += int((y >= 0).sum())
            lr = s["learning_rate"] * course_lr_mult(tokens, s["warmup_tokens"], s["final_tokens"])
            for group in optimizer.param_groups:
                group["lr"] = lr
            losses.append(loss.detach().item())
    return losses, rates


class Record:
    """Stands in for a TensorBoard writer: the Trainer reports every step's loss and rate."""

    def __init__(self):
        self.scalars = {}

    def add_scalar(self, tag, value, step):
        self.scalars.setdefault(tag, []).append(float(value))

    def flush(self):
        pass


def our_loop(model, dataset, recipe="course"):
    record = Record()
    config = TrainerConfig(**schedule(), num_workers=0, precision="fp32", progress=False, log_every=1,
                           tb_writer=record, recipe=recipe)
    trainer = Trainer(model, dataset, None, config)
    trainer.train()
    return record.scalars["train/loss"], trainer


def tiny(variant, vocab_size):
    config = GPTConfig(vocab_size, BLOCK, n_layer=2, n_head=2, n_embd=16,
                       embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0)
    init = initialize_vanilla_model if variant == "vanilla" else initialize_synthesizer_model
    torch.manual_seed(0)
    return init(config)


def relative_change(a, b, start):
    """|a - b| relative to how far b moved from where both started."""
    return float((a - b).norm() / (b - start).norm().clamp_min(1e-12))


def trained_pair(variant, recipe="course"):
    dataset = CharCorruptionDataset(TEXT, BLOCK)
    ours, reference = tiny(variant, dataset.vocab_size), tiny(variant, dataset.vocab_size)
    start = {k: v.clone() for k, v in reference.state_dict().items()}
    random.seed(1)
    ref_losses, ref_rates = course_loop(reference, dataset, schedule())
    random.seed(1)
    our_losses, trainer = our_loop(ours, dataset, recipe)
    return (ours, our_losses), (reference, ref_losses, ref_rates), start


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_schedule_reaches_every_phase():
    """The test would prove little if the squeezed schedule skipped warmup or the climb back."""
    dataset = CharCorruptionDataset(TEXT, BLOCK)
    s = schedule()
    assert len(dataset) == 11  # every line, the empty last one included
    random.seed(1)
    _, rates = course_loop(tiny("vanilla", dataset.vocab_size), dataset, s)
    assert len(rates) == 6
    assert rates[0] == s["learning_rate"]  # the first step at the base rate, before warmup
    assert rates[1] < s["learning_rate"]  # warming up
    low = min(range(6), key=lambda i: rates[i])
    assert rates[low] < 0.2 * s["learning_rate"]  # near the floor, past final_tokens
    assert max(rates[low:]) > 0.5 * s["learning_rate"]  # and back up: the cosine is not clamped


@pytest.mark.parametrize("variant", ["vanilla", "synthesizer"])
def test_our_trainer_trains_what_the_course_loop_trains(variant):
    (ours, our_losses), (reference, ref_losses, _), start = trained_pair(variant)
    assert len(our_losses) == len(ref_losses) == 6
    assert our_losses == pytest.approx(ref_losses, rel=1e-4, abs=1e-5)
    mine, theirs = ours.state_dict(), reference.state_dict()
    for name, value in theirs.items():
        if name.endswith("attn.key.bias"):
            continue  # its true gradient is zero (softmax cancels it): it moves by float noise in both
        if not value.is_floating_point() or torch.equal(value, start[name]):
            continue  # buffers
        gap = relative_change(mine[name], value, start[name])
        assert gap < 2e-4, f"{name}: our weights differ from the course loop's by {gap:.1%} of the update"


def test_our_recipe_is_a_different_run():
    """The alternative recipe changes what is trained (so the test above is not vacuous)."""
    (ours, our_losses), (reference, ref_losses, _), start = trained_pair("vanilla", recipe="ours")
    gap = relative_change(ours.state_dict()["tok_emb.weight"], reference.state_dict()["tok_emb.weight"],
                          start["tok_emb.weight"])
    assert gap > 0.05


def test_course_decay_groups_follow_the_substring_rule():
    model = tiny("synthesizer", 30)
    groups = trainer_mod.decay_groups(model, 0.1)  # the course recipe is the default
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for g in groups if g["weight_decay"] == 0.1 for p in g["params"]}
    plain = {names[id(p)] for g in groups if g["weight_decay"] == 0.0 for p in g["params"]}
    assert plain == {n for n in names.values() if n.endswith(".bias")}
    assert {"tok_emb.weight", "pos_emb", "ln_f.weight", "blocks.0.ln1.weight", "blocks.1.attn.w2",
            "blocks.1.attn.b2"} <= decayed


@pytest.mark.parametrize("newline, want", [("", 3), ("\n", 4)])
def test_len_counts_lines_as_the_course_does(newline, want):
    text = "first document\nsecond one\nthird" + newline
    dataset = CharCorruptionDataset(text, 16)
    assert len(dataset) == want
    for i in range(len(dataset)):
        for _ in range(20):
            x, y = dataset[i]  # never raises, the empty last document included
            assert x.shape == y.shape == (15,)


COURSE_WIKI = ROOT / ".." / "shared" / "course-data" / "wiki.txt"


@pytest.mark.parametrize("path, newline", [(ROOT / "data" / "wiki.txt", ""), (COURSE_WIKI, ""), (COURSE_WIKI, "\n")])
def test_final_tokens_as_the_course_computes_them(path, newline):
    """The course's grader checks final_tokens = 200 * (lines of wiki.txt) * 128: 75187200 on the
    2024-25 file, 75212800 on the 2021-23 one, which ends with a newline (an empty document)."""
    if not path.exists():
        pytest.skip(f"{path.name} of the course is not at ../shared/course-data")
    text = path.read_text(encoding="utf-8") + newline
    dataset = CharCorruptionDataset(text, 128)
    model = initialize_vanilla_model(GPTConfig(dataset.vocab_size, 128, n_layer=1, n_head=1, n_embd=8))
    tconf, _ = pretrain(dataset, 128, model)
    assert tconf.final_tokens == 200 * (text.count("\n") + 1) * 128
    if path == COURSE_WIKI:
        assert tconf.final_tokens == {"": 75187200, "\n": 75212800}[newline]
