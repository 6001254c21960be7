"""Pretrain, finetune or evaluate the course's GPT from the command line.

    python src/run.py --function pretrain --variant vanilla --pretrain_corpus_path data/wiki.txt \\
        --writing_params_path vanilla.pretrain.params

The model and schedule are the course's (4 layers, 8 heads, 256 wide, block 128); the
size and schedule flags exist for tests and the quick preset, and default to the course.
Errors a user can cause are one line on stderr and exit code 1.
"""

import argparse
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from submission import dataset as ds  # noqa: E402
from submission import distributed, variants  # noqa: E402
from submission.checkpoint import (CheckpointError, ParamsError, atomic_write_text, load_params,  # noqa: E402
                                   remove_stale_tmp)
from submission.decoding import greedy_decode  # noqa: E402
from submission.helper import INITIALIZE, finetune, pretrain, train  # noqa: E402
from submission.model import COURSE_MODEL, GPTConfig  # noqa: E402
from submission.trainer import RECIPES, NonFiniteLoss  # noqa: E402
from submission.utils import resolve_precision, set_seed  # noqa: E402

MIN_BLOCK_SIZE = 9  # a corrupted document (4 to 7/8 of the block characters) and its two masks must fit
ANSWER_STEPS = 32  # characters the course samples after the question


class UserError(Exception):
    pass


def build_parser():
    argp = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # The first course release took these three positionally; both forms work.
    argp.add_argument("function_pos", nargs="?", metavar="function", help=argparse.SUPPRESS)
    argp.add_argument("variant_pos", nargs="?", metavar="variant", help=argparse.SUPPRESS)
    argp.add_argument("corpus_pos", nargs="?", metavar="pretrain_corpus_path", help=argparse.SUPPRESS)
    argp.add_argument("--function", choices=["pretrain", "finetune", "evaluate", "baseline"],
                      help="baseline: accuracy of always answering the finetuning set's most common place")
    argp.add_argument("--variant", choices=list(variants.VARIANTS))
    argp.add_argument("--bottleneck_dim", type=int, default=variants.VARIANTS["perceiver"].options["bottleneck_dim"],
                      help="the perceiver's number of bottleneck slots m (2023-24 editions)")
    argp.add_argument("--pretrain_lr", type=float, default=6e-3, help="pretraining learning rate")
    argp.add_argument("--finetune_lr", type=float, default=6e-4, help="finetuning learning rate")
    argp.add_argument("--pretrain_corpus_path", default=None)
    argp.add_argument("--reading_params_path", default=None)
    argp.add_argument("--writing_params_path", default=None)
    argp.add_argument("--finetune_corpus_path", default=None)
    argp.add_argument("--eval_corpus_path", default=None)
    argp.add_argument("--outputs_path", default=None)
    argp.add_argument("--compile", action=argparse.BooleanOptionalAction, default=False,
                      help="torch.compile the model for training")
    argp.add_argument("--backend", default="inductor", help="torch.compile backend")
    argp.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto",
                      help="auto: bf16 autocast where the hardware runs it fast (AVX512-BF16/AMX, CUDA), else fp32")
    argp.add_argument("--seed", type=int, default=0)
    argp.add_argument("--resume", action="store_true",
                      help="continue from the checkpoint next to the params (<params>.ckpt, written every epoch); "
                           "the same result as an uninterrupted run with --num_workers 0")
    argp.add_argument("--tb_expt_name", default=None, help="TensorBoard run name (if tensorboard is installed)")
    argp.add_argument("--quiet", action="store_true", help="no progress bars")
    argp.add_argument("--recipe", choices=list(RECIPES), default="course",
                      help="course: train as the course's trainer.py does (index order, decay on all but biases, "
                           "the first step at the base rate, the cosine climbing back after final_tokens); "
                           "ours: shuffled, decay on matmul weights only, the schedule from the first step, "
                           "a 10%% floor")
    argp.add_argument("--truncation_cap", type=fraction, default=7 / 8, metavar="FRACTION",
                      help="longest truncated document as a fraction of the block, e.g. 7/8 (the 2021-2024 "
                           "editions, default) or 3/4 (the 2025 edition's grader)")
    argp.add_argument("--device_batches", action=argparse.BooleanOptionalAction, default=None,
                      help="pretraining: make span-corruption batches on the device with tensor operations, "
                           "equal in distribution to the dataset's (default: on CUDA only)")
    argp.add_argument("--reference_path", action="store_true",
                      help="build the model with the plain implementation: attention and dropout computed "
                           "the course's way, each batch in one piece (to compare with the fast path)")
    size = argp.add_argument_group("model size and schedule (default: the course's)")
    for name in ("n_layer", "n_head", "n_embd", "block_size", "max_epochs", "batch_size", "num_workers"):
        size.add_argument(f"--{name}", type=int, default=None)
    size.add_argument("--learning_rate", type=float, default=None,
                      help="overrides --pretrain_lr and --finetune_lr for this stage")
    size.add_argument("--dropout", type=float, default=None,
                      help="embedding, attention and residual dropout rate (course: 0.1)")
    size.add_argument("--eval_batch_size", type=int, default=256)
    return argp


