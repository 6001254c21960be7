"""The device batch generator (corruption.CorruptionBatches) against the definition,
CharCorruptionDataset.__getitem__: the format of every row, and the distributions of the
truncated length, span length and span start (two-sample chi-square tests on many seeded
draws, shown here to reject variants a few percent off)."""

import random
import string

import pytest
import torch

from submission.corruption import CorruptionBatches
from submission.dataset import MASK_CHAR, PAD_CHAR, CharCorruptionDataset


def make_dataset(block_size, cap, lengths, seed=0):
    """One document per line with the given lengths (0 for an empty line), random letters."""
    rng = random.Random(seed)
    docs = ["".join(rng.choice(string.ascii_letters + " ") for _ in range(n)) for n in lengths]
    return CharCorruptionDataset("\n".join(docs), block_size, cap=cap)


def parse(dataset, row):
    """(n, span, start) of one full row, checking its format against its document."""
    s = dataset.vocab.decode(row)
    assert len(s) == dataset.block_size
    end = s.find(PAD_CHAR)
    end = len(s) if end < 0 else end
    assert set(s[end:]) <= {PAD_CHAR}, s
    body = s[:end]
    assert body.count(MASK_CHAR) == 2 and PAD_CHAR not in body, s
    first, second = body.index(MASK_CHAR), body.rindex(MASK_CHAR)
    prefix, suffix, masked = body[:first], body[first + 1:second], body[second + 1:]
    n = len(prefix) + len(suffix) + len(masked)
    return n, len(masked), len(prefix), prefix + masked + suffix


def check_row(dataset, idx, x, y):
    row = torch.cat([x, y[-1:]])
    assert torch.equal(x[1:], y[:-1]), "y is x shifted by one"
    n, span, start, doc = parse(dataset, row)
    source = dataset.data[idx]
    assert source.startswith(doc), (source, doc)
    assert min(len(source), 4) <= n <= min(len(source), dataset.max_length)
    if n:
        assert 1 <= span <= n and 0 <= start <= n - span
    return n, span, start


LENGTHS = [0, 1, 2, 3, 4, 5, 7, 10, 13, 20, 21, 22, 40, 200]


@pytest.mark.parametrize("block_size", [24, 128])
@pytest.mark.parametrize("cap", [7 / 8, 3 / 4])
def test_every_row_has_the_course_format(block_size, cap):
    data = make_dataset(block_size, cap, LENGTHS + list(range(block_size - 4, block_size + 3)))
    gen = CorruptionBatches(data, seed=3)
    idx = torch.arange(len(data)).repeat(50)
    x, y = gen(idx)
    assert x.shape == y.shape == (len(idx), block_size - 1) and x.dtype == torch.long
    seen = set()
    for i, xr, yr in zip(idx.tolist(), x, y):
        seen.add(check_row(data, i, xr, yr)[0])
    assert max(seen) == data.max_length  # the cap is reached...
    assert 0 in seen and 4 in seen  # ...and empty and short documents are used whole
    empty = data.data.index("")
    x, y = gen(torch.tensor([empty]))
    assert data.vocab.decode(torch.cat([x[0], y[0, -1:]])) == MASK_CHAR * 2 + PAD_CHAR * (block_size - 2)


def test_the_dataset_passes_the_same_format_check():
    data = make_dataset(128, 7 / 8, LENGTHS)
    random.seed(0)
    for i in range(len(data)):
        for _ in range(20):
            check_row(data, i, *data[i])


def test_seeded_and_resumable():
    data = make_dataset(64, 7 / 8, LENGTHS)
    idx = torch.arange(len(data))
    a, b = CorruptionBatches(data, seed=5), CorruptionBatches(data, seed=5)
    assert torch.equal(a(idx)[0], b(idx)[0])
    state = a.state()
    first = a(idx)[0]
    assert not torch.equal(first, a(idx)[0])
    a.set_state(state)
    assert torch.equal(first, a(idx)[0])
    assert not torch.equal(CorruptionBatches(data, seed=6)(idx)[0], b(idx)[0])


