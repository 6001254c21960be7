"""The course's specification of src/submission, checked on small inline data and tiny models.

Every reference value here is computed independently of the code under test (direct
formulas, hand-built strings, shapes written out), so a wrong implementation fails.
The course's own data files are used when ../shared/course-data exists, skipped otherwise.
"""

import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch

import submission
from submission import decoding, helper, trainer as trainer_mod, utils
from submission import (CausalCrossAttention, CausalSelfAttention, CharCorruptionDataset, DownProjectBlock,
                        GPTConfig, NameDataset, SynthesizerAttention, Trainer, TrainerConfig, UpProjectBlock,
                        apply_rotary_emb, evaluate_places, initialize_perceiver_model, initialize_rope_model,
                        initialize_vanilla_model, precompute_rotary_emb)
from submission.variants import VARIANTS

ROOT = Path(__file__).resolve().parent.parent
COURSE = ROOT.parent / "shared" / "course-data"

PAD = "\u25A1"
MASK = "\u2047"

# A small pretraining text: several documents, punctuation, a non-ASCII letter, and every
# character the finetuning rows below use.
WIKI = "\n".join([
    "Ada Lovelace was born in London and worked on the Analytical Engine.",
    "Alan Turing was born in London ; he studied at Cambridge.",
    "Grace Hopper was born in New York City, the daughter of Walter Murray.",
    "Emmy Noether was born in Erlangen, Bavaria, in 1882.",
    "Srinivasa Ramanujan was born in Erode; his mother was Komalatammal.",
    "Marie Sk\u0142odowska was born in Warsaw. Where was she born? Warsaw!",
])
TRAIN_ROWS = [("Where was Ada Lovelace born?", "London"),
              ("Where was Grace Hopper born?", "New York City"),
              ("Where was Emmy Noether born?", "Erlangen")]
TRAIN_TSV = "".join(f"{q}\t{a}\n" for q, a in TRAIN_ROWS)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny models: one thread is fastest, and far faster than OpenMP spinning on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _seed():
    random.seed(1234)
    np.random.seed(1234)
    torch.manual_seed(1234)


def course_file(name):
    path = COURSE / name
    if not path.exists():
        pytest.skip(f"course data not available at {COURSE}")
    return path.read_text(encoding="utf-8")


def tiny_config(vocab_size=24, block_size=16, n_layer=2, n_head=2, n_embd=16, **kw):
    return GPTConfig(vocab_size, block_size, n_layer=n_layer, n_head=n_head, n_embd=n_embd, **kw)


# Tiny models: a Perceiver bottleneck narrower than the block, so some positions miss it.
TINY_OPTIONS = {"perceiver": {"bottleneck_dim": 6}}


def build(variant, config, **options):
    return helper.INITIALIZE[variant](config, **(options or TINY_OPTIONS.get(variant, {})))


def decisive(model, seed=0):
    """Default initialisation with a sharpened head: next tokens depend on the context, no near-ties."""
    torch.manual_seed(seed)
    with torch.no_grad():
        model.head.weight.mul_(20.0)
        if model.pos_emb is not None:
            model.pos_emb.normal_(0.0, 0.02)  # positions must matter (their initialisation is zero)
    return model.eval()


