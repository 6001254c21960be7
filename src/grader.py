#!/usr/bin/env python3
"""The assignment's tests, ids after the handouts' parts (1c .. 1g; 1h RoPE, 1i Perceiver).

    cd src && python grader.py             # every test
    python grader.py 1e-0-basic            # one test
    python grader.py 1f                    # every test of one part
    python grader.py --list                # ids, points and descriptions

basic tests check the specification on small inline data and tiny models (pytest runs
each of them too: tests/test_grader.py); hidden tests check the deliverables in
src/submission/ (params and predictions files), and are reported as SKIP, with the
./run.sh stage that makes the file, while it is absent. Data files are read from ../data,
or from $DATA_DIR when set (as run.sh does). The harness (runner, time limit, report) is
graderUtil.py.

Output: one line per test (PASS/FAIL/SKIP, points, description; details indented below),
then the points, then `N passed, N failed, N skipped` as the last line. The exit code is 1
when any test failed, 2 for an unknown test id, else 0.
"""

import contextlib
import io
import math
import os
import random
import sys
import tempfile

SRC = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(SRC)
SUB = os.path.join(SRC, "submission")
DATA = os.environ.get("DATA_DIR") or os.path.join(ROOT, "data")
sys.path.insert(0, SRC)

import torch  # noqa: E402

import submission  # noqa: E402
from graderUtil import Grader, Skip, check  # noqa: E402
from submission import decoding, helper, variants  # noqa: E402
from submission import trainer as trainer_mod  # noqa: E402

PAD = "\u25A1"
MASK = "\u2047"
COURSE = dict(n_layer=4, n_head=8, n_embd=256)
BLOCK = 128

grader = Grader(__doc__, time_limit_s=60)
test = grader.test

# --- shared pieces -------------------------------------------------------------------------------

WIKI = "\n".join([
    "Ada Lovelace was born in London and worked on the Analytical Engine.",
    "Alan Turing was born in London ; he studied at Cambridge.",
    "Grace Hopper was born in New York City, the daughter of Walter Murray.",
    "Emmy Noether was born in Erlangen, Bavaria, in 1882.",
    "Marie Sk\u0142odowska was born in Warsaw. Where was she born? Warsaw!",
])
ROWS = [("Where was Ada Lovelace born?", "London"),
        ("Where was Grace Hopper born?", "New York City"),
        ("Where was Emmy Noether born?", "Erlangen"),
        ("Where was Alan Turing born?", "London")]
ROWS_TSV = "".join(f"{q}\t{a}\n" for q, a in ROWS)


def tiny_config(vocab_size=24, block_size=16, n_layer=2, n_head=2, n_embd=16, **kw):
    return submission.GPTConfig(vocab_size, block_size, n_layer=n_layer, n_head=n_head, n_embd=n_embd, **kw)