def fraction(text):
    """'7/8', '0.875' -> 0.875, for argparse."""
    try:
        num, _, den = text.partition("/")
        value = float(num) / float(den) if den else float(num)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"not a fraction: {text!r} (write e.g. 7/8 or 0.75)") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not in (0, 1]")
    return value


def parse_args(argv=None):
    argp = build_parser()
    args = argp.parse_args(argv)
    args.function = args.function or args.function_pos
    args.variant = args.variant or args.variant_pos
    args.pretrain_corpus_path = args.pretrain_corpus_path or args.corpus_pos
    if args.function not in ("pretrain", "finetune", "evaluate", "baseline"):
        argp.error("--function must be one of pretrain, finetune, evaluate, baseline")
    if args.variant not in variants.VARIANTS and args.function != "baseline":
        argp.error(f"--variant must be one of {', '.join(variants.VARIANTS)}")
    needed = {"pretrain": ["pretrain_corpus_path", "writing_params_path"],
              "finetune": ["pretrain_corpus_path", "finetune_corpus_path", "writing_params_path"],
              "evaluate": ["pretrain_corpus_path", "reading_params_path", "eval_corpus_path", "outputs_path"],
              "baseline": ["finetune_corpus_path", "eval_corpus_path"]}
    missing = [f"--{n}" for n in needed[args.function] if getattr(args, n) is None]
    if missing:
        argp.error(f"{args.function} needs {' '.join(missing)}")
    for name, low in (("n_layer", 1), ("n_head", 1), ("n_embd", 1), ("block_size", MIN_BLOCK_SIZE),
                      ("max_epochs", 1), ("batch_size", 1), ("num_workers", 0), ("eval_batch_size", 1)):
        if getattr(args, name) is not None and getattr(args, name) < low:
            argp.error(f"--{name} must be at least {low}, not {getattr(args, name)}")
    n_embd, n_head = args.n_embd or COURSE_MODEL["n_embd"], args.n_head or COURSE_MODEL["n_head"]
    if n_embd % n_head:
        argp.error(f"--n_embd ({n_embd}) must be a multiple of --n_head ({n_head})")
    if args.dropout is not None and not 0 <= args.dropout < 1:
        argp.error(f"--dropout must be in [0, 1), not {args.dropout}")
    for name in ("learning_rate", "pretrain_lr", "finetune_lr"):
        if getattr(args, name) is not None and not getattr(args, name) > 0:
            argp.error(f"--{name} must be positive, not {getattr(args, name)}")
    if args.variant in variants.VARIANTS:
        config = variants.configure(GPTConfig(0, **model_sizes(args)), args.variant, **variant_options(args))
        problem = variants.VARIANTS[args.variant].check(config)
        if problem:
            argp.error(problem)
    return args


def read_text(path, what):
    try:
        with open(path, "rb") as f:
            raw = f.read()
        text = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # as open() in text mode
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise UserError(f"{path}: {what} is a directory, not a file") from None
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise UserError(f"{path}:{line}: {what} is not UTF-8 text (byte {e.start}: "
                        f"{raw[e.start:e.start + 1]!r}); save it as UTF-8") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read {what}: {e.strerror}") from None
    if not text.strip():
        raise UserError(f"{path}: {what} is empty")
    return text


def output_dir_for(path, what):
    """Create the folder `path` will be written to; say clearly why when it cannot be."""
    if os.path.isdir(path):
        raise UserError(f"{path}: is a directory; the {what} needs a file name")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UserError(f"{path}: cannot create the {what}'s folder: part of {folder} is a file") from None
    except OSError as e:
        raise UserError(f"{path}: cannot create the {what}'s folder {folder}: {e.strerror}") from None
    if not os.access(folder, os.W_OK):
        raise UserError(f"{path}: cannot write the {what}: {folder} is not writable")
    remove_stale_tmp(path)  # `path.<pid>.tmp` of a killed run: never params, and no longer needed


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def git_revision():
    """The checkout's commit, with '-dirty' when tracked files have uncommitted changes."""
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        return subprocess.run(["git", "-C", here, "describe", "--always", "--dirty", "--abbrev=7"],
                              capture_output=True, text=True, timeout=5).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def model_sizes(args):
    """GPTConfig's sizes (block_size included): the course model's, but for those given as flags."""
    sizes = {k: getattr(args, k) or v for k, v in COURSE_MODEL.items()}
    if args.dropout is not None:
        sizes.update(embd_pdrop=args.dropout, attn_pdrop=args.dropout, resid_pdrop=args.dropout)
    return sizes


