"""Speed of training and evaluation: our fast path against the plain fp32 eager path.

Both paths run the same model (the course's 4 x 8 x 256, block 128) in the same process,
interleaved, after warm-up; each figure is the median of several repeats, and the ratio
between the paths is what to read (absolute CPU times vary from run to run).

    ./run.sh bench                # both variants, training and evaluation
    ./run.sh bench --quick        # fewer repeats
"""

import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from submission import dataset as ds  # noqa: E402
from submission.attention import reference_path  # noqa: E402
from submission.model import GPT, GPTConfig  # noqa: E402
from submission.trainer import decay_groups  # noqa: E402
from submission.utils import autocast_context, greedy_decode, resolve_precision, sample  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def matmul_peak(dtype, n=2048, repeats=5):
    """The best of several large square matmuls: what this machine's BLAS can reach."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    return 2 * n ** 3 / min(timed(lambda: a @ b) for _ in range(repeats))


def flops_per_token(model, T):
    """Training FLOPs per token: 6 per matmul weight, plus the two T x T attention products."""
    c = model.config
    weights = sum(p.numel() for n, p in model.named_parameters()
                  if p.dim() == 2 and not n.endswith(("tok_emb.weight", "w2")))
    attention = 2 * 2 * T * c.n_embd * c.n_layer  # scores and weighted sum, forward, causal ~ T/2 x 2
    return 6 * weights + 3 * attention


def train_step_fn(model, batch, precision):
    opt = torch.optim.AdamW(decay_groups(model, 0.1), lr=1e-4)
    x, y = batch

    def step():
        with autocast_context(precision, "cpu"):
            _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return step


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def bench_training(variant, vocab, batch_size, repeats, precision):
    torch.manual_seed(0)
    config = GPTConfig(vocab, 128, n_layer=4, n_head=8, n_embd=256, attention=variant)
    fast, plain = GPT(config), GPT(config)
    plain.load_state_dict(fast.state_dict())
    fast.train(), plain.train()
    x = torch.randint(2, vocab, (batch_size, 127))
    batch = (x, torch.roll(x, -1, 1))
    fast_step = train_step_fn(fast, batch, precision)
    plain_step = train_step_fn(plain, batch, "fp32")

    def plain_timed():
        with reference_path():
            return timed(plain_step)
    for _ in range(2):
        fast_step(), plain_timed()
    t_fast, t_plain = [], []
    for _ in range(repeats):
        t_fast.append(timed(fast_step))
        t_plain.append(plain_timed())
    tokens = batch_size * 127
    return {"fast_tok_s": tokens / statistics.median(t_fast), "plain_tok_s": tokens / statistics.median(t_plain),
            "flops_per_token": flops_per_token(fast, 127)}


def bench_eval(variant, vocab, questions, one_at_a_time, precision):
    torch.manual_seed(0)
    model = GPT(GPTConfig(len(vocab.stoi), 128, n_layer=4, n_head=8, n_embd=256, attention=variant)).eval()
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
    argp.add_argument("--variants", nargs="+", default=["vanilla", "synthesizer"])
    argp.add_argument("--json", default=None, help="also write the results here")
    args = argp.parse_args()

    with open(os.path.join(ROOT, "data", "wiki.txt"), encoding="utf-8") as f:
        vocab = ds.Vocabulary(f.read())
    with open(os.path.join(ROOT, "data", "birth_dev.tsv"), encoding="utf-8") as f:
        questions = [q for _, q, _ in ds.split_rows(f.read(), "birth_dev.tsv")]
    precision = resolve_precision(args.precision, "cpu")
    repeats, loop_n = (3, 20) if args.quick else (5, 50)

    peak32 = matmul_peak(torch.float32)
    peak = matmul_peak(torch.bfloat16) if precision == "bf16" else peak32
    print(f"threads: {torch.get_num_threads()}  fast-path precision: {precision}  "
          f"matmul peak: fp32 {peak32 / 1e9:.0f} GFLOP/s" +
          (f", bf16 {peak / 1e9:.0f} GFLOP/s" if precision == "bf16" else ""))
    rows = []
    for variant in args.variants:
        tr = bench_training(variant, len(vocab.stoi), args.batch_size, repeats, precision)
        ev = bench_eval(variant, vocab, questions, loop_n, precision)
        rows.append({"variant": variant, **tr, **ev,
                     "train_speedup": tr["fast_tok_s"] / tr["plain_tok_s"],
                     "eval_speedup": ev["batched_q_s"] / ev["loop_q_s"],
                     "fast_peak_fraction": tr["fast_tok_s"] * tr["flops_per_token"] / peak,
                     "plain_peak_fraction": tr["plain_tok_s"] * tr["flops_per_token"] / peak32})
    print()
    print("| variant | train tok/s plain fp32 | train tok/s fast | speed-up | of matmul peak (plain / fast) "
          "| eval q/s one-at-a-time | eval q/s batched | speed-up |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['variant']} | {r['plain_tok_s']:.0f} | {r['fast_tok_s']:.0f} | {r['train_speedup']:.2f}x "
              f"| {r['plain_peak_fraction']:.0%} / {r['fast_peak_fraction']:.0%} "
              f"| {r['loop_q_s']:.1f} | {r['batched_q_s']:.0f} | {r['eval_speedup']:.0f}x |")
    print(f"\n(batch {args.batch_size} x 127 tokens; evaluation: {len(questions)} dev questions batched, "
          f"{loop_n} one at a time; untrained weights, so every answer runs all 32 steps)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
