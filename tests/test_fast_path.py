"""The fast path computes what the plain path computes: attention, dropout, decoding."""

import copy
import random
from collections import Counter

import pytest
import torch
import torch.nn.functional as F

from submission import GPT, GPTConfig, helper, kernels, trainer, variants
from submission.dataset import CharCorruptionDataset
from submission.decoding import greedy_decode
from submission.kernels import dropout, dropout_keep_mask
from submission.packing import Packing, length_groups, packed_batch
from submission.trainer import Trainer, TrainerConfig, forward_backward
from submission.utils import resolve_precision, sample

VARIANTS = list(variants.VARIANTS)
TINY_OPTIONS = {"perceiver": {"bottleneck_dim": 12}}  # narrower than most rows: positions that miss it


def tiny(variant, vocab=40, block=48, **kw):
    torch.manual_seed(0)
    n_layer = 3 if variant == "perceiver" else 2  # the Perceiver: down, one block on the slots, up
    config = GPTConfig(vocab, block, n_layer=n_layer, n_head=4, n_embd=32, **kw)
    return helper.build(variant, config, **TINY_OPTIONS.get(variant, {}))


def plain_twin(model):
    """The same variant with the same weights, built to compute the plain way."""
    config = copy.copy(model.config)
    config.implementation = "plain"
    twin = GPT(config)
    twin.load_state_dict(model.state_dict())
    return twin.train(model.training)


def test_keep_mask_rate_and_independence():
    keep = dropout_keep_mask((1000, 1000), 0.1, "cpu")
    assert keep.dtype == torch.bool
    assert abs(keep.float().mean().item() - 0.9) < 2e-3
    # Neighbouring elements share a 64-bit draw: they must still be uncorrelated.
    k = keep.float().view(-1, 4)
    corr = torch.corrcoef(k.T)
    off_diagonal = corr[~torch.eye(4, dtype=torch.bool)]
    assert off_diagonal.abs().max() < 0.01
    assert abs(dropout_keep_mask((200_000,), 0.5, "cpu").float().mean().item() - 0.5) < 0.01


def test_dropout_scales_kept_values_and_gradients():
    x = torch.randn(64, 64, requires_grad=True)
    y = dropout(x, 0.25, True)
    kept = y != 0
    assert torch.allclose(y[kept], x[kept] / 0.75)
    y.sum().backward()
    assert torch.allclose(x.grad[kept], torch.full_like(x.grad[kept], 1 / 0.75))
    assert (x.grad[~kept] == 0).all()
    assert dropout(x, 0.25, False) is x


