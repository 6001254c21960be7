"""Speed of training and evaluation: our fast path against the plain fp32 eager path.

Both paths run the same model (the course's 4 x 8 x 256, block 128) in one run of this
command, after warm-up (training: each path in its own process, alternating; evaluation:
in this process); each figure is the median of several repeats, and the ratio between the
paths is what to read (absolute CPU times vary from run to run).

    ./run.sh bench                # every variant (variants.py), training and evaluation
    ./run.sh bench --quick        # fewer repeats
"""

import argparse
import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import random
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from submission import dataset as ds  # noqa: E402
from submission import variants  # noqa: E402
from submission.attention import reference_path  # noqa: E402
from submission.helper import build  # noqa: E402
from submission.model import GPTConfig  # noqa: E402
from submission.trainer import cpu_length_groups, decay_groups, forward_backward, packed_batch, whole_batch  # noqa: E402
from submission.utils import autocast_context, greedy_decode, resolve_precision, sample  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def matmul_peak(dtype, n=2048, repeats=5):
    """The best of several large square matmuls: what this machine's BLAS can reach."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    return 2 * n ** 3 / min(timed(lambda: a @ b) for _ in range(repeats))


def course_model(variant, vocab_size):
    """The course's 4 x 8 x 256 model, block 128 (the Perceiver with the course's m = 32)."""
    return build(variant, GPTConfig(vocab_size, 128, n_layer=4, n_head=8, n_embd=256))


def flops_per_token(model, T):
    """Training FLOPs per token: 6 per matmul weight, plus the two T x T attention products.

    For the Perceiver an upper bound: its middle blocks and parts of the down and up
    blocks run on the m bottleneck slots, not on the T positions.
    """
    c = model.config
    weights = sum(p.numel() for n, p in model.named_parameters()
                  if p.dim() == 2 and not n.endswith(("tok_emb.weight", "w2")))
    attention = 2 * 2 * T * c.n_embd * c.n_layer  # scores and weighted sum, forward, causal ~ T/2 x 2
    return 6 * weights + 3 * attention


def train_step_fn(model, batch, precision):
    """One optimizer step of the trainer's own: forward/backward of the batch, clip, AdamW."""
    opt = torch.optim.AdamW(decay_groups(model, 0.1), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        forward_backward(model, batch, precision, torch.device("cpu"))
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return step


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def training_setup(variant, wiki, batch_size):
    """The model and the batches every path is timed on (the same in every process)."""
    torch.manual_seed(0)
    random.seed(0)
    data = ds.CharCorruptionDataset(wiki, 128)
    model = course_model(variant, data.vocab_size).train()
    rows = [data[i % len(data)] for i in random.sample(range(len(data)), batch_size)]
    x = torch.randint(2, data.vocab_size, (batch_size, 127))
    return model, rows, list(zip(x, torch.roll(x, -1, 1)))


def time_training_path(path, variant, wiki, batch_size, repeats, precision):
    """Seconds per optimizer step of one path, after two warm-up steps (run in its own process)."""
    model, rows, full_rows = training_setup(variant, wiki, batch_size)
    groups = cpu_length_groups(batch_size)
    if path == "plain":
        step, context = train_step_fn(model, whole_batch(rows)[0], "fp32"), reference_path
    else:
        batch = packed_batch(rows if path == "fast" else full_rows, groups)[0]
        step, context = train_step_fn(model, batch, precision), contextlib.nullcontext
    with context():
        for _ in range(2):
            step()
        return [timed(step) for _ in range(repeats)]


def bench_training(variant, wiki, batch_size, repeats, precision, rounds):
    """Steps on one pretraining batch (span-corruption rows of the shipped wiki.txt).

    The fast path takes the batch as the trainer does (packed, attention in length groups);
    the plain path takes the whole 128 x 127 block. Also timed: the fast path on a batch of
    rows with no padding at all, which isolates the kernels' share of the speed-up.
    Each path runs in a fresh process, as it would in training: in one process, one path's
    memory use changes how fast the allocator serves the other (the plain path measured
    about 10% slower right after the fast one). Processes alternate between the paths for
    `rounds` rounds; each figure is the median of all its steps.
    """
    paths = ("plain", "fast", "fast_full_rows")
    times = {p: [] for p in paths}
    for _ in range(rounds):
        for p in paths:
            with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
                times[p] += pool.submit(time_training_path, p, variant, wiki, batch_size, repeats, precision).result()
    model, rows, _ = training_setup(variant, wiki, batch_size)
    tokens = batch_size * 127  # course positions per step, padding included, for every path
    out = {f"{name}_tok_s": tokens / statistics.median(t) for name, t in times.items()}
    out["flops_per_token"] = flops_per_token(model, 127)
    out["padding"] = 1 - sum(int((y != 0).sum()) for _, y in rows) / tokens
    return out


def bench_eval(variant, vocab, questions, one_at_a_time, precision):
    torch.manual_seed(0)
    model = course_model(variant, len(vocab.stoi)).eval()
    prompts = [vocab.encode(vocab.encodable(q)[0] + ds.MASK_CHAR) for q in questions]
    mask_id = vocab.stoi[ds.MASK_CHAR]
    greedy_decode(model, prompts[:8], 32, stop_id=mask_id, precision=precision)  # warm-up
    t_batched = timed(lambda: greedy_decode(model, prompts, 32, stop_id=mask_id, precision=precision))

    def loop():
        with reference_path():
            for p in prompts[:one_at_a_time]:
                sample(model, torch.tensor([p]), 32, sample=False)
    t_loop = timed(loop)
    return {"batched_q_s": len(prompts) / t_batched, "loop_q_s": one_at_a_time / t_loop}


def main():
    argp = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    argp.add_argument("--quick", action="store_true", help="fewer repeats and questions")
    argp.add_argument("--batch_size", type=int, default=128)
    argp.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto")
    argp.add_argument("--variants", nargs="+", choices=list(variants.VARIANTS), default=list(variants.VARIANTS))
    argp.add_argument("--json", default=None, help="also write the results here")
    args = argp.parse_args()

    with open(os.path.join(ROOT, "data", "wiki.txt"), encoding="utf-8") as f:
        wiki = f.read()
    vocab = ds.Vocabulary(wiki)
    with open(os.path.join(ROOT, "data", "birth_dev.tsv"), encoding="utf-8") as f:
        questions = [q for _, q, _ in ds.split_rows(f.read(), "birth_dev.tsv")]
    precision = resolve_precision(args.precision, "cpu")
    repeats, rounds, loop_n = (3, 1, 20) if args.quick else (4, 2, 50)

    peak32 = matmul_peak(torch.float32)
    peak = matmul_peak(torch.bfloat16) if precision == "bf16" else peak32
    print(f"threads: {torch.get_num_threads()}  fast-path precision: {precision}  "
          f"matmul peak: fp32 {peak32 / 1e9:.0f} GFLOP/s" +
          (f", bf16 {peak / 1e9:.0f} GFLOP/s" if precision == "bf16" else ""))
    rows = []
    for variant in args.variants:
        tr = bench_training(variant, wiki, args.batch_size, repeats, precision, rounds)
        ev = bench_eval(variant, vocab, questions, loop_n, precision)
        rows.append({"variant": variant, **tr, **ev,
                     "train_speedup": tr["fast_tok_s"] / tr["plain_tok_s"],
                     "kernel_speedup": tr["fast_full_rows_tok_s"] / tr["plain_tok_s"],
                     "eval_speedup": ev["batched_q_s"] / ev["loop_q_s"],
                     "fast_peak_fraction": tr["fast_full_rows_tok_s"] * tr["flops_per_token"] / peak,
                     "plain_peak_fraction": tr["plain_tok_s"] * tr["flops_per_token"] / peak32})
    print()
    print("| variant | train tok/s plain fp32 | train tok/s fast | speed-up | of which kernels "
          "| of matmul peak (plain / fast) | eval q/s one-at-a-time | eval q/s batched | speed-up |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['variant']} | {r['plain_tok_s']:.0f} | {r['fast_tok_s']:.0f} | {r['train_speedup']:.2f}x "
              f"| {r['kernel_speedup']:.2f}x | {r['plain_peak_fraction']:.0%} / {r['fast_peak_fraction']:.0%} "
              f"| {r['loop_q_s']:.1f} | {r['batched_q_s']:.0f} | {r['eval_speedup']:.0f}x |")
    print(f"\n(training: one pretraining batch of {args.batch_size} span-corruption rows of data/wiki.txt, "
          f"{rows[0]['padding']:.0%} of its {args.batch_size} x 127 positions padding; tok/s counts all of them "
          f"for both paths, as the course's schedule does. 'of which kernels': the fast path on rows with no "
          f"padding, so only its kernels differ; the matmul-peak fractions are for full rows. Evaluation: "
          f"{len(questions)} dev questions batched, {loop_n} one at a time; untrained weights, so every "
          f"answer runs all 32 steps)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