def build(variant, config):
    """The variant's model by its course initialize function; an unknown name is an error.
    The Perceiver's bottleneck: the course's m = 32, at most half the block in tiny models."""
    options = {"bottleneck_dim": min(32, config.block_size // 2)} if variant == "perceiver" else {}
    return helper.build(variant, config, **options)


def scramble(module, std, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * std)
    return module


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def data_path(name):
    path = os.path.join(DATA, name)
    check(os.path.exists(path), f"{path} not found (the project's data; set DATA_DIR to use another folder)")
    return path


_cache = {}


def course_dataset():
    """The course's vocabulary and block size, from the project's data/wiki.txt."""
    if "ds" not in _cache:
        _cache["ds"] = submission.CharCorruptionDataset(read(data_path("wiki.txt")), BLOCK)
    return _cache["ds"]


def course_model(variant):
    ds = course_dataset()
    return build(variant, submission.GPTConfig(ds.vocab_size, BLOCK, **COURSE))


def decode_item(ds, x, y):
    n = ds.block_size - 1
    check(x.dtype == torch.long and y.dtype == torch.long, f"x, y must be LongTensors, got {x.dtype}, {y.dtype}")
    check(tuple(x.shape) == (n,) and tuple(y.shape) == (n,),
          f"x, y must have length block_size - 1 = {n}, got {tuple(x.shape)}, {tuple(y.shape)}")
    check(torch.equal(x[1:], y[:-1]), "y must be x shifted by one position")
    return "".join(ds.itos[int(i)] for i in x) + ds.itos[int(y[-1])]


def split_corrupted(s, block_size):
    check(len(s) == block_size, f"the corrupted string must be block_size long: {len(s)} != {block_size}")
    check(s.count(MASK) == 2, f"expected exactly two MASK characters: {s!r}")
    i = s.index(MASK)
    j = s.index(MASK, i + 1)
    prefix, suffix, rest = s[:i], s[i + 1:j], s[j + 1:]
    masked = rest.rstrip(PAD)
    check(PAD not in prefix + suffix + masked, f"PAD inside the content, or not only at the end: {s!r}")
    return prefix, masked, suffix


def draws(ds, idx, times):
    out = []
    for _ in range(times):
        x, y = ds[idx]
        out.append(split_corrupted(decode_item(ds, x, y), ds.block_size))
    return out


def random_docs(seed, n_docs, min_len, max_len):
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz ABCDEF.,;'-0123456789\u00e9\u00fc\u0142\u4e2d\u00df"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(min_len, max_len))) for _ in range(n_docs)]


def check_form(ds, docs, times):
    hi = int(ds.block_size * 7 / 8)
    for idx, doc in enumerate(docs):
        for prefix, masked, suffix in draws(ds, idx, times):
            whole = prefix + masked + suffix
            check(doc.startswith(whole), f"prefix + masked + suffix is not a prefix of document {idx}: "
                                         f"{prefix!r} + {masked!r} + {suffix!r}")
            check(4 <= len(whole) <= min(hi, len(doc)),
                  f"truncated length {len(whole)} outside [4, {min(hi, len(doc))}]")


def check_statistics(ds, idx, n_draws, lo, hi):
    items = draws(ds, idx, n_draws)
    lengths = {len(p + m + s) for p, m, s in items}
    missing = sorted(set(range(lo, hi + 1)) - lengths)
    check(not missing, f"truncation lengths never drawn in {n_draws} draws: {missing[:10]}")
    check(lengths <= set(range(lo, hi + 1)), f"truncation lengths outside [{lo}, {hi}]: {sorted(lengths)}")
    ratio = sum(len(m) / len(p + m + s) for p, m, s in items) / len(items)
    check(abs(ratio - 0.25) < 0.03, f"the masked span averages {ratio:.3f} of the truncated document, not 1/4")
    by_length = {}
    for p, m, s in items:
        by_length.setdefault(len(p + m + s), set()).add(len(m))
    varied = sum(1 for n, spans in by_length.items() if n >= 24 and len(spans) >= 3)
    check(varied >= min(5, len([n for n in by_length if n >= 24])), "the masked length is not random")
    return ratio


def expected_name_item(question, answer, block_size):
    full = question + MASK + answer + MASK
    full += PAD * (block_size - len(full))
    return full[:-1], PAD * (len(question) - 1) + full[len(question):]


def check_schedule(tconf, pre, block_size, epochs, batch, lr):
    got = (tconf.max_epochs, tconf.batch_size, tconf.learning_rate)
    check(got == (epochs, batch, lr), f"(max_epochs, batch_size, learning_rate) = {got}, expected {(epochs, batch, lr)}")
    want = dict(lr_decay=True, warmup_tokens=512 * 20, final_tokens=200 * len(pre) * block_size,
                num_workers=4, betas=(0.9, 0.95), grad_norm_clip=1.0, weight_decay=0.1, ckpt_path=None)
    for name, value in want.items():
        actual = getattr(tconf, name, "<missing>")
        if name == "betas" and actual != "<missing>":
            actual = tuple(actual)
        check(actual == value, f"TrainerConfig.{name} = {actual!r}, expected {value!r}")


def tiny_finetune_setup(tmp):
    pre = submission.CharCorruptionDataset(WIKI, 64)
    corpus = os.path.join(tmp, "train.tsv")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write(ROWS_TSV)
    return pre, corpus, tiny_config(pre.vocab_size, 64)


def causal_softmax(scores):
    T = scores.shape[-1]
    keep = torch.ones(T, T, dtype=torch.bool).tril()
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)


def attention_reference(att, X, n_head, variant):
    C = X.shape[-1]
    d, T = C // n_head, X.shape[1]
    heads = []
    for i in range(n_head):
        rows = slice(i * d, (i + 1) * d)
        v = X @ att.value.weight[rows].T + att.value.bias[rows]
        if variant == "vanilla":
            q = X @ att.query.weight[rows].T + att.query.bias[rows]
            k = X @ att.key.weight[rows].T + att.key.bias[rows]
            scores = q @ k.transpose(-1, -2) / math.sqrt(d)
        else:
            hidden = torch.relu(X @ att.w1.weight[rows].T + att.w1.bias[rows])
            scores = hidden @ att.w2[:, :T] + att.b2[:T]
        heads.append(causal_softmax(scores) @ v)
    return torch.cat(heads, -1) @ att.proj.weight.T + att.proj.bias


@torch.no_grad()
def check_attention(variant, lengths):
    n_embd, n_head, block = 16, 4, 10
    config = submission.GPTConfig(30, block, n_layer=1, n_head=n_head, n_embd=n_embd,
                                  attn_pdrop=0.0, resid_pdrop=0.0)
    cls = submission.CausalSelfAttention if variant == "vanilla" else submission.SynthesizerAttention
    for T in lengths:
        att = scramble(cls(config).double(), 0.6, T).eval()
        X = torch.randn(2, T, n_embd, dtype=torch.float64)
        got, want = att(X), attention_reference(att, X, n_head, variant)
        check(got.shape == want.shape, f"{variant} attention output {tuple(got.shape)}, expected {tuple(want.shape)}")
        err = float((got - want).abs().max())
        check(err < 1e-9, f"{variant} attention differs from the formula by {err:.2e} at T={T}")


def block_shapes(prefix, width, block, linears):
    """A transformer block's state_dict shapes: two layer norms, the MLP, the mask, the attention's linears."""
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
    """The course's state_dict of each edition's model, written out from its handout
    (the Perceiver with the 2023-24 default m = 32)."""
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
            shapes[b + "attn.w2"], shapes[b + "attn.b2"] = (width // heads, block - 1), (block - 1,)
        if variant == "rope":
            shapes[b + "attn.rope_cache"] = (block, width // heads // 2, 2)
    return shapes


# vanilla: 256*256 + 128*256 + 4 * (2*512 + 4*(256*256+256) + 256*1024+1024 + 1024*256+256) + 512 + 256*256
# synthesizer replaces key/query (2 * 65,792) by w2 (32*127) and b2 (127) in each of 4 blocks
# rope: vanilla without pos_emb (128*256); perceiver: vanilla with C (32*256)
COURSE_PARAMS = {"vanilla": 3_323_392, "synthesizer": 3_076_988, "rope": 3_290_624, "perceiver": 3_331_584}


def check_course_model(variant):
    """The course-size model on the course's 256 ids: exactly the handout's state_dict, its
    parameter count, causal masks; returned for further checks."""
    model = build(variant, submission.GPTConfig(256, 128, **COURSE))
    check(model.config.variant == variant, f"the {variant} model says it is a {model.config.variant} model")
    got = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    want = expected_shapes(variant)
    check(set(got) == set(want), f"{variant} state_dict keys differ from the course's: missing "
                                 f"{sorted(set(want) - set(got))[:4]}, unexpected {sorted(set(got) - set(want))[:4]}")
    bad = [k for k in want if got[k] != want[k]]
    check(not bad, f"{variant}: shapes differ from the course's: {[(k, got[k], want[k]) for k in bad[:3]]}")
    n = sum(p.numel() for p in model.parameters())
    check(n == COURSE_PARAMS[variant], f"the course's {variant} model has {COURSE_PARAMS[variant]:,} parameters, "
                                       f"this one {n:,}")
    for key, mask in model.state_dict().items():
        if key.endswith("attn.mask"):
            n = mask.shape[-1]
            check(torch.equal(mask[0, 0], torch.ones(n, n).tril()), f"{variant}: {key} is not the causal tril")
    return model


def check_loss(variant):
    """Cross-entropy averaged over the targets that are not PAD (id 0); no targets, no loss."""
    model = scramble(build(variant, tiny_config()), 0.3, 1).eval()
    idx = torch.randint(2, 24, (2, 9))
    targets = torch.zeros(2, 9, dtype=torch.long)
    targets[1, 3] = 5
    with torch.no_grad():
        logits, loss = model(idx, targets)
        check(tuple(logits.shape) == (2, 9, 24), f"{variant}: logits {tuple(logits.shape)}, expected (2, 9, 24)")
        want = -float(torch.log_softmax(logits[1, 3], -1)[5])
        check(abs(float(loss) - want) <= 1e-5 * abs(want), f"{variant}: loss {float(loss)} with one non-PAD "
                                                             f"target, expected {want}")
        targets[0, 7] = 11
        want = -float(torch.log_softmax(logits[1, 3], -1)[5] + torch.log_softmax(logits[0, 7], -1)[11]) / 2
        loss = float(model(idx, targets)[1])
        check(abs(loss - want) <= 1e-5 * abs(want), f"{variant}: loss {loss} with two non-PAD targets, "
                                                     f"expected their mean {want}")
        check(model(idx)[1] is None, f"{variant}: a forward pass without targets must return loss None")


def decisive(model):
    """Default initialisation with a sharpened head: next tokens depend on the context, and
    argmax decoding has no near-ties that two correct decoders could break differently."""
    with torch.no_grad():
        model.head.weight.mul_(20.0)
        if model.pos_emb is not None:
            model.pos_emb.normal_(0.0, 0.02)  # positions must matter (their initialisation is zero)
    return model.eval()


def check_decoding(variant):
    torch.manual_seed(3)
    model = decisive(build(variant, tiny_config(block_size=24)))
    limit = model.max_positions()
    check(limit == (23 if variant == "synthesizer" else 24), f"{variant}: max_positions() is {limit}")
    rng = random.Random(1)
    prompts = [[rng.randrange(2, 24) for _ in range(n)] for n in (1, 3, 6, 11, limit - 2, limit)]
    for steps in (1, 7, 30):
        got = decoding.greedy_decode(model, prompts, steps, batch_size=4)
        for prompt, out in zip(prompts, got):
            n = min(steps, limit - len(prompt) + 1)
            ref = submission.sample(model, torch.tensor([prompt]), n, sample=False)[0, len(prompt):].tolist()
            check(out == ref, f"{variant}: batched greedy decoding of a {len(prompt)}-token prompt, {steps} steps, "
                              f"differs from sample(..., sample=False): {out} vs {ref}")
    tokens = {t for out in decoding.greedy_decode(model, prompts, 6) for t in out}
    check(len(tokens) > 4, f"{variant}: every prompt decodes to a few tokens ({sorted(tokens)}): "
                           "the comparison above says little")


def check_round_trip(variant, tmp):
    source = scramble(build(variant, tiny_config()), 0.2, 9).eval()
    idx = torch.randint(2, 24, (2, 15))
    for prefix in ("", "module."):
        path = os.path.join(tmp, f"{variant}{prefix}params")
        torch.save({prefix + k: v for k, v in source.state_dict().items()}, path)
        fresh = build(variant, tiny_config())
        check(helper.load_params(fresh, path) is fresh, "load_params must return the model it loaded into")
        fresh.eval()
        check(torch.equal(fresh(idx)[0], source(idx)[0]),
              f"{variant}: a saved and reloaded model ({prefix or 'no'} prefix) gives different outputs")


# --- deliverables --------------------------------------------------------------------------------

def deliverable(name, stage):
    path = os.path.join(SUB, name)
    if not os.path.exists(path):
        raise Skip(f"src/submission/{name} not found: run ./run.sh {stage}")
    return path


def load_params_file(name, stage, variant):
    """The file's state_dict, after checking it loads strictly into the course model."""
    path = deliverable(name, stage)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"{name} is not a readable params file (torch.load: {type(e).__name__}; "
                             "truncated, or not written by torch.save(model.state_dict())?)")
    check(isinstance(state, dict) and all(isinstance(v, torch.Tensor) for v in state.values()),
          f"{name} is not a state_dict")
    model = course_model(variant)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError:
        raise AssertionError(f"{name} does not load strictly into the course {variant} model (vocabulary of "
                             f"data/wiki.txt, 4 layers, 8 heads, width 256, block {BLOCK}): "
                             + describe_mismatch(model.state_dict(), state))
    check(all(bool(torch.isfinite(v).all()) for v in state.values() if v.is_floating_point()),
          f"{name} holds non-finite values")
    if "pos_emb" in state:
        check(bool(state["pos_emb"].abs().sum() > 0), f"{name} looks untrained: pos_emb is still all zeros")
    else:  # rope: no position embeddings; layer norms start at weight 1
        check(not bool((state["ln_f.weight"] == 1).all()), f"{name} looks untrained: ln_f.weight is still all ones")
    return state, model


def describe_mismatch(want, got):
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    sizes = [k for k in want if k in got and tuple(want[k].shape) != tuple(got[k].shape)]
    parts = []
    if got and all(k.startswith("module.") for k in got):
        parts.append("every key starts with 'module.' (saved from a DataParallel wrapper)")
    if variants.recognise(got) is not variants.recognise(want):
        parts.append(f"it is a {variants.recognise(got).name} model")
    if missing:
        parts.append(f"{len(missing)} missing keys, e.g. {missing[:3]}")
    if extra:
        parts.append(f"{len(extra)} unexpected keys, e.g. {extra[:3]}")
    if sizes:
        parts.append("shapes differ: " + ", ".join(f"{k} {tuple(got[k].shape)} vs {tuple(want[k].shape)}"
                                                 for k in sizes[:3]))
    return "; ".join(parts)


def eval_rows(name):
    rows = [line.split("\t") for line in read(data_path(name)).split("\n") if line.strip()]
    return [(r[0], r[1] if len(r) > 1 else None) for r in rows]


def read_predictions(name, stage, eval_name):
    path = deliverable(name, stage)
    try:
        text = read(path)
    except UnicodeDecodeError as e:
        raise AssertionError(f"{name} is not UTF-8 text (byte {e.start})")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    rows = eval_rows(eval_name)
    check(len(lines) == len(rows), f"{name} has {len(lines)} lines; data/{eval_name} has {len(rows)} questions")
    return lines, rows


def london_baseline():
    train = [r[1] for r in eval_rows("birth_places_train.tsv")]
    place = max(sorted(set(train)), key=train.count)
    dev = [a for _, a in eval_rows("birth_dev.tsv")]
    return place, sum(a == place for a in dev) / len(dev)


def check_dev_predictions(name, stage, threshold, expectation=None):
    lines, rows = read_predictions(name, stage, "birth_dev.tsv")
    correct = sum(p == a for p, (_, a) in zip(lines, rows))
    accuracy = correct / len(rows)
    place, baseline = london_baseline()
    info = (f"dev accuracy {100 * accuracy:.1f}% ({correct}/{len(rows)}); always answering {place!r}: "
            f"{100 * baseline:.1f}%")
    if threshold is not None:
        check(accuracy >= threshold, f"{info}; needs at least {100 * threshold:.1f}%")
        info += f"; threshold {100 * threshold:.1f}%"
    if expectation:
        info += f"; expected by {expectation}"
    return info


def check_test_predictions(name, stage, threshold=None):
    """One prediction per test question; with data/birth_test.tsv (our world's answers), the accuracy."""
    lines, rows = read_predictions(name, stage, "birth_test_inputs.tsv")
    info = f"{len(lines)} predictions for {len(rows)} test questions"
    answers_path = os.path.join(DATA, "birth_test.tsv")
    if threshold is None or not os.path.exists(answers_path):
        return info
    answered = eval_rows("birth_test.tsv")
    check([q for q, _ in answered] == [q for q, _ in rows], "data/birth_test.tsv does not hold the test questions")
    accuracy = sum(p == a for p, (_, a) in zip(lines, answered)) / len(rows)
    info += f"; test accuracy {100 * accuracy:.1f}%"
    check(accuracy >= threshold, f"{info}; needs at least {100 * threshold:.1f}%")
    return info + f"; threshold {100 * threshold:.1f}%"


def check_reproduces(variant, params, params_stage, preds, preds_stage, n=50):
    """The dev predictions are what the finetuned params answer (greedy, fp32, first n questions)."""
    deliverable(params, params_stage)
    lines, rows = read_predictions(preds, preds_stage, "birth_dev.tsv")
    _, model = load_params_file(params, params_stage, variant)
    model.eval()
    ds = course_dataset()
    mask_id = ds.stoi[MASK]
    prompts = [[ds.stoi[c] for c in q if c in ds.stoi] + [mask_id] for q, _ in rows[:n]]
    completions = decoding.greedy_decode(model, prompts, 32, stop_id=mask_id)
    answers = ["".join(ds.itos[i] for i in c).split(MASK)[0] for c in completions]
    agree = sum(a == p for a, p in zip(answers, lines))
    check(agree >= 0.8 * len(prompts), f"only {agree} of the first {len(prompts)} predictions in {preds} are what "
                                       f"{params} answers: stale predictions, or params from another run?")
    return f"{agree}/{len(prompts)} of the first dev predictions reproduced from {params}"


# --- 1c: finetuning setup (4 points) ---------------------------------------------------------------

@test("1c-0-basic", 1, "vanilla model: CausalSelfAttention = softmax(QK^T/sqrt(d/h))V, course size and names")
def _():
    check_attention("vanilla", (1, 5, 10))
    model = check_course_model("vanilla")
    check(isinstance(model, submission.GPT), "initialize_vanilla_model must return a GPT")
    check(all(isinstance(b.attn, submission.CausalSelfAttention) for b in model.blocks),
          "the vanilla model must use CausalSelfAttention in every block")
    check_loss("vanilla")


@test("1c-1-basic", 1, "finetune() without pretraining: course hyperparameters, NameDataset, untouched model")
def _():
    with tempfile.TemporaryDirectory() as tmp:
        pre, corpus, config = tiny_finetune_setup(tmp)
        model = submission.initialize_vanilla_model(config)
        before = {k: v.clone() for k, v in model.state_dict().items()}
        tconf, trainer = submission.finetune(None, corpus, pre, 64, model)
        check_schedule(tconf, pre, 64, 75, 256, 6e-4)
        check(isinstance(trainer, submission.Trainer) and trainer.model is model, "finetune must return a Trainer of the model")
        check(isinstance(trainer.train_dataset, submission.NameDataset) and len(trainer.train_dataset) == len(ROWS),
              "the Trainer must train on a NameDataset of the finetuning corpus")
        check(all(torch.equal(before[k], v.cpu()) for k, v in model.state_dict().items()),
              "without reading_params_path the model must keep its initialisation")


@test("1c-2-basic", 1, "NameDataset: question MASK answer MASK PAD..., PAD targets over the question")
def _():
    pre = submission.CharCorruptionDataset(WIKI, 64)
    for tsv in (ROWS_TSV, ROWS_TSV.rstrip("\n")):
        ds = submission.NameDataset(pre, tsv)
        check(len(ds) == len(ROWS), f"{len(ROWS)} rows give {len(ds)} items (trailing newline: {tsv.endswith(chr(10))})")
        check(ds.stoi == pre.stoi and ds.itos == pre.itos, "NameDataset must use the pretraining vocabulary")
        for (q, a), (x, y) in zip(ROWS, ds):
            check(x.dtype == torch.long and y.dtype == torch.long, f"x, y must be LongTensors, got {x.dtype}, {y.dtype}")
            want_x, want_y = expected_name_item(q, a, 64)
            got_x = "".join(pre.itos[int(i)] for i in x)
            got_y = "".join(pre.itos[int(i)] for i in y)
            check(got_x == want_x, f"x for {q!r}: {got_x!r}, expected {want_x!r}")
            check(got_y == want_y, f"y for {q!r}: {got_y!r}, expected {want_y!r}")


@test("1c-0-hidden", 1, "vanilla.model.params loads into the course vanilla model")
def _():
    load_params_file("vanilla.model.params", "vanilla_finetune_without_pretrain", "vanilla")


# --- 1d: predictions without pretraining (6 points) ----------------------------------------------------

@test("1d-0-basic", 1, "evaluate_places: (total, correct), and (0, 0) for a questions-only file")
def _():
    with tempfile.TemporaryDirectory() as tmp:
        dev = os.path.join(tmp, "dev.tsv")
        with open(dev, "w", encoding="utf-8") as f:
            f.write("Where was A born?\tParis\nWhere was B born?\tRome\nWhere was C born?\tLima\n")
        got = submission.evaluate_places(dev, ["Paris", "Roma", "Lima"])
        check(tuple(got) == (3.0, 2.0), f"evaluate_places gave {got}, expected (3.0, 2.0)")
        got = submission.evaluate_places(dev, ["", "", ""])
        check(tuple(got) == (3.0, 0.0), f"three empty predictions gave {got}, expected (3.0, 0.0)")
        try:
            submission.evaluate_places(dev, ["Paris"])
        except AssertionError:
            pass
        else:
            raise AssertionError("one prediction for three questions must fail the course's length assertion")
        test_file = os.path.join(tmp, "test.tsv")
        with open(test_file, "w", encoding="utf-8") as f:
            f.write("Where was A born?\nWhere was B born?\n")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            got = submission.evaluate_places(test_file, ["x", "y"])
        check(tuple(got) == (0, 0), f"a questions-only file gave {got}, expected (0, 0)")
        check("No gold birth places provided" in printed.getvalue(),
              f"a questions-only file must say 'No gold birth places provided', printed {printed.getvalue()!r}")


@test("1d-1-basic", 1, "batched greedy decoding equals sample(..., sample=False), both variants")
def _():
    check_decoding("vanilla")
    check_decoding("synthesizer")


@test("1d-0-hidden", 2, "vanilla.nopretrain.dev.predictions: one per dev question (accuracy reported)")
def _():
    return check_dev_predictions("vanilla.nopretrain.dev.predictions", "vanilla_eval_dev_without_pretrain", None)


@test("1d-1-hidden", 2, "vanilla.nopretrain.test.predictions: one per test question")
def _():
    return check_test_predictions("vanilla.nopretrain.test.predictions", "vanilla_eval_test_without_pretrain")


# --- 1e: span corruption (20 points) --------------------------------------------------------------

@test("1e-0-basic", 2, "vocabulary: PAD = 0, MASK = 1, then the sorted characters (newline included)")
def _():
    text = "zebra\nApple pie\n\u00e9t\u00e9 42!"
    ds = submission.CharCorruptionDataset(text, 16)
    chars = sorted(set(text))
    check(ds.PAD_CHAR == PAD and ds.MASK_CHAR == MASK, "PAD_CHAR must be U+25A1 and MASK_CHAR U+2047")
    check(ds.stoi[PAD] == 0 and ds.stoi[MASK] == 1, f"PAD and MASK have ids {ds.stoi[PAD]}, {ds.stoi[MASK]}, not 0, 1")
    got = [ds.itos[i] for i in range(len(ds.itos))]
    check(got == [PAD, MASK] + chars, f"itos is {got!r}, expected {[PAD, MASK] + chars!r}")
    check(all(ds.stoi[c] == i for i, c in ds.itos.items()), "stoi must invert itos")
    check(ds.vocab_size == len(chars) + 2 and ds.block_size == 16, "vocab_size / block_size are wrong")


@test("1e-1-basic", 3, "items: x, y shifted by one; prefix MASK suffix MASK masked PAD...; a prefix of the document")
def _():
    docs = random_docs(7, 30, 4, 300)
    for block_size in (16, 32, 128):
        ds = submission.CharCorruptionDataset("\n".join(docs), block_size)
        check(len(ds) == len(docs), f"{len(docs)} documents give {len(ds)} items")
        check_form(ds, docs, 20)


@test("1e-2-basic", 3, "truncation: every length in [4, int(block_size*7/8)] is drawn, none outside")
def _():
    doc = "".join(random.Random(3).choice("abcdefgh ") for _ in range(400))
    for block_size, n in ((32, 2500), (64, 3500), (128, 8000)):
        ds = submission.CharCorruptionDataset(doc, block_size)
        items = draws(ds, 0, n)
        lengths = {len(p + m + s) for p, m, s in items}
        want = set(range(4, int(block_size * 7 / 8) + 1))
        check(lengths == want, f"block {block_size}: lengths drawn {min(lengths)}..{max(lengths)}, "
                               f"missing {sorted(want - lengths)[:8]}, outside {sorted(lengths - want)[:8]}")
    ds = submission.CharCorruptionDataset("abcdefghij", 16)
    lengths = {len(p + m + s) for p, m, s in draws(ds, 0, 600)}
    check(lengths == set(range(4, 11)), f"a 10-character document: lengths {sorted(lengths)}, expected 4..10")


@test("1e-3-basic", 3, "masked span: random length averaging 1/4 of the truncated document, random place")
def _():
    doc = "".join(random.Random(5).choice("abcdefgh ") for _ in range(400))
    ds = submission.CharCorruptionDataset(doc, 128)
    items = draws(ds, 0, 5000)
    ratio = sum(len(m) / len(p + m + s) for p, m, s in items) / len(items)
    check(abs(ratio - 0.25) < 0.03, f"the masked span averages {ratio:.3f} of the truncated document")
    share = sum(len(m) for _, m, _ in items) / sum(len(p + m + s) for p, m, s in items)
    check(abs(share - 0.25) < 0.03, f"the masked spans hold {share:.3f} of all truncated characters, not 1/4")
    spans, starts = {}, {}
    for p, m, s in items:
        spans.setdefault(len(p + m + s), set()).add(len(m))
        starts.setdefault(len(p + m + s), set()).add(len(p))
    check(sum(len(v) >= 3 for n, v in spans.items() if n >= 40) > 10, "the masked length must be random")
    check(sum(len(v) >= 3 for n, v in starts.items() if n >= 40) > 10, "the masked span must start at random places")
    return f"masked / truncated = {ratio:.3f}"


@test("1e-4-basic", 1, "every line is a document, as the course counts them; short and empty ones are used whole")
def _():
    for text in ("ab\n\nabcd\nabc\n\nhello world, a longer one\nx\n", "ab\n\nabcd\nabc\n\nhello world, a longer one\nx"):
        docs = text.split("\n")
        ds = submission.CharCorruptionDataset(text, 16)
        check(len(ds) == len(docs), f"{len(docs)} lines (an empty last one included), but len(dataset) = {len(ds)}")
        for idx, doc in enumerate(docs):
            wholes = set()
            for p, m, s in draws(ds, idx, 50):
                whole = p + m + s
                check(doc.startswith(whole), f"{whole!r} is not a prefix of document {idx}, {doc!r}")
                check(len(whole) >= min(4, len(doc)), f"{whole!r}: document {idx} cut below 4 characters")
                wholes.add(whole)
            # used whole: an empty one is `MASK MASK PAD...`
            check(len(doc) > 4 or wholes == {doc}, f"document {idx}, {doc!r}, of at most 4 characters must be "
                                                   f"used whole, drew {sorted(wholes)}")


@test("1e-0-hidden", 4, "span corruption on data/wiki.txt: the form of every item, block 128")
def _():
    text = read(data_path("wiki.txt"))
    docs = text.split("\n")
    ds = submission.CharCorruptionDataset(text, BLOCK)
    check(ds.vocab_size == len(set(text)) + 2, "vocabulary size must be the distinct characters + 2")
    check(len(ds) == len(docs), f"{len(docs)} documents, len(dataset) = {len(ds)}")
    idxs = random.Random(0).sample(range(len(docs)), min(400, len(docs)))
    hi = int(BLOCK * 7 / 8)
    for idx in idxs:
        for p, m, s in draws(ds, idx, 3):
            whole = p + m + s
            check(docs[idx].startswith(whole), f"item {idx} is not cut from document {idx}")
            check(4 <= len(whole) <= min(hi, len(docs[idx])), f"item {idx}: truncated length {len(whole)}")


@test("1e-1-hidden", 4, "span corruption statistics on data/wiki.txt and on unicode documents")
def _():
    text = read(data_path("wiki.txt"))
    docs = text.split("\n")
    ds = submission.CharCorruptionDataset(text, BLOCK)
    long_idx = max(range(len(docs)), key=lambda i: len(docs[i]))
    check(len(docs[long_idx]) >= 112, "data/wiki.txt needs a document of at least 112 characters")
    ratio = check_statistics(ds, long_idx, 7000, 4, 112)
    udocs = random_docs(11, 3, 150, 200)
    uds = submission.CharCorruptionDataset("\n".join(udocs), 48)
    check_form(uds, udocs, 30)
    uratio = check_statistics(uds, 1, 2500, 4, 42)
    return f"masked / truncated = {ratio:.3f} (wiki), {uratio:.3f} (unicode, block 48)"


# --- 1f: pretraining (20 points) ------------------------------------------------------------------

@test("1f-0-basic", 2, "pretrain(): course hyperparameters, a Trainer on the corruption dataset")
def _():
    pre = submission.CharCorruptionDataset(WIKI, 64)
    model = submission.initialize_vanilla_model(tiny_config(pre.vocab_size, 64))
    tconf, trainer = submission.pretrain(pre, 64, model)
    check(isinstance(tconf, submission.TrainerConfig) and isinstance(trainer, submission.Trainer),
          "pretrain must return (TrainerConfig, Trainer)")
    check_schedule(tconf, pre, 64, 650, 128, 6e-3)
    check(trainer.model is model and trainer.train_dataset is pre, "pretrain must train the model on the dataset")
    check(trainer.config is tconf, "the Trainer must train with the TrainerConfig pretrain returns")


@test("1f-1-basic", 2, "finetune() with pretrained params: loads them, 10 epochs")
def _():
    with tempfile.TemporaryDirectory() as tmp:
        pre, corpus, config = tiny_finetune_setup(tmp)
        source = scramble(submission.initialize_vanilla_model(config), 0.1, 3)
        path = os.path.join(tmp, "pre.params")
        torch.save(source.state_dict(), path)
        model = submission.initialize_vanilla_model(config)
        tconf, trainer = submission.finetune(path, corpus, pre, 64, model)
        check_schedule(tconf, pre, 64, 10, 256, 6e-4)
        want = source.state_dict()
        check(all(torch.equal(want[k], v.cpu()) for k, v in model.state_dict().items()),
              "finetune must load reading_params_path into the model")
        check(isinstance(trainer.train_dataset, submission.NameDataset), "finetuning trains on a NameDataset")
        check(trainer.model is model, "finetune must return a Trainer of the model")


@test("1f-2-basic", 2, "learning rate: warmup, then the course's unclamped cosine; weight decay on all but biases")
def _():
    conf = submission.TrainerConfig(lr_decay=True, warmup_tokens=100, final_tokens=1100)
    cases = {0: 0.0, 50: 0.5, 100: 1.0, 350: 0.5 * (1 + math.cos(math.pi / 4)), 600: 0.5,
             850: 0.5 * (1 + math.cos(3 * math.pi / 4)), 1000: 0.1, 1100: 0.1,
             1600: 0.5, 2100: 1.0}  # past final_tokens the course's cosine climbs back
    cases[25] = 0.25
    for tokens, want in cases.items():
        got = trainer_mod.lr_multiplier(tokens, conf)
        check(abs(got - want) < 1e-9, f"lr multiplier at {tokens} tokens: {got}, expected {want}")
    warm = [trainer_mod.lr_multiplier(t, conf) for t in range(0, 101, 5)]
    decay = [trainer_mod.lr_multiplier(t, conf) for t in range(100, 1101, 10)]
    check(warm == sorted(warm), "the learning rate must rise during warmup")
    check(decay == sorted(decay, reverse=True) and abs(min(decay) - 0.1) < 1e-9,
          "from warmup to final_tokens the learning rate must fall to its 10% floor")
    flat = submission.TrainerConfig(lr_decay=False, warmup_tokens=100, final_tokens=1100)
    check(trainer_mod.lr_multiplier(50, flat) == 1.0, "with lr_decay=False the rate must stay at its base")
    for variant in ("vanilla", "synthesizer"):
        model = build(variant, tiny_config())
        names = {id(p): n for n, p in model.named_parameters()}
        groups = trainer_mod.decay_groups(model, 0.1)
        decayed = {names[id(p)] for g in groups if g["weight_decay"] > 0 for p in g["params"]}
        count = sum(len(g["params"]) for g in groups)
        want = {n for n in names.values() if "bias" not in n and "LayerNorm.weight" not in n}
        check(count == len(names), "every parameter must be in exactly one optimizer group")
        check(decayed == want, f"{variant}: decayed {sorted(decayed - want)[:3]} that should not be, "
                               f"missed {sorted(want - decayed)[:3]}")


@test("1f-3-basic", 2, "training a tiny model lowers its loss; train() writes params that load strictly")
def _():
    with tempfile.TemporaryDirectory() as tmp:
        pre, corpus, _ = tiny_finetune_setup(tmp)
        config = tiny_config(pre.vocab_size, 64, n_layer=1, n_embd=32)
        model = submission.initialize_vanilla_model(config)
        tconf, trainer = submission.finetune(None, corpus, pre, 64, model)
        tconf.max_epochs, tconf.batch_size, tconf.num_workers = 40, 4, 0
        tconf.learning_rate, tconf.warmup_tokens, tconf.progress = 3e-3, 500, False
        data = trainer.train_dataset
        x = torch.stack([data[i][0] for i in range(len(data))])
        y = torch.stack([data[i][1] for i in range(len(data))])

        def loss():
            model.eval()
            with torch.no_grad():
                return float(model(x.to(trainer.device), y.to(trainer.device))[1])

        before = loss()
        path = os.path.join(tmp, "out.params")
        made = []

        class SpyAdamW(torch.optim.AdamW):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                made.append(self)

        real_adamw = torch.optim.AdamW
        torch.optim.AdamW = SpyAdamW
        try:
            submission.train(model, path, trainer)
        finally:
            torch.optim.AdamW = real_adamw
        after = loss()
        check(len(made) == 1, "the Trainer must optimise with torch.optim.AdamW")
        tokens = 40 * len(data) * 63  # every target position counts, PAD included (the course's count)
        want_lr = 3e-3 * trainer_mod.lr_multiplier(tokens, tconf)
        lrs = [g["lr"] for g in made[0].param_groups]
        check(all(abs(lr - want_lr) < 1e-12 for lr in lrs),
              f"final learning rate {lrs[0]:.3e}, expected {want_lr:.3e} after {tokens} target tokens")
        check(tuple(made[0].defaults["betas"]) == (0.9, 0.95), "AdamW betas must be (0.9, 0.95)")
        decays = sorted(g["weight_decay"] for g in made[0].param_groups)
        check(decays == [0.0, 0.1], f"AdamW groups' weight decays {decays}, expected [0.0, 0.1]")
        check(after < 0.5 * before, f"40 epochs on {len(data)} rows: loss {before:.3f} -> {after:.3f}")
        check(os.path.exists(path), "train() must write the params file")
        helper.load_params(submission.initialize_vanilla_model(config), path)
        return f"loss {before:.3f} -> {after:.3f}"


def check_finetuned(variant):
    """<variant>.finetune.params loads, and differs from the pretrained params it started from."""
    state, _ = load_params_file(f"{variant}.finetune.params", f"{variant}_finetune_with_pretrain", variant)
    pre = os.path.join(SUB, f"{variant}.pretrain.params")
    if os.path.exists(pre):
        pre_state = torch.load(pre, map_location="cpu", weights_only=True)
        check(any(not torch.equal(state[k], pre_state[k]) for k in state if k in pre_state),
              f"{variant}.finetune.params equals {variant}.pretrain.params: finetuning changed nothing")


@test("1f-0-hidden", 3, "vanilla.pretrain.params loads into the course vanilla model, trained")
def _():
    load_params_file("vanilla.pretrain.params", "vanilla_pretrain", "vanilla")


@test("1f-1-hidden", 3, "vanilla.finetune.params loads into the course vanilla model, differs from pretraining")
def _():
    check_finetuned("vanilla")


@test("1f-2-hidden", 4, "vanilla.pretrain.dev.predictions: one per dev question, accuracy >= 10%")
def _():
    return check_dev_predictions("vanilla.pretrain.dev.predictions", "vanilla_eval_dev_with_pretrain",
                                 variants.VARIANTS["vanilla"].dev_threshold)


@test("1f-3-hidden", 1, "vanilla.pretrain.test.predictions: one per test question")
def _():
    return check_test_predictions("vanilla.pretrain.test.predictions", "vanilla_eval_test_with_pretrain")


@test("1f-4-hidden", 1, "vanilla dev predictions are what vanilla.finetune.params answers")
def _():
    return check_reproduces("vanilla", "vanilla.finetune.params", "vanilla_finetune_with_pretrain",
                            "vanilla.pretrain.dev.predictions", "vanilla_eval_dev_with_pretrain")


# --- 1g: the synthesizer (14 points) ------------------------------------------------------------------

@test("1g-0-basic", 3, "SynthesizerAttention = softmax(ReLU(XA_i + b1)B_i + b2)(XV_i), causal, T < and = block-1")
def _():
    check_attention("synthesizer", (1, 4, 9))


@test("1g-1-basic", 2, "synthesizer model: course names and shapes, w2 ~ U[-0.001, 0.001], other weights N(0, 0.02)")
def _():
    model = check_course_model("synthesizer")
    check(all(isinstance(b.attn, submission.SynthesizerAttention) for b in model.blocks),
          "initialize_synthesizer_model must use SynthesizerAttention in every block")
    with torch.no_grad():
        sd = dict(model.named_parameters())
        w = torch.cat([m.weight.flatten() for m in model.modules() if isinstance(m, torch.nn.Linear)])
        check(0.0195 < float(w.std()) < 0.0205 and abs(float(w.mean())) < 1e-3,
              f"Linear weights: std {float(w.std()):.4f}, expected 0.02")
        emb = float(sd["tok_emb.weight"].std())
        check(0.0195 < emb < 0.0205, f"tok_emb: std {emb:.4f}, expected 0.02")
        check(all(torch.count_nonzero(p) == 0 for k, p in sd.items() if k.endswith("bias") or k.endswith("b2")),
              "biases (and b2) must start at zero")
        check(torch.count_nonzero(sd["pos_emb"]) == 0, "pos_emb must start at zero")
        check(all(torch.equal(p, torch.ones_like(p)) for k, p in sd.items() if k.endswith(("ln1.weight", "ln2.weight",
                                                                                           "ln_f.weight"))),
              "layer norm weights must start at one")
        for i in range(4):
            w2 = sd[f"blocks.{i}.attn.w2"]
            check(float(w2.abs().max()) <= 0.001 and 0.0005 < float(w2.std()) < 0.00065,
                  f"w2 of block {i}: max |w| {float(w2.abs().max()):.4g}, std {float(w2.std()):.4g}; "
                  "expected uniform on [-0.001, 0.001]")


@test("1g-2-basic", 1, "checkpoints: round trip (with and without 'module.'); the other variant is refused")
def _():
    with tempfile.TemporaryDirectory() as tmp:
        for variant in ("vanilla", "synthesizer"):
            check_round_trip(variant, tmp)
        path = os.path.join(tmp, "s.params")
        torch.save(build("synthesizer", tiny_config()).state_dict(), path)
        try:
            helper.load_params(build("vanilla", tiny_config()), path)
        except helper.ParamsError as e:
            check("synthesizer" in str(e), f"the error does not name the variant: {e}")
        else:
            raise AssertionError("a synthesizer checkpoint loaded into a vanilla model")
    check_loss("synthesizer")  # and the loss ignores PAD targets


@test("1g-0-hidden", 2, "synthesizer.pretrain.params loads into the course synthesizer model, trained")
def _():
    load_params_file("synthesizer.pretrain.params", "synthesizer_pretrain", "synthesizer")


@test("1g-1-hidden", 2, "synthesizer.finetune.params loads into the course synthesizer model")
def _():
    check_finetuned("synthesizer")


@test("1g-2-hidden", 2, "synthesizer.pretrain.dev.predictions: one per dev question, accuracy >= 5%")
def _():
    return check_dev_predictions("synthesizer.pretrain.dev.predictions", "synthesizer_eval_dev_with_pretrain",
                                 variants.VARIANTS["synthesizer"].dev_threshold)


@test("1g-3-hidden", 1, "synthesizer.pretrain.test.predictions: one per test question")
def _():
    return check_test_predictions("synthesizer.pretrain.test.predictions", "synthesizer_eval_test_with_pretrain")


@test("1g-4-hidden", 1, "synthesizer dev predictions are what synthesizer.finetune.params answers")
def _():
    return check_reproduces("synthesizer", "synthesizer.finetune.params", "synthesizer_finetune_with_pretrain",
                            "synthesizer.pretrain.dev.predictions", "synthesizer_eval_dev_with_pretrain")

# --- 1h: rotary position embeddings, the 2024-25 editions (14 points) -------------------------------

def rope_angles(T, dim):
    return torch.tensor([[t * 10000.0 ** (-2 * i / dim) for i in range(dim // 2)] for t in range(T)],
                        dtype=torch.float64)


def rotate_complex(x, angles):
    """Each pair (x_2i, x_2i+1) as a complex number, times cos + i sin of its angle."""
    z = torch.complex(x[..., 0::2], x[..., 1::2]) * torch.polar(torch.ones_like(angles), angles)
    out = torch.empty_like(x)
    out[..., 0::2], out[..., 1::2] = z.real, z.imag
    return out


@test("1h-0-basic", 3, "precompute_rotary_emb / apply_rotary_emb: (cos, sin) of t*10000^(-2i/d), complex rotation")
@torch.no_grad()
def _():
    dim, P = 8, 16
    cache = submission.precompute_rotary_emb(dim, P)
    check(tuple(cache.shape) == (P, dim // 2, 2), f"rope cache shape {tuple(cache.shape)}, expected {(P, dim // 2, 2)}")
    check(cache.dtype == torch.float32, f"the rope cache must be float32, as the course's buffer, not {cache.dtype}")
    angles = rope_angles(P, dim)
    err = float((cache.double() - torch.stack([angles.cos(), angles.sin()], -1)).abs().max())
    check(err < 1e-6, f"rope cache differs from (cos t*theta_i, sin t*theta_i) by {err:.2e}")
    for T in (1, 5, P):
        x = torch.randn(2, 3, T, dim, dtype=torch.float64)
        err = float((submission.apply_rotary_emb(x, cache.double()) - rotate_complex(x, angles[:T])).abs().max())
        check(err < 1e-5, f"apply_rotary_emb differs from the complex rotation by {err:.2e} at T={T}")
    config = submission.GPTConfig(30, 10, n_layer=1, n_head=4, n_embd=16, attn_pdrop=0.0, resid_pdrop=0.0, rope=True)
    att = scramble(submission.CausalSelfAttention(config).double(), 0.6, 1).eval()
    check("rope_cache" in att.state_dict() and tuple(att.rope_cache.shape) == (10, 2, 2),
          "rope attention must keep its (block_size, head width / 2, 2) table as the buffer rope_cache")
    for T in (1, 6, 10):  # values are not rotated; the cache holds float32 cos/sin, hence the tolerance
        X = torch.randn(2, T, 16, dtype=torch.float64)
        heads = []
        for i in range(4):
            rows = slice(4 * i, 4 * i + 4)
            q = rotate_complex(X @ att.query.weight[rows].T + att.query.bias[rows], rope_angles(T, 4))
            k = rotate_complex(X @ att.key.weight[rows].T + att.key.bias[rows], rope_angles(T, 4))
            v = X @ att.value.weight[rows].T + att.value.bias[rows]
            heads.append(causal_softmax(q @ k.transpose(-1, -2) / 2.0) @ v)
        err = float((att(X) - (torch.cat(heads, -1) @ att.proj.weight.T + att.proj.bias)).abs().max())
        check(err < 1e-5, f"rope attention differs from softmax((R q)(R k)^T / sqrt(d/h)) v by {err:.2e} at T={T}")


@test("1h-1-basic", 2, "rope model: no pos_emb, a rope_cache buffer per block, 3,290,624 parameters; odd head width refused")
def _():
    model = check_course_model("rope")
    check(model.pos_emb is None and "pos_emb" not in model.state_dict(), "the rope model must not have pos_emb")
    check(all(b.attn.rope for b in model.blocks), "every block of the rope model must rotate its queries and keys")
    check_loss("rope")
    try:
        submission.initialize_rope_model(tiny_config(n_embd=18, n_head=6))
    except ValueError as e:
        check("even" in str(e), f"the error for an odd head width does not say it must be even: {e}")
    else:
        raise AssertionError("a rope model with an odd head width (3) was built")


@test("1h-2-basic", 2, "rope: batched greedy decoding (key/value cache) equals sample(); checkpoints round trip")
def _():
    check_decoding("rope")
    with tempfile.TemporaryDirectory() as tmp:
        check_round_trip("rope", tmp)


# --- 1i: the Perceiver, the 2023-24 editions (14 points) --------------------------------------------

def cross_reference(att, x_kv, x_q, n_head, block):
    d = x_q.shape[-1] // n_head
    keep = torch.ones(block, block, dtype=torch.bool).tril()[:x_q.shape[1], :x_kv.shape[1]]
    heads = []
    for i in range(n_head):
        rows = slice(i * d, (i + 1) * d)
        q = x_q @ att.query.weight[rows].T + att.query.bias[rows]
        k = x_kv @ att.key.weight[rows].T + att.key.bias[rows]
        v = x_kv @ att.value.weight[rows].T + att.value.bias[rows]
        heads.append(torch.softmax((q @ k.transpose(-1, -2) / math.sqrt(d)).masked_fill(~keep, float("-inf")), -1) @ v)
    return torch.cat(heads, -1) @ att.proj.weight.T + att.proj.bias


def layer_norm(x, ln):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + ln.eps) * ln.weight + ln.bias


def mlp_reference(x, mlp):
    h = x @ mlp[0].weight.T + mlp[0].bias
    return (0.5 * h * (1 + torch.erf(h / math.sqrt(2)))) @ mlp[2].weight.T + mlp[2].bias


def perceiver_tiny(m=5):
    return submission.GPTConfig(30, 10, n_layer=3, n_head=4, n_embd=16, attn_pdrop=0.0, resid_pdrop=0.0,
                                perceiver=True, bottleneck_dim=m)


@test("1i-0-basic", 3, "CausalCrossAttention: q from x_q, k and v from x_kv, mask tril[:Tq, :Tk], batch broadcast")
@torch.no_grad()
def _():
    att = scramble(submission.CausalCrossAttention(perceiver_tiny()).double(), 0.6, 2).eval()
    names = {n for n, _ in att.named_parameters()}
    want = {f"{m}.{w}" for m in ("key", "query", "value", "proj") for w in ("weight", "bias")}
    check(names == want, f"CausalCrossAttention's parameters are {sorted(names)}, expected {sorted(want)}")
    check(torch.equal(att.mask[0, 0], torch.ones(10, 10).tril()), "the mask must be the block's tril")
    for Tq, Tk, Bq, Bkv in ((4, 9, 1, 3), (9, 4, 3, 1), (10, 10, 2, 2), (1, 1, 3, 3)):
        x_kv = torch.randn(Bkv, Tk, 16, dtype=torch.float64)
        x_q = torch.randn(Bq, Tq, 16, dtype=torch.float64)
        got = att(x_kv, x_q)
        check(tuple(got.shape) == (max(Bq, Bkv), Tq, 16), f"cross-attention output {tuple(got.shape)}")
        err = float((got - cross_reference(att, x_kv, x_q, 4, 10)).abs().max())
        check(err < 1e-9, f"cross-attention differs from the formula by {err:.2e} (Tq={Tq}, Tk={Tk})")


@test("1i-1-basic", 3, "DownProjectBlock: C + attn(x, ln1(C)), then + mlp(ln2); UpProjectBlock: x + attn(ln1(y), x), + mlp")
@torch.no_grad()
def _():
    down = submission.DownProjectBlock(perceiver_tiny()).double()
    check(tuple(down.C.shape) == (1, 5, 16), f"C has shape {tuple(down.C.shape)}, expected (1, bottleneck_dim, n_embd)")
    bound = math.sqrt(6 / (5 * 16 + 16))  # xavier-uniform of a (1, m, n) tensor: fans m*n and n
    check(0.8 * bound < float(down.C.abs().max()) <= bound, "C must be xavier-uniform initialised")
    scramble(down, 0.5, 3).eval()
    up = scramble(submission.UpProjectBlock(perceiver_tiny()).double(), 0.5, 4).eval()
    for T in (3, 5, 8, 10):
        x = torch.randn(2, T, 16, dtype=torch.float64)
        y = down.C + cross_reference(down.attn, x, layer_norm(down.C, down.ln1), 4, 10)
        y = y + mlp_reference(layer_norm(y, down.ln2), down.mlp)
        got = down(x)
        check(tuple(got.shape) == (2, 5, 16), f"DownProjectBlock output {tuple(got.shape)}, expected (2, m, n_embd)")
        err = float((got - y).abs().max())
        check(err < 1e-9, f"DownProjectBlock differs from the definition by {err:.2e} at T={T}")
        out = x + cross_reference(up.attn, layer_norm(y, up.ln1), x, 4, 10)
        out = out + mlp_reference(layer_norm(out, up.ln2), up.mlp)
        err = float((up(y, x) - out).abs().max())
        check(err < 1e-9, f"UpProjectBlock differs from the definition by {err:.2e} at T={T}")
    x = torch.randn(1, 10, 16, dtype=torch.float64)
    later = x.clone()
    later[:, 3:] += 1.0
    check(torch.equal(down(x)[:, :3], down(later)[:, :3]), "bottleneck slot j must read input positions 0..j only")


@test("1i-2-basic", 2, "perceiver model: down_block, blocks on m slots, up_block, 3,331,584 parameters at m = 32; decoding")
def _():
    model = check_course_model("perceiver")
    check(len(model.blocks) == 2, f"the course's perceiver has n_layer - 2 = 2 middle blocks, this one {len(model.blocks)}")
    check_loss("perceiver")
    check_decoding("perceiver")
    with tempfile.TemporaryDirectory() as tmp:
        check_round_trip("perceiver", tmp)


def register_deliverables(part, variant):
    """The hidden tests of a pretrained variant's four deliverables, thresholds from the registry."""
    v = variants.VARIANTS[variant]
    stage = dict(zip(("pretrain", "finetune", "dev", "test"), v.stages()[-4:]))

    @test(f"{part}-0-hidden", 1, f"{variant}.pretrain.params loads into the course {variant} model, trained")
    def _():
        load_params_file(f"{variant}.pretrain.params", stage["pretrain"], variant)

    @test(f"{part}-1-hidden", 1, f"{variant}.finetune.params loads into the course {variant} model, differs from pretraining")
    def _():
        check_finetuned(variant)

    @test(f"{part}-2-hidden", 3, f"{variant}.pretrain.dev.predictions: one per dev question, "
                                 f"accuracy >= {100 * v.dev_threshold:.1f}%")
    def _():
        return check_dev_predictions(f"{variant}.pretrain.dev.predictions", stage["dev"], v.dev_threshold,
                                     v.expectation)

    @test(f"{part}-3-hidden", 1, f"{variant}.pretrain.test.predictions: one per test question"
                                 f" (accuracy >= {100 * v.test_threshold:.1f}% where answers exist)")
    def _():
        return check_test_predictions(f"{variant}.pretrain.test.predictions", stage["test"], v.test_threshold)

    @test(f"{part}-4-hidden", 1, f"{variant} dev predictions are what {variant}.finetune.params answers")
    def _():
        return check_reproduces(variant, f"{variant}.finetune.params", stage["finetune"],
                                f"{variant}.pretrain.dev.predictions", stage["dev"])


register_deliverables("1h", "rope")
register_deliverables("1i", "perceiver")


@test("1j-0-basic", 1, "build() knows every variant of the registry and refuses any other name")
def _():
    for name in variants.VARIANTS:
        model = build(name, tiny_config(n_layer=3))
        check(model.config.variant == name, f"build({name!r}) made a {model.config.variant} model")
    try:
        build("synthesiser", tiny_config())
    except ValueError as e:
        check("synthesiser" in str(e), f"the error does not name the unknown variant: {e}")
    else:
        raise AssertionError("build('synthesiser') returned a model instead of failing")



if __name__ == "__main__":
    sys.exit(grader.main(sys.argv[1:]))
