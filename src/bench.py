"""Speed of training and evaluation: our fast path against the plain fp32 eager path.

Both paths run the same model (the course's 4 x 8 x 256, block 128) in one run of this
command, after warm-up (training: each path in its own process, alternating; evaluation:
in this process); each figure is the median of several repeats, and the ratio between the
paths is what to read (absolute CPU times vary from run to run).

    ./run.sh bench                # every variant (variants.py), training and evaluation
    ./run.sh bench --quick        # fewer repeats

On CUDA (when available, or --device cuda) it times the GPU paths instead, in this
process: the plain path (fp32 eager, whole batches from the dataset's __getitem__, AdamW)
against ours (bf16 autocast, fused AdamW, span-corruption batches made on the device,
packed), per variant: tokens/s, milliseconds per step, the share of a step spent making
its batch (timed apart, synchronised on both sides: what the step would wait for without
loader workers), and the course's whole schedule at that speed: 650 pretraining epochs
of the corpus's lines in steps of 128 rows, then 10 finetuning epochs in steps of 256.
"""

import argparse
import concurrent.futures
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
from submission.corruption import CorruptionBatches  # noqa: E402
from submission.decoding import greedy_decode  # noqa: E402
from submission.helper import COURSE_SCHEDULE, build  # noqa: E402
from submission.model import COURSE_MODEL, GPTConfig  # noqa: E402
from submission.packing import Packing, cpu_length_groups, group_rows, packed_batch, whole_batch  # noqa: E402
from submission.trainer import decay_groups, forward_backward  # noqa: E402
from submission.utils import resolve_precision, sample  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def matmul_peak(dtype, n=2048, repeats=5):
    """The best of several large square matmuls: what this machine's BLAS can reach."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    return 2 * n ** 3 / min(timed(lambda: a @ b) for _ in range(repeats))


def course_model(variant, vocab_size, implementation="fast"):
    """The course's 4 x 8 x 256 model, block 128 (the Perceiver with the course's m = 32)."""
    return build(variant, GPTConfig(vocab_size, **COURSE_MODEL, implementation=implementation))


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


def training_setup(variant, wiki, batch_size, implementation="fast"):
    """The model and the batches every path is timed on (the same in every process)."""
    torch.manual_seed(0)
    random.seed(0)
    data = ds.CharCorruptionDataset(wiki, COURSE_MODEL["block_size"])
    model = course_model(variant, data.vocab_size, implementation).train()
    rows = [data[i % len(data)] for i in random.sample(range(max(len(data), batch_size)), batch_size)]  # small data: repeats
    x = torch.randint(2, data.vocab_size, (batch_size, 127))
    return model, rows, list(zip(x, torch.roll(x, -1, 1)))


def time_training_path(path, variant, wiki, batch_size, repeats, precision):
    """Seconds per optimizer step of one path, after two warm-up steps (run in its own process)."""
    model, rows, full_rows = training_setup(variant, wiki, batch_size, "plain" if path == "plain" else "fast")
    if path == "plain":
        step = train_step_fn(model, whole_batch(rows)[0], "fp32")
    else:
        step = train_step_fn(model, packed_batch(rows if path == "fast" else full_rows,
                                                 cpu_length_groups(batch_size))[0], precision)
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
    plain = course_model(variant, len(vocab.stoi), "plain").eval()
    plain.load_state_dict(model.state_dict())

    def loop():
        for p in prompts[:one_at_a_time]:
            sample(plain, torch.tensor([p]), 32, sample=False)
    t_loop = timed(loop)
    return {"batched_q_s": len(prompts) / t_batched, "loop_q_s": one_at_a_time / t_loop}


# The course's schedules: (epochs, rows per step) of pretraining and of finetuning after it.
COURSE_PRETRAIN, COURSE_FINETUNE = COURSE_SCHEDULE["pretrain"], COURSE_SCHEDULE["finetune_with_pretrain"]


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_steps(model, next_batch, precision, fused, device, steps, warmup):
    """Seconds per optimizer step, and the seconds of it spent in next_batch(), medians
    over `steps` steps after `warmup`; the device is synchronised around both parts."""
    opt = torch.optim.AdamW(decay_groups(model, 0.1), lr=1e-4, fused=fused)
    step_times, data_times = [], []
    for i in range(warmup + steps):
        sync(device)
        t0 = time.perf_counter()
        batch = next_batch()
        sync(device)
        t1 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        forward_backward(model, batch, precision, device)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sync(device)
        if i >= warmup:
            step_times.append(time.perf_counter() - t0)
            data_times.append(t1 - t0)
    return statistics.median(step_times), statistics.median(data_times)


def batch_makers(data, names, batch_size, finetune_rows, device):
    """next_batch() functions for each (path, schedule): the plain path's from __getitem__,
    whole; ours packed, pretraining rows made on the device. Documents in index order."""
    cursor = {"pretrain": 0, "finetune": 0}
    generator = CorruptionBatches(data, device, seed=0)

    def indices(kind, n, rows):
        start = cursor[kind]
        cursor[kind] = (start + rows) % n
        return [(start + i) % n for i in range(rows)]

    def plain(kind, dataset, rows):
        def next_batch():
            x, y = whole_batch([dataset[i] for i in indices(kind, len(dataset), rows)])[0]
            return x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        return next_batch

    def ours_pretrain():
        idx = torch.tensor(indices("pretrain", len(data), batch_size), device=device)
        x, y = generator(idx)
        return Packing(group_rows(x, y, 1)[0])

    def ours_finetune():
        return packed_batch([names[i] for i in indices("finetune", len(names), finetune_rows)], 1)[0]

    return {("plain", "pretrain"): plain("pretrain", data, batch_size),
            ("plain", "finetune"): plain("finetune", names, finetune_rows),
            ("ours", "pretrain"): ours_pretrain, ("ours", "finetune"): ours_finetune}


def bench_device(variant, wiki, train_tsv, batch_size, steps, warmup, device, precision="auto",
                 finetune_rows=COURSE_FINETUNE[1]):
    """The plain and our GPU path on `device` (CUDA; the CPU too, for tests), one variant.
    The schedule's estimate takes the course's steps at the measured step times."""
    device = torch.device(device)
    torch.manual_seed(0)
    random.seed(0)
    data = ds.CharCorruptionDataset(wiki, COURSE_MODEL["block_size"])
    names = ds.NameDataset(data, train_tsv)
    makers = batch_makers(data, names, batch_size, finetune_rows, device)
    ours_precision = resolve_precision(precision, device)
    out = {}
    for path in ("plain", "ours"):
        path_precision = "fp32" if path == "plain" else ours_precision
        fused = path == "ours" and device.type == "cuda"
        for kind in ("pretrain", "finetune"):
            torch.manual_seed(0)
            model = course_model(variant, data.vocab_size, "plain" if path == "plain" else "fast")
            model.to(device).train()
            out[path, kind] = device_steps(model, makers[path, kind], path_precision, fused, device, steps, warmup)
    pre_steps = COURSE_PRETRAIN[0] * -(-len(data) // COURSE_PRETRAIN[1])
    fine_steps = COURSE_FINETUNE[0] * -(-len(names) // COURSE_FINETUNE[1])
    row = {"variant": variant, "device": str(device), "precision": ours_precision,
           "pretrain_steps": pre_steps, "finetune_steps": fine_steps}
    for path in ("plain", "ours"):
        step, data_s = out[path, "pretrain"]
        row[f"{path}_tok_s"] = batch_size * 127 / step
        row[f"{path}_ms_step"] = step * 1e3
        row[f"{path}_data_share"] = data_s / step
        row[f"{path}_pretrain_s"] = pre_steps * step
        row[f"{path}_schedule_s"] = pre_steps * step + fine_steps * out[path, "finetune"][0]
    return row


def print_device_table(rows, batch_size):
    print("| variant | train tok/s plain fp32 | train tok/s ours | speed-up | ms/step plain / ours "
          "| data share plain / ours | pretraining (course schedule) plain / ours | + finetuning plain / ours |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['variant']} | {r['plain_tok_s']:.0f} | {r['ours_tok_s']:.0f} "
              f"| {r['ours_tok_s'] / r['plain_tok_s']:.1f}x | {r['plain_ms_step']:.2f} / {r['ours_ms_step']:.2f} "
              f"| {r['plain_data_share']:.0%} / {r['ours_data_share']:.0%} "
              f"| {r['plain_pretrain_s']:.0f} s / {r['ours_pretrain_s']:.0f} s "
              f"| {r['plain_schedule_s']:.0f} s / {r['ours_schedule_s']:.0f} s |")
    r = rows[0]
    print(f"\n(device {r['device']}, ours in {r['precision']}; one pretraining step: {batch_size} rows x 127 "
          f"positions, tok/s counting all of them; the schedule: {r['pretrain_steps']} pretraining steps, "
          f"{r['finetune_steps']} finetuning steps of {COURSE_FINETUNE[1]} question rows, at the median step "
          f"time; data share: making the batch, synchronised, as a share of the whole step)")


def main():
    argp = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    argp.add_argument("--quick", action="store_true", help="fewer repeats and questions")
    argp.add_argument("--batch_size", type=int, default=128)
    argp.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto")
    argp.add_argument("--variants", nargs="+", choices=list(variants.VARIANTS), default=list(variants.VARIANTS))
    argp.add_argument("--json", default=None, help="also write the results here")
    argp.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                      help="auto: the GPU paths on CUDA when available, else the CPU paths")
    args = argp.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda: no CUDA device is available", file=sys.stderr)
        sys.exit(1)
    if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available()):
        return main_cuda(args)

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


def main_cuda(args):
    with open(os.path.join(ROOT, "data", "wiki.txt"), encoding="utf-8") as f:
        wiki = f.read()
    with open(os.path.join(ROOT, "data", "birth_places_train.tsv"), encoding="utf-8") as f:
        train_tsv = f.read()
    steps, warmup = (20, 5) if args.quick else (100, 10)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    rows = [bench_device(v, wiki, train_tsv, args.batch_size, steps, warmup, "cuda", args.precision)
            for v in args.variants]
    print()
    print_device_table(rows, args.batch_size)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