# --- distributions -------------------------------------------------------------------


def chi_square_p(a, b, min_count=10):
    """p-value of a two-sample chi-square test that counts a and b (same cells) come from
    one distribution; cells with fewer than min_count draws in all are pooled into one."""
    a, b = a.double(), b.double()
    small = (a + b) < min_count
    a = torch.cat([a[~small], a[small].sum(0, keepdim=True)])
    b = torch.cat([b[~small], b[small].sum(0, keepdim=True)])
    keep = (a + b) > 0
    a, b = a[keep], b[keep]
    na, nb = a.sum(), b.sum()
    stat = (((a * (nb / na).sqrt() - b * (na / nb).sqrt()) ** 2) / (a + b)).sum()
    df = len(a) - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.double), stat / 2))


def cells(draws, sizes):
    """Counts of the joint values `draws` (a list of integer tensors) in a flat histogram."""
    flat = torch.zeros_like(draws[0])
    for d, size in zip(draws, sizes):
        flat = flat * size + d
    return torch.bincount(flat, minlength=int(torch.tensor(sizes).prod()))


def locate(data, rows):
    """(n, span, start) of many full rows at once, from where their masks and padding are
    (every row's format is checked above, string by string)."""
    T = rows.size(1)
    mask, pad = rows == data.stoi[MASK_CHAR], rows == data.stoi[PAD_CHAR]
    first = mask.int().argmax(1)
    second = T - 1 - mask.flip(1).int().argmax(1)
    end = torch.where(pad.any(1), pad.int().argmax(1), T)
    n = end - 2
    return [n, n + 1 - second, first]


def dataset_draws(data, idx, seed):
    random.seed(seed)
    return locate(data, torch.stack([torch.cat([x, y[-1:]]) for x, y in (data[i] for i in idx.tolist())]))


def generator_draws(gen, data, idx):
    x, y = gen(idx)
    return locate(data, torch.cat([x, y[:, -1:]], 1))