def variant_options(args):
    """The variant's initialize_*_model keywords, from the flags of the same names (e.g. --bottleneck_dim)."""
    return {k: getattr(args, k) for k in variants.VARIANTS[args.variant].options}


def build_model(args, pretrain_dataset):
    mconf = GPTConfig(pretrain_dataset.vocab_size, **model_sizes(args),
                      implementation="plain" if args.reference_path else "fast")
    return INITIALIZE[args.variant](mconf, **variant_options(args))


def configure(tconf, args, params_path, data_paths):
    """Apply the command line's schedule overrides and bookkeeping to a course TrainerConfig."""
    for name in ("max_epochs", "batch_size", "learning_rate", "num_workers"):
        if getattr(args, name) is not None:
            setattr(tconf, name, getattr(args, name))
    tconf.recipe = args.recipe
    tconf.device_batches = args.device_batches
    tconf.precision = args.precision
    tconf.compile, tconf.backend = args.compile, args.backend
    tconf.ckpt_path = params_path + ".ckpt"
    tconf.resume = args.resume
    tconf.log_path = params_path + ".log.jsonl"
    tconf.progress = not args.quiet
    tconf.run_info = {"function": args.function, "variant": args.variant, "recipe": args.recipe,
                      "truncation_cap": args.truncation_cap, "git": git_revision(),
                      "seed": args.seed, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                      "data": {p: sha256(p) for p in data_paths if p},
                      "config": {k: getattr(tconf, k) for k in ("max_epochs", "batch_size", "learning_rate",
                                                                "lr_decay", "warmup_tokens", "final_tokens",
                                                                "weight_decay", "num_workers", "compile",
                                                                "recipe")}
                                 | {"dropout": GPTConfig.resid_pdrop if args.dropout is None else args.dropout}}
    if args.tb_expt_name and distributed.is_main():
        try:
            from torch.utils.tensorboard import SummaryWriter
            tconf.tb_writer = SummaryWriter(os.path.join("expt", args.function, args.tb_expt_name))
        except ImportError:
            print("warning: tensorboard is not installed; --tb_expt_name ignored", file=sys.stderr)
    return tconf


def evaluate(args, model, pretrain_dataset):
    """Greedy answers to every question, written one per line; accuracy if answers are known."""
    load_params(model, args.reading_params_path)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device)
    rows = read_eval_rows(args.eval_corpus_path)
    vocab = pretrain_dataset.vocab
    room = model.max_positions() - 1  # the question and its MASK must leave one position to answer
    output_dir_for(args.outputs_path, "predictions file")  # inputs read: fail now, not after decoding
    prompts, dropped, unknown, hit, cut = [], 0, set(), 0, 0
    for _, question, _ in rows:
        unknown |= vocab.unknown(question)
        question, n = vocab.encodable(question)
        dropped, hit = dropped + n, hit + bool(n)
        if len(question) + 1 > room:
            question, cut = question[-(room - 1):], cut + 1
        prompts.append(vocab.encode(question + ds.MASK_CHAR))
    if dropped:
        print(f"warning: {args.eval_corpus_path}: {ds.describe_dropped(dropped, unknown, hit, len(rows))}; "
              f"every question is still answered", file=sys.stderr)
    if cut:
        print(f"warning: {args.eval_corpus_path}: {cut} question{'s' if cut != 1 else ''} longer than the "
              f"block {'were' if cut != 1 else 'was'} cut to the last {room - 1} characters", file=sys.stderr)
    mask_id = vocab.stoi[ds.MASK_CHAR]
    completions = greedy_decode(model, prompts, ANSWER_STEPS, stop_id=mask_id,
                                precision=resolve_precision(args.precision, device),
                                batch_size=args.eval_batch_size)
    predictions = [vocab.decode(c).split(ds.MASK_CHAR)[0] for c in completions]
    atomic_write_text("".join(p + "\n" for p in predictions), args.outputs_path)
    answers = [a for _, _, a in rows]
    if all(a is not None for a in answers):
        correct = sum(p == a for p, a in zip(predictions, answers))
        total = len(answers)
        print(f"Correct: {correct} out of {total}: {correct / total * 100}%")
        return {"correct": correct, "total": total, "accuracy": correct / total}
    print(f"Predictions written to {args.outputs_path}; no targets provided")
    return {"correct": None, "total": len(answers), "accuracy": None}