def scramble(model, std=0.5, seed=0):
    """Large random weights, so that argmax decoding is far from ties and varies by position."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * std)
    return model


# --- the package ---------------------------------------------------------------------------

EXPORTS = ["GPT", "GPTConfig", "CharCorruptionDataset", "NameDataset", "TrainerConfig", "Trainer",
           "evaluate_places", "sample", "initialize_vanilla_model", "initialize_synthesizer_model",
           "initialize_rope_model", "initialize_perceiver_model", "finetune", "pretrain", "train",
           "CausalSelfAttention", "SynthesizerAttention", "CausalCrossAttention", "DownProjectBlock",
           "UpProjectBlock", "precompute_rotary_emb", "apply_rotary_emb"]


def test_package_exports_the_course_names():
    missing = [n for n in EXPORTS if not hasattr(submission, n)]
    assert not missing, f"submission does not export {missing}"
    for name in ("GPT", "CausalSelfAttention", "SynthesizerAttention"):
        assert issubclass(getattr(submission, name), torch.nn.Module), name
    for name in ("evaluate_places", "sample", "initialize_vanilla_model", "initialize_synthesizer_model",
                 "finetune", "pretrain", "train"):
        assert callable(getattr(submission, name)), name
    assert submission.sample is utils.sample


# --- vocabulary -----------------------------------------------------------------------------

def test_vocabulary_pad_mask_then_sorted_characters():
    text = "zebra\nApple pie\n\u00e9t\u00e9 42!"
    ds = CharCorruptionDataset(text, 16)
    chars = sorted(set(text))
    assert "\n" in chars
    assert ds.PAD_CHAR == PAD and ds.MASK_CHAR == MASK
    assert ds.stoi[PAD] == 0 and ds.stoi[MASK] == 1
    assert ds.vocab_size == len(chars) + 2
    assert [ds.itos[i] for i in range(ds.vocab_size)] == [PAD, MASK] + chars
    assert all(ds.stoi[ch] == i for i, ch in ds.itos.items())
    assert ds.block_size == 16


def test_vocabulary_of_course_wiki_has_256_ids():
    ds = CharCorruptionDataset(course_file("wiki.txt"), 128)
    assert ds.vocab_size == 256
    assert ds.itos[0] == PAD and ds.itos[1] == MASK and ds.itos[2] == "\n"
    assert len(ds) == 2937


# --- span corruption --------------------------------------------------------------------------

def decode_item(ds, x, y):
    """The full corrupted string behind (x, y), after checking the x/y relation."""
    n = ds.block_size - 1
    assert x.dtype == torch.long and y.dtype == torch.long
    assert tuple(x.shape) == (n,) and tuple(y.shape) == (n,)
    assert torch.equal(x[1:], y[:-1]), "y must be x shifted by one position"
    return "".join(ds.itos[int(i)] for i in x) + ds.itos[int(y[-1])]


def split_corrupted(s, block_size):
    """(prefix, masked, suffix) of `prefix MASK suffix MASK masked PAD...`."""
    assert len(s) == block_size
    assert s.count(MASK) == 2, f"expected exactly two MASK characters in {s!r}"
    i = s.index(MASK)
    j = s.index(MASK, i + 1)
    prefix, suffix, rest = s[:i], s[i + 1:j], s[j + 1:]
    masked = rest.rstrip(PAD)
    assert PAD not in prefix + suffix + masked, f"PAD inside the content: {s!r}"
    return prefix, masked, suffix


def draw(ds, idx, times):
    out = []
    for _ in range(times):
        x, y = ds[idx]
        out.append(split_corrupted(decode_item(ds, x, y), ds.block_size))
    return out


def random_corpus(seed, n_docs, min_len, max_len):
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFG .,;'-0123456789\u00e9\u00fc\u0142\u4e2d"
    return [ "".join(rng.choice(alphabet) for _ in range(rng.randint(min_len, max_len)))
            for _ in range(n_docs)]


@pytest.mark.parametrize("block_size", [16, 32, 128])
def test_corruption_items_have_the_course_form(block_size):
    docs = random_corpus(7, 30, 4, 300)
    ds = CharCorruptionDataset("\n".join(docs), block_size)
    assert len(ds) == len(docs)
    hi = int(block_size * 7 / 8)
    for idx, doc in enumerate(docs):
        for prefix, masked, suffix in draw(ds, idx, 20):
            whole = prefix + masked + suffix
            assert doc.startswith(whole), (doc, prefix, masked, suffix)
            assert 4 <= len(whole) <= min(hi, len(doc))


def test_every_truncation_length_is_reachable():
    doc = "".join(random.Random(3).choice("abcdefgh ") for _ in range(400))
    for block_size, draws in ((32, 2500), (128, 8000)):
        ds = CharCorruptionDataset(doc, block_size)
        hi = int(block_size * 7 / 8)
        seen = {len(p + m + s) for p, m, s in draw(ds, 0, draws)}
        assert seen == set(range(4, hi + 1)), f"block {block_size}: missing {sorted(set(range(4, hi + 1)) - seen)}"
    short = "abcdefghij"  # shorter than the cap (14): lengths 4..10
    ds = CharCorruptionDataset(short, 16)
    assert {len(p + m + s) for p, m, s in draw(ds, 0, 600)} == set(range(4, 11))


def test_masked_length_averages_a_quarter_and_is_random():
    doc = "".join(random.Random(5).choice("abcdefgh ") for _ in range(400))
    ds = CharCorruptionDataset(doc, 128)
    items = draw(ds, 0, 5000)
    ratios = [len(m) / len(p + m + s) for p, m, s in items]
    mean_ratio = sum(ratios) / len(ratios)
    assert abs(mean_ratio - 0.25) < 0.03, f"masked span averages {mean_ratio:.3f} of the truncated document"
    total_masked = sum(len(m) for _, m, _ in items)
    total = sum(len(p + m + s) for p, m, s in items)
    assert abs(total_masked / total - 0.25) < 0.03
    by_length = {}
    for p, m, s in items:
        by_length.setdefault(len(p + m + s), []).append((len(m), len(p)))
    varied = [n for n, v in by_length.items() if n >= 40 and len({a for a, _ in v}) >= 3]
    assert len(varied) > 10, "the masked length must be random, not a function of the truncation"
    starts = [n for n, v in by_length.items() if n >= 40 and len({b for _, b in v}) >= 3]
    assert len(starts) > 10, "the masked span must start at random places"


def test_short_documents_and_empty_lines_count_and_are_used_whole():
    text = "ab\n\nabcd\nabc\n\nhello world, a longer one\nx"
    docs = text.split("\n")
    ds = CharCorruptionDataset(text, 16)
    assert len(ds) == len(docs) == 7
    for idx, doc in enumerate(docs):
        wholes = set()
        for prefix, masked, suffix in draw(ds, idx, 50):
            whole = prefix + masked + suffix
            assert doc.startswith(whole) and len(whole) >= min(4, len(doc))
            wholes.add(whole)
        if len(doc) <= 4:
            assert wholes == {doc}  # used whole: an empty one is `MASK MASK PAD...`


@pytest.mark.parametrize("cap, longest", [(7 / 8, 112), (3 / 4, 96)])
def test_truncation_cap(cap, longest):
    doc = "".join(random.Random(3).choice("abcdefgh ") for _ in range(400))
    ds = CharCorruptionDataset(doc, 128, cap=cap)
    lengths = {len(p + m + s) for p, m, s in draw(ds, 0, 3000)}
    assert max(lengths) == longest and min(lengths) == 4


def test_truncation_cap_must_leave_room():
    with pytest.raises(ValueError, match="truncation cap"):
        CharCorruptionDataset("some document", 16, cap=1.0)


def test_corruption_on_course_wiki():
    text = course_file("wiki.txt")
    docs = text.split("\n")
    ds = CharCorruptionDataset(text, 128)
    assert len(ds) == len(docs)
    rng = random.Random(0)
    for idx in rng.sample(range(len(ds)), 300):
        x, y = ds[idx]
        prefix, masked, suffix = split_corrupted(decode_item(ds, x, y), 128)
        whole = prefix + masked + suffix
        assert docs[idx].startswith(whole) and 4 <= len(whole) <= 112


# --- NameDataset ---------------------------------------------------------------------------------

def expected_name_item(question, answer, block_size):
    full = question + MASK + answer + MASK
    full += PAD * (block_size - len(full))
    return full[:-1], PAD * (len(question) - 1) + full[len(question):]


@pytest.mark.parametrize("tsv", [TRAIN_TSV, TRAIN_TSV.rstrip("\n")], ids=["newline", "no-newline"])
def test_name_dataset_items(tsv):
    pre = CharCorruptionDataset(WIKI, 64)
    ds = NameDataset(pre, tsv)
    assert len(ds) == len(TRAIN_ROWS)
    assert ds.stoi == pre.stoi and ds.itos == pre.itos
    for (question, answer), (x, y) in zip(TRAIN_ROWS, ds):
        want_x, want_y = expected_name_item(question, answer, 64)
        assert x.dtype == torch.long and y.dtype == torch.long
        assert len(x) == len(y) == 63
        assert "".join(pre.itos[int(i)] for i in x) == want_x
        assert "".join(pre.itos[int(i)] for i in y) == want_y
        # the loss ignores the question: its first len-1 targets are PAD, then y is x shifted
        assert (y[:len(question) - 1] == 0).all()
        assert torch.equal(y[len(question) - 1:-1], x[len(question):])


def test_name_dataset_on_course_files():
    pre = CharCorruptionDataset(course_file("wiki.txt"), 128)
    text = course_file("birth_places_train.tsv")
    ds = NameDataset(pre, text)
    assert len(ds) == 2000
    question, answer = text.split("\n")[0].split("\t")
    x, y = ds[0]
    assert len(x) == len(y) == 127
    want_x, want_y = expected_name_item(question, answer, 128)
    assert "".join(pre.itos[int(i)] for i in x) == want_x
    assert "".join(pre.itos[int(i)] for i in y) == want_y


# --- helper: the course's hyperparameters ------------------------------------------------------------

@pytest.fixture
def tiny_setup(tmp_path):
    pre = CharCorruptionDataset(WIKI, 64)
    corpus = tmp_path / "train.tsv"
    corpus.write_text(TRAIN_TSV, encoding="utf-8")
    config = tiny_config(pre.vocab_size, 64)
    return pre, corpus, config


def assert_common_schedule(tconf, pre, block_size):
    assert tconf.lr_decay is True
    assert tconf.warmup_tokens == 512 * 20
    assert tconf.final_tokens == 200 * len(pre) * block_size
    assert tconf.num_workers == 4
    assert tuple(tconf.betas) == (0.9, 0.95)
    assert tconf.grad_norm_clip == 1.0
    assert tconf.weight_decay == 0.1
    assert tconf.ckpt_path is None


def test_pretrain_hyperparameters(tiny_setup):
    pre, _, config = tiny_setup
    model = initialize_vanilla_model(config)
    tconf, trainer = submission.pretrain(pre, 64, model)
    assert isinstance(tconf, TrainerConfig) and isinstance(trainer, Trainer)
    assert (tconf.max_epochs, tconf.batch_size, tconf.learning_rate) == (650, 128, 6e-3)
    assert_common_schedule(tconf, pre, 64)
    assert trainer.model is model and trainer.train_dataset is pre and trainer.config is tconf


def test_finetune_hyperparameters_without_pretraining(tiny_setup):
    pre, corpus, config = tiny_setup
    model = initialize_vanilla_model(config)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    tconf, trainer = submission.finetune(None, str(corpus), pre, 64, model)
    assert (tconf.max_epochs, tconf.batch_size, tconf.learning_rate) == (75, 256, 6e-4)
    assert_common_schedule(tconf, pre, 64)
    assert trainer.model is model and isinstance(trainer.train_dataset, NameDataset)
    assert len(trainer.train_dataset) == len(TRAIN_ROWS)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_finetune_hyperparameters_with_pretraining_loads_params(tiny_setup, tmp_path):
    pre, corpus, config = tiny_setup
    source = scramble(initialize_vanilla_model(config), std=0.1, seed=3)
    path = tmp_path / "pre.params"
    torch.save(source.state_dict(), path)
    model = initialize_vanilla_model(config)
    tconf, trainer = submission.finetune(str(path), str(corpus), pre, 64, model)
    assert (tconf.max_epochs, tconf.batch_size, tconf.learning_rate) == (10, 256, 6e-4)
    assert_common_schedule(tconf, pre, 64)
    assert isinstance(trainer.train_dataset, NameDataset) and trainer.model is model
    want = source.state_dict()
    assert all(torch.equal(want[k], v.cpu()) for k, v in model.state_dict().items())


# --- trainer: schedule and weight decay -----------------------------------------------------------------

def test_learning_rate_schedule():
    conf = TrainerConfig(lr_decay=True, warmup_tokens=100, final_tokens=1100)
    mult = lambda t: trainer_mod.lr_multiplier(t, conf)  # noqa: E731
    assert mult(0) == pytest.approx(0.0)
    assert mult(25) == pytest.approx(0.25)
    assert mult(50) == pytest.approx(0.5)
    assert mult(100) == pytest.approx(1.0)
    assert mult(350) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.25)))
    assert mult(600) == pytest.approx(0.5)
    assert mult(850) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.75)))
    assert mult(1000) == pytest.approx(0.1)  # the cosine is below the floor here
    assert mult(1100) == pytest.approx(0.1)
    warm = [mult(t) for t in range(0, 101, 5)]
    decay = [mult(t) for t in range(100, 1101, 10)]
    assert warm == sorted(warm) and decay == sorted(decay, reverse=True)
    assert min(decay) == pytest.approx(0.1)
    assert trainer_mod.lr_multiplier(50, TrainerConfig(lr_decay=False, warmup_tokens=100,
                                                       final_tokens=1100)) == 1.0
    # Past final_tokens the course's cosine climbs back to the full rate; "ours" stays at the floor.
    assert mult(1600) == pytest.approx(0.5) and mult(2100) == pytest.approx(1.0)
    ours = TrainerConfig(lr_decay=True, warmup_tokens=100, final_tokens=1100, recipe="ours")
    assert [trainer_mod.lr_multiplier(t, ours) for t in (1600, 2100)] == pytest.approx([0.1, 0.1])


@pytest.mark.parametrize("variant", ["vanilla", "synthesizer"])
def test_our_recipe_decays_matmul_weights_only(variant):
    model = build(variant, tiny_config())
    groups = trainer_mod.decay_groups(model, 0.1, "ours")
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for g in groups if g["weight_decay"] == 0.1 for p in g["params"]}
    plain = {names[id(p)] for g in groups if g["weight_decay"] == 0.0 for p in g["params"]}
    assert sum(len(g["params"]) for g in groups) == len(names), "every parameter exactly once"
    assert not decayed & plain
    want = {n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    want = {n + ".weight" for n in want}
    if variant == "synthesizer":
        want |= {f"blocks.{i}.attn.w2" for i in range(2)}
    assert decayed == want
    assert {"tok_emb.weight", "pos_emb", "ln_f.weight", "ln_f.bias", "blocks.0.ln1.weight",
            "blocks.0.attn.proj.bias", "blocks.1.mlp.0.bias"} <= plain


def test_trainer_uses_groups_schedule_and_counts_every_target(tiny_setup, monkeypatch):
    pre, corpus, config = tiny_setup
    made = []

    class SpyAdamW(torch.optim.AdamW):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(torch.optim, "AdamW", SpyAdamW)
    model = initialize_vanilla_model(config)
    tconf, trainer = submission.finetune(None, str(corpus), pre, 64, model)
    tconf.max_epochs, tconf.batch_size, tconf.num_workers = 2, 2, 0
    tconf.progress = False
    trainer.train()
    assert len(made) == 1
    opt = made[0]
    assert tuple(opt.defaults["betas"]) == (0.9, 0.95)
    assert sorted(g["weight_decay"] for g in opt.param_groups) == [0.0, 0.1]
    tokens = 2 * len(TRAIN_ROWS) * 63  # every target position, PAD included, as the course counts
    want_lr = 6e-4 * trainer_mod.lr_multiplier(tokens, tconf)
    assert want_lr == pytest.approx(6e-4 * tokens / (512 * 20))
    assert all(g["lr"] == pytest.approx(want_lr) for g in opt.param_groups)


# --- the model ----------------------------------------------------------------------------------

def course_model(variant):
    """The course's size; the Perceiver with the 2023-24 default m = 32."""
    return helper.INITIALIZE[variant](GPTConfig(256, 128, n_layer=4, n_head=8, n_embd=256))