@pytest.mark.parametrize("variant", VARIANTS)
def test_fast_forward_equals_reference(variant):
    model = tiny(variant).eval()
    x = torch.randint(2, 40, (3, 47))
    fast, _ = model(x)
    plain, _ = plain_twin(model)(x)
    assert torch.allclose(fast, plain, atol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
def test_fast_gradients_equal_reference_without_dropout(variant):
    model = tiny(variant, embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0).train()
    x = torch.randint(2, 40, (4, 47))
    y = torch.roll(x, -1, 1)
    _, loss = model(x, y)
    fast = torch.autograd.grad(loss, list(model.parameters()))
    twin = plain_twin(model)
    _, loss = twin(x, y)
    plain = torch.autograd.grad(loss, list(twin.parameters()))
    for a, b in zip(fast, plain):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("variant", VARIANTS)
def test_training_mode_loss_matches_reference_on_average(variant):
    """Dropout draws differ, but the expected loss is the same."""
    model = tiny(variant).train()
    x = torch.randint(2, 40, (16, 47))
    y = torch.roll(x, -1, 1)
    fast = torch.stack([model(x, y)[1] for _ in range(20)]).mean()
    twin = plain_twin(model)
    plain = torch.stack([twin(x, y)[1] for _ in range(20)]).mean()
    assert abs(fast.item() - plain.item()) < 0.02


@pytest.mark.parametrize("variant", VARIANTS)
def test_batched_decoding_equals_one_at_a_time(variant):
    model = tiny(variant, vocab=30, block=64).eval()
    with torch.no_grad():  # sharpen the random model so answers vary with the prompt
        model.head.weight.mul_(20)
    rng = random.Random(1)
    prompts = [[rng.randrange(2, 30) for _ in range(rng.randrange(1, 40))] for _ in range(200)]
    batched = greedy_decode(model, prompts, 16, stop_id=1, batch_size=64)
    same = 0
    for p, got in zip(prompts, batched):
        ref = sample(model, torch.tensor([p]), 16)[0, len(p):].tolist()
        if 1 in ref:
            ref = ref[:ref.index(1) + 1]
        same += got == ref[:len(got)] and (len(got) == len(ref) or len(p) + len(got) > model.max_positions())
    assert same / len(prompts) >= 0.995


def test_precision_choice():
    assert resolve_precision("fp32", "cpu") == "fp32"
    assert resolve_precision("bf16", "cpu") == "bf16"
    assert resolve_precision("auto", "cpu") in ("fp32", "bf16")
    with pytest.raises(ValueError):
        resolve_precision("fp16", "cpu")


def corrupted_batch(n=24, block=48, seed=3):
    """Span-corruption rows of random lengths, as pretraining draws them."""
    rng = random.Random(seed)
    text = "\n".join("".join(rng.choice("abcdefgh ") for _ in range(rng.randrange(6, 60))) for _ in range(n))
    random.seed(seed)
    data = CharCorruptionDataset(text, block)
    return [data[i] for i in range(n)], data.vocab_size


def test_length_groups_keep_every_target():
    batch, _ = corrupted_batch()
    chunks, untrimmed = length_groups(batch, groups=4)
    assert len(chunks) == 4 and untrimmed == 24 * 47
    x_all, y_all = torch.stack([x for x, _ in batch]), torch.stack([y for _, y in batch])
    seen = []
    for x, y in chunks:
        assert x.shape == y.shape and x.size(1) < 47
        for xr, yr in zip(x, y):
            # each group row is the head of one batch row, and nothing after it has a target
            match = [i for i in range(24) if torch.equal(x_all[i, :len(xr)], xr) and torch.equal(y_all[i, :len(yr)], yr)
                     and not y_all[i, len(yr):].any()]
            assert match
            seen.append(match[0])
    assert sorted(seen) == list(range(24))
    widths = [x.size(1) for x, _ in chunks]
    assert widths == sorted(widths) and sum(x.numel() for x, _ in chunks) < 0.8 * 24 * 47


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("groups", [1, 3, 4])
def test_packed_batches_give_the_whole_batch_loss_and_gradient(variant, groups):
    batch, vocab = corrupted_batch()
    model = tiny(variant, vocab=vocab, embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0).train()
    x, y = torch.stack([x for x, _ in batch]), torch.stack([y for _, y in batch])
    twin = plain_twin(model)
    _, loss = twin(x, y)
    loss.backward()
    whole = [p.grad for p in twin.parameters()]
    packing, _ = packed_batch(batch, groups=groups)
    assert len(packing.tokens) == int((y != 0).sum())  # span corruption: only trailing PAD targets
    got = forward_backward(model, packing, "fp32", torch.device("cpu"))
    assert abs(got.item() - loss.item()) < 1e-5
    for a, b in zip(whole, (p.grad for p in model.parameters())):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("variant", VARIANTS)
def test_packing_keeps_the_context_before_an_answer(variant):
    """Question rows: PAD targets over the question, real ones only on the answer."""
    gen = torch.Generator().manual_seed(5)
    x = torch.randint(2, 30, (10, 40), generator=gen)
    y = torch.zeros_like(x)
    for r in range(10):
        start, end = 8 + r, 14 + 2 * r  # answers at different places, PAD before and after
        y[r, start:end] = torch.randint(2, 30, (end - start,), generator=gen)
        x[r, end + 1:] = 0
    model = tiny(variant, vocab=30, embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0).train()
    twin = plain_twin(model)
    _, loss = twin(x, y)
    loss.backward()
    whole = [p.grad for p in twin.parameters()]
    packing, _ = packed_batch(list(zip(x, y)), groups=3)
    assert len(packing.tokens) == sum(14 + 2 * r for r in range(10))  # every position up to the answer's end
    got = forward_backward(model, packing, "fp32", torch.device("cpu"))
    assert abs(got.item() - loss.item()) < 1e-5
    for a, b in zip(whole, (p.grad for p in model.parameters())):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_model_keeps_its_own_implementation(variant, monkeypatch):
    """A fast and a plain model side by side in one process: only the fast one calls the fused
    kernel or the fast dropout; the plain one drops out as nn.Dropout does."""
    calls = Counter()

    def counted(name, fn):
        def call(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return call
    monkeypatch.setattr(F, "scaled_dot_product_attention", counted("fused", F.scaled_dot_product_attention))
    monkeypatch.setattr(F, "dropout", counted("torch dropout", F.dropout))
    monkeypatch.setattr(kernels, "dropout", counted("fast dropout", kernels.dropout))
    fast = tiny(variant)
    plain = plain_twin(fast)
    x = torch.randint(2, 40, (2, 20))
    fast_calls = {"fused", "fast dropout"}
    for model, expected in ((fast, fast_calls), (plain, {"torch dropout"}), (fast, fast_calls)):
        calls.clear()
        model.eval()(x)
        model.train()(x)
        assert set(calls) == expected
    assert fast.config.implementation == "fast" and plain.config.implementation == "plain"


def test_an_unknown_implementation_is_named():
    with pytest.raises(ValueError, match="unknown implementation 'quick'"):
        GPT(GPTConfig(40, 16, n_layer=1, n_head=2, n_embd=8, implementation="quick"))


@pytest.mark.parametrize("implementation, packed", [("fast", True), ("plain", False)])
def test_the_trainer_packs_batches_for_a_fast_model_only(implementation, packed, monkeypatch):
    """The plain model trains on each batch whole, as the course does; there is no separate switch."""
    batch_loss, seen = trainer.batch_loss, []

    def spy(model, batch, device):
        seen.append(isinstance(batch, Packing))
        return batch_loss(model, batch, device)
    monkeypatch.setattr(trainer, "batch_loss", spy)
    rng = random.Random(2)
    data = CharCorruptionDataset("\n".join("".join(rng.choice("abcdefgh ") for _ in range(rng.randrange(6, 60)))
                                           for _ in range(24)), 48)
    model = tiny("vanilla", vocab=data.vocab_size, implementation=implementation)
    Trainer(model, data, None, TrainerConfig(max_epochs=1, batch_size=8, num_workers=0, progress=False)).train()
    assert seen == [packed] * 3


def test_reference_path_flag_builds_a_plain_model():
    import run
    argv = ["--function", "pretrain", "--variant", "rope", "--pretrain_corpus_path", "w", "--writing_params_path", "p",
            "--n_layer", "1", "--n_embd", "16", "--n_head", "2"]
    data = CharCorruptionDataset("Some text here.\nAnd more of it.", 16)
    for flag, implementation in (([], "fast"), (["--reference_path"], "plain")):
        model = run.build_model(run.parse_args(argv + flag), data)
        assert model.config.implementation == implementation
        assert {m.fast for m in model.modules() if isinstance(m, kernels.Dropout)} == {implementation == "fast"}