def p_values(data, ours, theirs):
    """p of the comparisons: truncated length; span given length; start given room."""
    (n1, s1, t1), (n2, s2, t2) = ours, theirs
    size = data.block_size
    return {"length": chi_square_p(cells([n1], [size]), cells([n2], [size])),
            "span": chi_square_p(cells([n1, s1], [size, size]), cells([n2, s2], [size, size])),
            "start": chi_square_p(cells([n1 - s1, t1], [size, size]), cells([n2 - s2, t2], [size, size])),
            # the same, coarse: which quarter of its room the span starts in (fewer cells, more power)
            "start_quarter": chi_square_p(cells([4 * t1 // (n1 - s1 + 1)], [4]), cells([4 * t2 // (n2 - s2 + 1)], [4]))}


class HalfUp(CorruptionBatches):
    """round(n / 4) with halves rounded up: differs from the definition at n = 10, 18, 26..."""
    def draw(self, idx):
        n, _, _ = super().draw(idx)
        quarter = torch.floor(n / 4 + 0.5).long().clamp(min=1)
        span = torch.minimum(n, 1 + self._below(2 * quarter - 1))
        return n, span, self._below(n - span + 1)


class SpanOneLonger(CorruptionBatches):
    """Span drawn from [1, 2 * quarter] instead of [1, 2 * quarter - 1], for 5% of rows."""
    def draw(self, idx):
        n, span, start = super().draw(idx)
        quarter = torch.round(n / 4).long().clamp(min=1)
        wide = torch.minimum(n, 1 + self._below(2 * quarter))
        pick = self._below(torch.full_like(n, 20)) == 0
        span = torch.where(pick, wide, span)
        return n, span, self._below(n - span + 1)


class CapOneShort(CorruptionBatches):
    """Truncation drawn from [4, max_length - 1]: about 5% more of each other length."""
    def draw(self, idx):
        n, span, start = super().draw(idx)
        cut = 4 + self._below(torch.full_like(idx, self.max_length - 4))
        n = torch.minimum(self.lengths[idx], cut)
        span = torch.minimum(n, 1 + self._below(2 * torch.round(n / 4).long().clamp(min=1) - 1))
        return n, span, self._below(n - span + 1)


class ShortTail(CorruptionBatches):
    """5% of rows truncated to [4, max_length // 2]: the lengths' distribution 2-3% off."""
    def draw(self, idx):
        n, span, start = super().draw(idx)
        short = torch.minimum(self.lengths[idx], 4 + self._below(torch.full_like(idx, self.max_length // 2 - 3)))
        n = torch.where(self._below(torch.full_like(n, 20)) == 0, short, n)
        span = torch.minimum(n, 1 + self._below(2 * torch.round(n / 4).long().clamp(min=1) - 1))
        return n, span, self._below(n - span + 1)


class StartFront(CorruptionBatches):
    """5% of rows start the span in the first half of its room: starts 2-3% off."""
    def draw(self, idx):
        n, span, start = super().draw(idx)
        front = self._below((n - span) // 2 + 1)
        return n, span, torch.where(self._below(torch.full_like(n, 20)) == 0, front, start)


DRAWS = 60000


@pytest.fixture(scope="module")
def small_block():
    """Block 24: few enough (length, span, start) cells for a joint test of each with many draws."""
    data = make_dataset(24, 7 / 8, [0, 3, 6, 10, 14, 18, 30, 30, 30, 30])
    idx = torch.arange(len(data)).repeat(DRAWS // len(data))
    return data, idx, dataset_draws(data, idx, seed=1)


def test_distributions_equal_the_dataset(small_block):
    data, idx, theirs = small_block
    p = p_values(data, generator_draws(CorruptionBatches(data, seed=2), data, idx), theirs)
    assert min(p.values()) > 1e-3, p


@pytest.mark.parametrize("variant, statistic", [(HalfUp, "span"), (SpanOneLonger, "span"),
                                                (CapOneShort, "length"), (ShortTail, "length"),
                                                (StartFront, "start_quarter")])
def test_the_comparison_rejects_a_slightly_wrong_generator(small_block, variant, statistic):
    data, idx, theirs = small_block
    p = p_values(data, list(variant(data, seed=2).draw(idx)), theirs)  # draws alone: rows are tested above
    assert p[statistic] < 1e-6, p


@pytest.mark.parametrize("cap", [7 / 8, 3 / 4])
def test_distributions_equal_the_dataset_at_the_course_block(cap):
    data = make_dataset(128, cap, [0, 2, 30, 57, 90] + [200] * 7)
    idx = torch.arange(len(data)).repeat(30000 // len(data))
    theirs = dataset_draws(data, idx, seed=4)
    ours = generator_draws(CorruptionBatches(data, seed=5), data, idx)
    size = data.block_size
    p = [chi_square_p(cells([a], [size]), cells([b], [size])) for a, b in zip(ours, theirs)]
    assert min(p) > 1e-3, p
    assert min(chi_square_p(cells([a], [size]), cells([b], [size]))
               for a, b in zip(CapOneShort(data, seed=5).draw(idx), theirs)) < 1e-6


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_no_host_synchronisation_on_cuda():
    data = make_dataset(128, 7 / 8, LENGTHS)
    gen = CorruptionBatches(data, device="cuda", seed=0)
    idx = torch.arange(len(data), device="cuda").repeat(10)
    gen(idx)  # warm-up: first calls may allocate
    torch.cuda.set_sync_debug_mode("error")
    try:
        x, y = gen(idx)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert x.is_cuda and x.shape == (len(idx), 127)


# --- the trainer on device batches ---------------------------------------------------


from submission.model import GPT, GPTConfig  # noqa: E402
from submission.trainer import RECIPES, Trainer, TrainerConfig, device_epoch  # noqa: E402


class Recording(CorruptionBatches):
    def __init__(self, data, **kwargs):
        super().__init__(data, **kwargs)
        self.seen = []

    def __call__(self, idx):
        self.seen.append(idx.clone())
        return super().__call__(idx)


@pytest.mark.parametrize("recipe", ["course", "ours"])
def test_device_epochs_keep_the_recipes_order(recipe):
    data = make_dataset(32, 7 / 8, [5 + i % 40 for i in range(23)])
    gen = Recording(data, seed=0)
    orders = []
    for _ in range(2):
        gen.seen = []
        sizes = [untrimmed for _, untrimmed in device_epoch(gen, 5, RECIPES[recipe].shuffle, True, 2)]
        assert sizes == [5 * 31] * 4 + [3 * 31]  # the last batch short, as the DataLoader's with drop_last=False
        assert [len(i) for i in gen.seen] == [5, 5, 5, 5, 3]
        orders.append(torch.cat(gen.seen))
    for order in orders:
        assert sorted(order.tolist()) == list(range(23))  # every document once an epoch
    if recipe == "course":
        assert all(order.tolist() == list(range(23)) for order in orders)  # index order
    else:
        assert orders[0].tolist() != list(range(23)) and orders[0].tolist() != orders[1].tolist()


def tiny_training(tmp_path, name, device_batches, epochs, resume=False, seed=0):
    text = "\n".join(f"{name} was born in {place} in the year {1900 + i}, and lived a long life there"
                     for i, (name, place) in enumerate(zip(["Ann", "Bob", "Cyd", "Dee", "Eve"] * 8,
                                                           ["Oslo", "Lima", "Rome", "Kyiv", "Baku"] * 8)))
    torch.manual_seed(seed)
    random.seed(seed)
    data = CharCorruptionDataset(text, 32)
    model = GPT(GPTConfig(data.vocab_size, 32, n_layer=1, n_head=2, n_embd=32))
    conf = TrainerConfig(max_epochs=epochs, batch_size=8, learning_rate=3e-3, lr_decay=True, warmup_tokens=200,
                         final_tokens=5 * len(data) * 32, num_workers=0, progress=False,
                         device_batches=device_batches, ckpt_path=str(tmp_path / f"{name}.ckpt"),
                         log_path=str(tmp_path / f"{name}.log.jsonl"), resume=resume)
    trainer = Trainer(model, data, None, conf)
    trainer.train()
    import json
    with open(conf.log_path) as f:
        records = [json.loads(line) for line in f]
    return model, trainer, [r for r in records if r["event"] == "epoch"], records


def test_trainer_on_device_batches_learns_and_counts_tokens_as_the_course(tmp_path):
    model, trainer, epochs, records = tiny_training(tmp_path, "device", True, 6)
    assert trainer.corruption is not None and records[0]["device_batches"] is True
    _, plain_trainer, plain_epochs, plain_records = tiny_training(tmp_path, "plain", False, 6)
    assert plain_trainer.corruption is None and plain_records[0]["device_batches"] is False
    # the schedule's tokens: every position of every row, 40 documents x 31 positions an epoch, in both paths
    assert [e["tokens"] for e in epochs] == [e["tokens"] for e in plain_epochs] == [40 * 31 * k for k in range(1, 7)]
    assert [e["lr"] for e in epochs] == [e["lr"] for e in plain_epochs]
    assert epochs[-1]["mean_loss"] < 0.8 * epochs[0]["mean_loss"]


def test_device_batches_resume_exactly(tmp_path):
    whole, _, _, _ = tiny_training(tmp_path, "whole", True, 3)
    tiny_training(tmp_path, "split", True, 2)
    resumed, _, _, _ = tiny_training(tmp_path, "split", True, 3, resume=True)
    for a, b in zip(whole.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)


def test_device_batches_stay_off_on_cpu_and_for_other_datasets(tmp_path):
    data = make_dataset(32, 7 / 8, [10, 20])
    model = GPT(GPTConfig(data.vocab_size, 32, n_layer=1, n_head=2, n_embd=32))
    trainer = Trainer(model, data, None, TrainerConfig())
    assert trainer.use_device_batches() is torch.cuda.is_available()
    trainer.config.device_batches = True
    assert trainer.use_device_batches()
    trainer.train_dataset = list(range(3))
    assert not trainer.use_device_batches()