def block_shapes(prefix, width, block, linears):
    shapes = {}
    for ln in ("ln1", "ln2"):
        shapes[f"{prefix}{ln}.weight"] = shapes[f"{prefix}{ln}.bias"] = (width,)
    shapes[prefix + "mlp.0.weight"], shapes[prefix + "mlp.0.bias"] = (4 * width, width), (4 * width,)
    shapes[prefix + "mlp.2.weight"], shapes[prefix + "mlp.2.bias"] = (width, 4 * width), (width,)
    shapes[prefix + "attn.mask"] = (1, 1, block, block)
    for name in linears:
        shapes[f"{prefix}attn.{name}.weight"], shapes[f"{prefix}attn.{name}.bias"] = (width, width), (width,)
    return shapes


def expected_shapes(variant, n_layer=4, vocab=256, block=128, width=256, heads=8, bottleneck=32):
    """The course's state_dict of each edition's model, written out from its handout."""
    shapes = {"tok_emb.weight": (vocab, width), "pos_emb": (1, block, width),
              "ln_f.weight": (width,), "ln_f.bias": (width,), "head.weight": (vocab, width)}
    dot = ("key", "query", "value", "proj")
    if variant == "perceiver":
        shapes.update(block_shapes("down_block.", width, block, dot), **block_shapes("up_block.", width, block, dot))
        shapes["down_block.C"] = (1, bottleneck, width)
        for i in range(n_layer - 2):
            shapes.update(block_shapes(f"blocks.{i}.", width, bottleneck, dot))
        return shapes
    if variant == "rope":
        del shapes["pos_emb"]
    for i in range(n_layer):
        b = f"blocks.{i}."
        shapes.update(block_shapes(b, width, block, ("w1", "value", "proj") if variant == "synthesizer" else dot))
        if variant == "synthesizer":
            shapes[b + "attn.w2"] = (width // heads, block - 1)
            shapes[b + "attn.b2"] = (block - 1,)
        if variant == "rope":
            shapes[b + "attn.rope_cache"] = (block, width // heads // 2, 2)
    return shapes


# vanilla: 256*256 + 128*256 + 4 * (2*512 + 4*(256*256+256) + 256*1024+1024 + 1024*256+256) + 512 + 256*256
# synthesizer replaces key/query (2 * 65,792) by w2 (32*127) and b2 (127) in each of 4 blocks
# rope: vanilla without pos_emb (128*256); perceiver: vanilla with C (32*256)
COURSE_PARAMS = {"vanilla": 3_323_392, "synthesizer": 3_076_988, "rope": 3_290_624, "perceiver": 3_331_584}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_course_model_state_dict_and_size(variant):
    model = course_model(variant)
    got = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert got == expected_shapes(variant)
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params == COURSE_PARAMS[variant]
    attn = SynthesizerAttention if variant == "synthesizer" else CausalSelfAttention
    assert all(isinstance(b.attn, attn) for b in model.blocks)
    mask = 32 if variant == "perceiver" else 128
    assert torch.equal(model.state_dict()["blocks.0.attn.mask"][0, 0], torch.ones(mask, mask).tril())
    assert model.config.variant == variant


@pytest.mark.parametrize("variant", ["rope", "perceiver"])
def test_course_shaped_state_dict_loads_strictly_both_ways(variant, tmp_path):
    """A state_dict with the course's names and shapes loads into ours, and ours into a course-shaped one."""
    g = torch.Generator().manual_seed(5)
    course = {k: torch.randn(shape, generator=g) for k, shape in expected_shapes(variant).items()}
    for k in course:
        if k.endswith("attn.mask"):
            n = course[k].shape[-1]
            course[k] = torch.ones(n, n).tril().view(1, 1, n, n)
        if k.endswith("rope_cache"):
            course[k] = precompute_rotary_emb(32, 128)
    ours = course_model(variant)
    ours.load_state_dict(course, strict=True)
    assert all(torch.equal(v, course[k]) for k, v in ours.state_dict().items())
    path = tmp_path / "ours.params"
    torch.save(ours.state_dict(), path)
    back = {k: torch.zeros(shape) for k, shape in expected_shapes(variant).items()}
    saved = torch.load(path, weights_only=True)
    assert set(saved) == set(back) and all(saved[k].shape == back[k].shape for k in back)
    fresh = course_model(variant)
    helper.load_params(fresh, str(path))
    idx = torch.randint(2, 256, (2, 40))
    torch.testing.assert_close(fresh.eval()(idx)[0], ours.eval()(idx)[0], rtol=0, atol=0)


@torch.no_grad()
def test_course_model_initialisation():
    torch.manual_seed(0)
    model = course_model("synthesizer")
    sd = dict(model.named_parameters())
    linear_w = torch.cat([m.weight.flatten() for m in model.modules() if isinstance(m, torch.nn.Linear)])
    assert 0.0195 < float(linear_w.std()) < 0.0205 and abs(float(linear_w.mean())) < 1e-3
    assert 0.0195 < float(sd["tok_emb.weight"].std()) < 0.0205
    for name, p in sd.items():
        if name.endswith(".bias") or name.endswith("attn.b2"):
            assert torch.count_nonzero(p) == 0, name
    for name in ("ln_f", "blocks.0.ln1", "blocks.3.ln2"):
        assert torch.equal(sd[name + ".weight"], torch.ones(256))
    assert torch.count_nonzero(sd["pos_emb"]) == 0
    for i in range(4):
        w2 = sd[f"blocks.{i}.attn.w2"]
        assert float(w2.abs().max()) <= 0.001
        assert 0.0005 < float(w2.std()) < 0.00065  # uniform on [-0.001, 0.001]: std 0.000577


@pytest.mark.parametrize("variant", list(VARIANTS))
@torch.no_grad()
def test_loss_is_cross_entropy_ignoring_pad(variant):
    model = scramble(build(variant, tiny_config()), std=0.3).eval()
    idx = torch.randint(2, 24, (2, 9))
    targets = torch.zeros(2, 9, dtype=torch.long)
    targets[1, 3] = 5
    logits, loss = model(idx, targets)
    assert logits.shape == (2, 9, 24)
    assert float(loss) == pytest.approx(float(-torch.log_softmax(logits[1, 3], -1)[5]), rel=1e-5)
    targets[0, 7] = 11
    _, loss = model(idx, targets)
    want = -(torch.log_softmax(logits[1, 3], -1)[5] + torch.log_softmax(logits[0, 7], -1)[11]) / 2
    assert float(loss) == pytest.approx(float(want), rel=1e-5)
    assert model(idx)[1] is None


# --- attention against the formulas ----------------------------------------------------------------

N_EMBD, N_HEAD, BLOCK = 16, 4, 10


def attention_config():
    return GPTConfig(30, BLOCK, n_layer=1, n_head=N_HEAD, n_embd=N_EMBD, attn_pdrop=0.0, resid_pdrop=0.0)


def causal_softmax(scores):
    T = scores.shape[-1]
    keep = torch.ones(T, T, dtype=torch.bool).tril()
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)


def synthesizer_reference(att, X):
    d = N_EMBD // N_HEAD
    T = X.shape[1]
    heads = []
    for i in range(N_HEAD):
        rows = slice(i * d, (i + 1) * d)
        A_i, b1 = att.w1.weight[rows].T, att.w1.bias[rows]
        B_i, b2 = att.w2[:, :T], att.b2[:T]
        V_i, bv = att.value.weight[rows].T, att.value.bias[rows]
        scores = torch.relu(X @ A_i + b1) @ B_i + b2
        heads.append(causal_softmax(scores) @ (X @ V_i + bv))
    return torch.cat(heads, -1) @ att.proj.weight.T + att.proj.bias


def vanilla_reference(att, X):
    d = N_EMBD // N_HEAD
    heads = []
    for i in range(N_HEAD):
        rows = slice(i * d, (i + 1) * d)
        q = X @ att.query.weight[rows].T + att.query.bias[rows]
        k = X @ att.key.weight[rows].T + att.key.bias[rows]
        v = X @ att.value.weight[rows].T + att.value.bias[rows]
        heads.append(causal_softmax(q @ k.transpose(-1, -2) / math.sqrt(d)) @ v)
    return torch.cat(heads, -1) @ att.proj.weight.T + att.proj.bias


@pytest.mark.parametrize("T", [1, 4, BLOCK - 1])
def test_synthesizer_attention_matches_formula(T):
    att = SynthesizerAttention(attention_config()).double()
    scramble(att, std=0.6, seed=T)
    att.eval()
    X = torch.randn(3, T, N_EMBD, dtype=torch.float64)
    got = att(X)
    want = synthesizer_reference(att, X)
    assert got.shape == (3, T, N_EMBD)
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)
    assert tuple(att.w2.shape) == (N_EMBD // N_HEAD, BLOCK - 1) and tuple(att.b2.shape) == (BLOCK - 1,)


@pytest.mark.parametrize("T", [1, 4, BLOCK])
def test_causal_self_attention_matches_formula(T):
    att = CausalSelfAttention(attention_config()).double()
    scramble(att, std=0.6, seed=T)
    att.eval()
    X = torch.randn(3, T, N_EMBD, dtype=torch.float64)
    torch.testing.assert_close(att(X), vanilla_reference(att, X), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_first_positions_ignore_the_future(variant):
    """Causality end to end: changing a later token never changes earlier logits."""
    model = scramble(build(variant, tiny_config()), std=0.3).eval()
    idx = torch.randint(2, 24, (2, 15))
    for cut in (1, 5, 8, 14):
        other = idx.clone()
        other[:, cut:] = (other[:, cut:] + 1 - 2) % 22 + 2
        a, _ = model(idx)
        b, _ = model(other)
        torch.testing.assert_close(a[:, :cut], b[:, :cut], rtol=0, atol=0)
        assert not torch.allclose(a[:, cut:], b[:, cut:])


# --- RoPE (2024-25) and the Perceiver (2023-24) against their definitions ----------------------------

def rope_angles(T, dim):
    """t * theta_i with theta_i = 10000^(-2i/dim), in float64 from Python's math."""
    return torch.tensor([[t * 10000.0 ** (-2 * i / dim) for i in range(dim // 2)] for t in range(T)],
                        dtype=torch.float64)


def rotate_by_complex(x, angles):
    """Pairs (x_2i, x_2i+1) as complex numbers, times e^(i angle), back to pairs."""
    z = torch.complex(x[..., 0::2], x[..., 1::2]) * torch.polar(torch.ones_like(angles), angles)
    out = torch.empty_like(x)
    out[..., 0::2], out[..., 1::2] = z.real, z.imag
    return out


def test_rotary_cache_and_rotation_match_the_definition():
    dim, P = 8, 20
    cache = precompute_rotary_emb(dim, P)
    assert tuple(cache.shape) == (P, dim // 2, 2) and cache.dtype == torch.float32
    angles = rope_angles(P, dim)
    torch.testing.assert_close(cache.double(), torch.stack([angles.cos(), angles.sin()], -1), rtol=0, atol=1e-6)
    exact = precompute_rotary_emb(dim, P, dtype=torch.float64)
    for T in (1, 7, P):  # the cache is cut to T
        x = torch.randn(3, 2, T, dim, dtype=torch.float64)
        torch.testing.assert_close(apply_rotary_emb(x, exact), rotate_by_complex(x, angles[:T]), rtol=1e-12, atol=1e-12)
    # a rotation: lengths of pairs kept; position 0 unchanged; the angle grows with t
    x = torch.randn(1, 1, P, dim, dtype=torch.float64)
    y = apply_rotary_emb(x, exact)
    torch.testing.assert_close(y.view(P, -1, 2).norm(dim=-1), x.view(P, -1, 2).norm(dim=-1))
    torch.testing.assert_close(y[..., 0, :], x[..., 0, :])
    assert (angles[1:, 0] > angles[:-1, 0]).all()


def test_rope_attention_matches_the_definition():
    """softmax((R_t q_t) . (R_s k_s) / sqrt(d/h), causal) v per head; values not rotated."""
    config = attention_config()
    config.rope = True
    att = scramble(CausalSelfAttention(config).double(), std=0.6, seed=2).eval()
    att.rope_cache = att.rope_cache.double()
    assert tuple(att.rope_cache.shape) == (BLOCK, N_EMBD // N_HEAD // 2, 2)
    assert "rope_cache" in att.state_dict()
    d = N_EMBD // N_HEAD
    for T in (1, 6, BLOCK):
        X = torch.randn(2, T, N_EMBD, dtype=torch.float64)
        angles = rope_angles(T, d)
        heads = []
        for i in range(N_HEAD):
            rows = slice(i * d, (i + 1) * d)
            q = rotate_by_complex(X @ att.query.weight[rows].T + att.query.bias[rows], angles)
            k = rotate_by_complex(X @ att.key.weight[rows].T + att.key.bias[rows], angles)
            v = X @ att.value.weight[rows].T + att.value.bias[rows]
            heads.append(causal_softmax(q @ k.transpose(-1, -2) / math.sqrt(d)) @ v)
        want = torch.cat(heads, -1) @ att.proj.weight.T + att.proj.bias
        # the cache holds float32 cos/sin, as the course's buffer
        torch.testing.assert_close(att(X), want, rtol=0, atol=1e-5)


def test_rope_model_has_no_position_embedding_and_needs_an_even_head_width():
    model = build("rope", tiny_config())
    assert model.pos_emb is None and "pos_emb" not in model.state_dict()
    assert all(b.attn.rope for b in model.blocks)
    with pytest.raises(ValueError, match="even"):
        initialize_rope_model(tiny_config(n_embd=18, n_head=6))


def layer_norm(x, ln):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + ln.eps) * ln.weight + ln.bias


def mlp_reference(x, mlp):
    h = x @ mlp[0].weight.T + mlp[0].bias
    h = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))  # exact GELU
    return h @ mlp[2].weight.T + mlp[2].bias


def cross_reference(att, x_kv, x_q):
    """Per head softmax(q k^T / sqrt(d/h) masked by tril(block)[:Tq, :Tk]) v, q from x_q, k and v from x_kv."""
    d = N_EMBD // N_HEAD
    Tq, Tk = x_q.shape[1], x_kv.shape[1]
    keep = torch.ones(BLOCK, BLOCK, dtype=torch.bool).tril()[:Tq, :Tk]
    heads = []
    for i in range(N_HEAD):
        rows = slice(i * d, (i + 1) * d)
        q = x_q @ att.query.weight[rows].T + att.query.bias[rows]
        k = x_kv @ att.key.weight[rows].T + att.key.bias[rows]
        v = x_kv @ att.value.weight[rows].T + att.value.bias[rows]
        scores = (q @ k.transpose(-1, -2) / math.sqrt(d)).masked_fill(~keep, float("-inf"))
        heads.append(torch.softmax(scores, -1) @ v)
    return torch.cat(heads, -1) @ att.proj.weight.T + att.proj.bias


@pytest.mark.parametrize("Tq, Tk, Bq, Bkv", [(4, 9, 1, 3), (9, 4, 3, 1), (BLOCK, BLOCK, 2, 2), (1, 1, 3, 3)])
def test_causal_cross_attention_matches_the_definition(Tq, Tk, Bq, Bkv):
    att = scramble(CausalCrossAttention(attention_config()).double(), std=0.6, seed=Tq).eval()
    assert {n for n, _ in att.named_parameters()} == {f"{m}.{w}" for m in ("key", "query", "value", "proj")
                                                      for w in ("weight", "bias")}
    assert torch.equal(att.mask[0, 0], torch.ones(BLOCK, BLOCK).tril())
    x_kv = torch.randn(Bkv, Tk, N_EMBD, dtype=torch.float64)
    x_q = torch.randn(Bq, Tq, N_EMBD, dtype=torch.float64)
    got = att(x_kv, x_q)
    assert got.shape == (max(Bq, Bkv), Tq, N_EMBD)
    torch.testing.assert_close(got, cross_reference(att, x_kv, x_q), rtol=1e-9, atol=1e-10)


def perceiver_config(m=5):
    config = attention_config()
    config.perceiver, config.bottleneck_dim = True, m
    return config


def test_down_project_block_matches_the_definition():
    """y = C + attn(x_kv=x, x_q=ln1(C)); y + mlp(ln2(y)); slot j reads positions 0..j."""
    torch.manual_seed(0)
    block = DownProjectBlock(perceiver_config()).double()
    C = block.C.detach().clone()
    assert tuple(C.shape) == (1, 5, N_EMBD)
    bound = math.sqrt(6 / (5 * N_EMBD + N_EMBD))  # xavier-uniform of a (1, m, n) tensor: fans m*n and n
    assert float(C.abs().max()) <= bound and float(C.abs().max()) > 0.8 * bound
    scramble(block, std=0.5, seed=4).eval()
    for T in (3, 5, BLOCK):
        x = torch.randn(2, T, N_EMBD, dtype=torch.float64)
        y = block.C + cross_reference(block.attn, x, layer_norm(block.C, block.ln1))
        want = y + mlp_reference(layer_norm(y, block.ln2), block.mlp)
        got = block(x)
        assert got.shape == (2, 5, N_EMBD)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)
    x = torch.randn(1, BLOCK, N_EMBD, dtype=torch.float64)
    later = x.clone()
    later[:, 3:] += 1.0
    torch.testing.assert_close(block(x)[:, :3], block(later)[:, :3], rtol=0, atol=0)


def test_up_project_block_matches_the_definition():
    """x = x_input + attn(x_kv=ln1(y), x_q=x_input); x + mlp(ln2(x))."""
    block = scramble(UpProjectBlock(perceiver_config()).double(), std=0.5, seed=6).eval()
    for T in (2, 5, BLOCK):
        y = torch.randn(2, 5, N_EMBD, dtype=torch.float64)
        x_input = torch.randn(2, T, N_EMBD, dtype=torch.float64)
        x = x_input + cross_reference(block.attn, layer_norm(y, block.ln1), x_input)
        want = x + mlp_reference(layer_norm(x, block.ln2), block.mlp)
        torch.testing.assert_close(block(y, x_input), want, rtol=1e-9, atol=1e-10)


@torch.no_grad()
def test_perceiver_bottleneck_misses_positions_from_m_on():
    """What the mask means: output i reads slots 0..i, slot j reads inputs 0..j; so from m on,
    an input position reaches only its own output, never a later one."""
    m = 6
    model = scramble(build("perceiver", tiny_config(), bottleneck_dim=m), std=0.3).eval()
    assert len(model.blocks) == 0 and model.down_block.C.shape[1] == m  # n_layer 2: down and up only
    deep = scramble(build("perceiver", tiny_config(n_layer=4), bottleneck_dim=m), std=0.3).eval()
    assert len(deep.blocks) == 2 and tuple(deep.blocks[0].attn.mask.shape) == (1, 1, m, m)
    idx = torch.randint(2, 24, (1, 14))
    other = idx.clone()
    other[0, m + 1] = 2 if idx[0, m + 1] != 2 else 3  # a different token at position m+1
    for net in (model, deep):
        a, b = net(idx)[0], net(other)[0]
        torch.testing.assert_close(a[:, :m + 1], b[:, :m + 1], rtol=0, atol=0)  # causal
        assert not torch.allclose(a[:, m + 1], b[:, m + 1])  # its own output sees it
        torch.testing.assert_close(a[:, m + 2:], b[:, m + 2:], rtol=0, atol=0)  # no later one does
        changed = idx.clone()
        changed[0, m - 1] = 2 if idx[0, m - 1] != 2 else 3
        assert not torch.allclose(net(changed)[0][:, -1], a[:, -1])  # inside the bottleneck: seen at the end


# --- checkpoints ------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("prefix", ["", "module."])
def test_checkpoint_round_trip(variant, prefix, tmp_path):
    torch.manual_seed(1)
    source = scramble(build(variant, tiny_config()), std=0.2, seed=9).eval()
    path = tmp_path / "m.params"
    torch.save({prefix + k: v for k, v in source.state_dict().items()}, path)
    torch.manual_seed(2)
    fresh = build(variant, tiny_config())
    assert helper.load_params(fresh, str(path)) is fresh
    fresh.eval()
    idx = torch.randint(2, 24, (2, 15))
    torch.testing.assert_close(fresh(idx)[0], source(idx)[0], rtol=0, atol=0)


def test_checkpoint_mismatches_are_named(tmp_path):
    synth = tmp_path / "s.params"
    torch.save(build("synthesizer", tiny_config()).state_dict(), synth)
    with pytest.raises(helper.ParamsError, match="synthesizer"):
        helper.load_params(build("vanilla", tiny_config()), str(synth))
    vanilla = tmp_path / "v.params"
    torch.save(build("vanilla", tiny_config()).state_dict(), vanilla)
    with pytest.raises(helper.ParamsError, match="vanilla"):
        helper.load_params(build("synthesizer", tiny_config()), str(vanilla))
    with pytest.raises(helper.ParamsError, match="vocabulary size"):
        helper.load_params(build("vanilla", tiny_config(vocab_size=30)), str(vanilla))
    state = build("vanilla", tiny_config()).state_dict()
    missing = tmp_path / "missing.params"
    torch.save({k: v for k, v in state.items() if k != "ln_f.bias"}, missing)
    with pytest.raises(helper.ParamsError):
        helper.load_params(build("vanilla", tiny_config()), str(missing))
    extra = tmp_path / "extra.params"
    torch.save({**state, "head.bias": torch.zeros(24)}, extra)
    with pytest.raises(helper.ParamsError):
        helper.load_params(build("vanilla", tiny_config()), str(extra))


# --- decoding -------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", list(VARIANTS))
def test_greedy_decode_equals_sample_one_prompt_at_a_time(variant):
    torch.manual_seed(4)
    model = decisive(build(variant, tiny_config(block_size=24)))
    limit = 23 if variant == "synthesizer" else 24
    assert model.max_positions() == limit
    rng = random.Random(0)
    prompts = [[rng.randrange(2, 24) for _ in range(n)] for n in (1, 2, 5, 9, 13, limit - 3, limit)]
    for steps in (1, 6, 30):
        got = decoding.greedy_decode(model, prompts, steps, batch_size=4)
        for prompt, out in zip(prompts, got):
            n = min(steps, limit - len(prompt) + 1)  # sample() starts cropping after that
            ref = utils.sample(model, torch.tensor([prompt]), n, sample=False)[0, len(prompt):].tolist()
            assert out == ref, (len(prompt), steps)
    all_tokens = {t for out in decoding.greedy_decode(model, prompts, 6) for t in out}
    assert len(all_tokens) > 4, "random weights should give varied completions"


def test_greedy_decode_stops_at_stop_id():
    torch.manual_seed(6)
    model = decisive(build("vanilla", tiny_config(block_size=32)))
    prompts = [[3, 4, 5], [7], [9, 10, 11, 12, 13, 14]]
    refs = [utils.sample(model, torch.tensor([p]), 12, sample=False)[0, len(p):].tolist() for p in prompts]
    stop = refs[0][3]
    got = decoding.greedy_decode(model, prompts, 12, stop_id=stop)
    for out, ref in zip(got, refs):
        k = ref.index(stop) + 1 if stop in ref else len(ref)
        assert out == ref[:k], "a row ends with its first stop_id"


# --- evaluation -----------------------------------------------------------------------------------

def test_evaluate_places(tmp_path, capsys):
    with_answers = tmp_path / "dev.tsv"
    with_answers.write_text("Where was A born?\tParis\nWhere was B born?\tRome\nWhere was C born?\tLima\n",
                            encoding="utf-8")
    assert evaluate_places(str(with_answers), ["Paris", "Roma", "Lima"]) == (3.0, 2.0)
    assert evaluate_places(str(with_answers), ["", "", ""]) == (3.0, 0.0)
    with pytest.raises(AssertionError):
        evaluate_places(str(with_answers), ["Paris"])
    questions = tmp_path / "test.tsv"
    questions.write_text("Where was A born?\nWhere was B born?\n", encoding="utf-8")
    capsys.readouterr()
    assert evaluate_places(str(questions), ["x", "y"]) == (0, 0)
    assert "No gold birth places provided" in capsys.readouterr().out


@pytest.mark.parametrize("flag, rate", [([], 0.1), (["--dropout", "0"], 0.0), (["--dropout", "0.25"], 0.25)])
def test_dropout_flag_sets_every_dropout(flag, rate):
    import run
    args = run.parse_args(["--function", "pretrain", "--variant", "synthesizer", "--pretrain_corpus_path", "w",
                           "--writing_params_path", "p", "--n_layer", "1", "--n_embd", "16", "--n_head", "2"] + flag)
    data = CharCorruptionDataset("Some text here.\nAnd more of it.", 16)
    model = run.build_model(args, data)
    rates = [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    assert len(rates) == 4 and set(rates) == {rate}  # embeddings; per block: attention weights, attention output, MLP output


def test_later_editions_learning_rates_and_writer(tiny_setup):
    pre, corpus, config = tiny_setup
    writer = object()
    tconf, _ = submission.pretrain(pre, 64, initialize_vanilla_model(config), pretrain_lr=1e-3, writer=writer)
    assert tconf.learning_rate == 1e-3 and tconf.tb_writer is writer
    tconf, _ = submission.finetune(None, str(corpus), pre, 64, initialize_vanilla_model(config), finetune_lr=2e-4)
    assert tconf.learning_rate == 2e-4 and tconf.tb_writer is None


@pytest.mark.parametrize("extra, rates", [([], (6e-3, 6e-4)), (["--pretrain_lr", "1e-3", "--finetune_lr", "1e-4"], (1e-3, 1e-4)),
                                          (["--pretrain_lr", "1e-3", "--learning_rate", "5e-5"], (5e-5, 5e-5))])
def test_run_py_learning_rate_flags(extra, rates, tiny_setup):
    import run
    pre, corpus, _ = tiny_setup
    got = []
    for function in ("pretrain", "finetune"):
        args = run.parse_args(["--function", function, "--variant", "rope", "--pretrain_corpus_path", "w",
                               "--finetune_corpus_path", str(corpus), "--writing_params_path", "p",
                               "--n_layer", "1", "--n_embd", "16", "--n_head", "2"] + extra)
        model = run.build_model(args, pre)
        if function == "pretrain":
            tconf, _ = submission.pretrain(pre, 64, model, pretrain_lr=args.pretrain_lr)
        else:
            tconf, _ = submission.finetune(None, str(corpus), pre, 64, model, finetune_lr=args.finetune_lr)
        run.configure(tconf, args, "p", [])
        got.append(tconf.learning_rate)
    assert tuple(got) == rates


@pytest.mark.parametrize("variant, flags, message", [
    ("rope", ["--n_embd", "18", "--n_head", "6"], "head width n_embd / n_head = 3 must be even"),
    ("perceiver", ["--bottleneck_dim", "200"], "bottleneck_dim must be in [1, block_size = 128], not 200"),
    ("perceiver", ["--n_layer", "1"], "the perceiver needs n_layer >= 2"),
    ("synthesiser", [], "invalid choice: 'synthesiser'"),
])
def test_run_py_refuses_a_config_the_variant_cannot_build(variant, flags, message, capsys):
    import run
    with pytest.raises(SystemExit) as e:
        run.parse_args(["--function", "pretrain", "--variant", variant, "--pretrain_corpus_path", "w",
                        "--writing_params_path", "p"] + flags)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_perceiver_bottleneck_flag_reaches_the_model():
    import run
    args = run.parse_args(["--function", "pretrain", "--variant", "perceiver", "--pretrain_corpus_path", "w",
                           "--writing_params_path", "p", "--n_layer", "3", "--n_embd", "16", "--n_head", "2",
                           "--bottleneck_dim", "7"])
    model = run.build_model(args, CharCorruptionDataset("Some text here.\nAnd more of it.", 16))
    assert tuple(model.down_block.C.shape) == (1, 7, 16) and tuple(model.blocks[0].attn.mask.shape) == (1, 1, 7, 7)


def test_params_of_another_edition_are_named(tmp_path):
    for written, loaded in (("rope", "vanilla"), ("perceiver", "rope"), ("vanilla", "perceiver")):
        path = tmp_path / f"{written}.params"
        torch.save(build(written, tiny_config()).state_dict(), path)
        with pytest.raises(helper.ParamsError, match=f"it is a {written} model, this run builds {loaded}"):
            helper.load_params(build(loaded, tiny_config()), str(path))


def test_readme_variant_table_agrees_with_the_registry():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").split("\n")
    head = lines.index(next(l for l in lines if l.startswith("| variant | editions | stages |")))
    rows = {}
    for line in lines[head + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells
    assert list(rows) == list(VARIANTS)
    pct = lambda x: "-" if x is None else f">= {100 * x:.1f}%"  # noqa: E731
    for name, v in VARIANTS.items():
        _, editions, stages, params, thresholds, expects = rows[name]
        assert editions == v.editions and stages == f"`{name}_*`"
        assert int(params.split()[0].replace(",", "")) == COURSE_PARAMS[name]
        assert thresholds == f"{pct(v.dev_threshold)} / {pct(v.test_threshold)}"
        assert (expects != "") == (v.expectation is not None)
        if v.expectation:
            assert expects in v.expectation