def read_eval_rows(path):
    """An eval file's rows: every row with an answer, or none (test inputs)."""
    rows = ds.split_rows(read_text(path, "eval file"), path)
    with_answer = [n for n, _, a in rows if a is not None]
    if with_answer and len(with_answer) < len(rows):
        n = next(n for n, _, a in rows if a is None)
        raise ds.DataError(f"{path}:{n}: no tab, but line {with_answer[0]} has 'question<TAB>answer': "
                           f"give every row an answer, or none")
    return rows


def most_common_baseline(args):
    """The accuracy of answering every question with the most common training place."""
    train = ds.split_rows(read_text(args.finetune_corpus_path, "finetuning corpus"), args.finetune_corpus_path)
    missing = next((n for n, _, a in train if a is None), None)
    if missing is not None:
        raise ds.DataError(f"{args.finetune_corpus_path}:{missing}: no tab: expected 'question<TAB>answer'")
    rows = read_eval_rows(args.eval_corpus_path)
    answers = [a for _, _, a in rows]
    if any(a is None for a in answers):
        raise UserError(f"{args.eval_corpus_path}: has no answers to score against")
    place, _ = Counter(a for _, _, a in train if a is not None).most_common(1)[0]
    correct = sum(a == place for a in answers)
    print(f"Always answering {place!r}: Correct: {correct} out of {len(answers)}: "
          f"{correct / len(answers) * 100}%")
    return {"place": place, "correct": correct, "total": len(answers), "accuracy": correct / len(answers)}


def run(args):
    if args.function == "baseline":
        return most_common_baseline(args)
    set_seed(args.seed)
    text = read_text(args.pretrain_corpus_path, "pretraining corpus")
    block_size = args.block_size or COURSE_MODEL["block_size"]
    try:
        pretrain_dataset = ds.CharCorruptionDataset(text, block_size, source=args.pretrain_corpus_path,
                                                    cap=args.truncation_cap)
    except ds.DataError:
        raise
    except ValueError as e:  # the cap does not fit the block
        raise UserError(f"--truncation_cap: {e}") from None
    if not any(len(d) >= ds.MIN_DOC_CHARS for d in pretrain_dataset.data):
        raise UserError(f"{args.pretrain_corpus_path}: no document of at least {ds.MIN_DOC_CHARS} characters")
    model = build_model(args, pretrain_dataset)

    if args.function == "evaluate":  # under torchrun, process 0 alone (decoding is not distributed)
        return evaluate(args, model, pretrain_dataset) if distributed.is_main() else None

    if args.function == "pretrain":
        tconf, trainer = pretrain(pretrain_dataset, block_size, model, pretrain_lr=args.pretrain_lr)
        data = [args.pretrain_corpus_path]
    else:
        read_text(args.finetune_corpus_path, "finetuning corpus")
        tconf, trainer = finetune(args.reading_params_path, args.finetune_corpus_path, pretrain_dataset,
                                  block_size, model, finetune_lr=args.finetune_lr)
        data = [args.pretrain_corpus_path, args.finetune_corpus_path, args.reading_params_path]
    output_dir_for(args.writing_params_path, "params file")  # every input checked: only now create it
    remove_stale_tmp(args.writing_params_path + ".ckpt")
    configure(tconf, args, args.writing_params_path, data)
    t0 = time.time()
    train(model, args.writing_params_path, trainer)
    return {"final_loss": trainer.final_loss, "seconds": time.time() - t0}


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler, `kill`): stop as on Ctrl-C, removing temporary files on the way out."""


def _terminate(signum, frame):
    raise Terminated


def main(argv=None):
    args = parse_args(argv)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None
    try:
        distributed.setup()  # under torchrun: join the other processes; process 0 alone prints
        if not distributed.is_main():
            sys.stdout = open(os.devnull, "w")
        result = run(args)
    except (UserError, ds.DataError, ParamsError, NonFiniteLoss, CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt as e:
        print("interrupted; the last written params and checkpoint are intact", file=sys.stderr)
        sys.exit(143 if isinstance(e, Terminated) else 130)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
        distributed.teardown()
    return result


if __name__ == "__main__":
    main()
