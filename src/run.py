"""Pretrain, finetune or evaluate the course's GPT from the command line.

    python src/run.py --function pretrain --variant vanilla --pretrain_corpus_path data/wiki.txt \\
        --writing_params_path vanilla.pretrain.params

The model and schedule are the course's (4 layers, 8 heads, 256 wide, block 128); the
size and schedule flags exist for tests and the quick preset, and default to the course.
Errors a user can cause are one line on stderr and exit code 1.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from collections import Counter

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from submission import dataset as ds  # noqa: E402
from submission.helper import (ParamsError, finetune, initialize_synthesizer_model,  # noqa: E402
                               initialize_vanilla_model, load_params, pretrain, train)
from submission.model import GPTConfig  # noqa: E402
from submission.trainer import NonFiniteLoss  # noqa: E402
from submission.utils import (atomic_write_text, evaluate_places, greedy_decode,  # noqa: E402
                              resolve_precision, set_seed)

COURSE_MODEL = dict(n_layer=4, n_head=8, n_embd=256)
BLOCK_SIZE = 128
ANSWER_STEPS = 32  # characters the course samples after the question
INITIALIZE = {"vanilla": initialize_vanilla_model, "synthesizer": initialize_synthesizer_model}


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
    argp.add_argument("--variant", choices=list(INITIALIZE))
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
    argp.add_argument("--resume", action="store_true", help="continue from the checkpoint next to the params")
    argp.add_argument("--tb_expt_name", default=None, help="TensorBoard run name (if tensorboard is installed)")
    argp.add_argument("--quiet", action="store_true", help="no progress bars")
    size = argp.add_argument_group("model size and schedule (default: the course's)")
    for name in ("n_layer", "n_head", "n_embd", "block_size", "max_epochs", "batch_size", "num_workers"):
        size.add_argument(f"--{name}", type=int, default=None)
    size.add_argument("--learning_rate", type=float, default=None)
    size.add_argument("--eval_batch_size", type=int, default=256)
    return argp


def parse_args(argv=None):
    argp = build_parser()
    args = argp.parse_args(argv)
    args.function = args.function or args.function_pos
    args.variant = args.variant or args.variant_pos
    args.pretrain_corpus_path = args.pretrain_corpus_path or args.corpus_pos
    if args.function not in ("pretrain", "finetune", "evaluate", "baseline"):
        argp.error("--function must be one of pretrain, finetune, evaluate, baseline")
    if args.variant not in INITIALIZE and args.function != "baseline":
        argp.error(f"--variant must be one of {', '.join(INITIALIZE)}")
    needed = {"pretrain": ["pretrain_corpus_path", "writing_params_path"],
              "finetune": ["pretrain_corpus_path", "finetune_corpus_path", "writing_params_path"],
              "evaluate": ["pretrain_corpus_path", "reading_params_path", "eval_corpus_path", "outputs_path"],
              "baseline": ["finetune_corpus_path", "eval_corpus_path"]}
    missing = [f"--{n}" for n in needed[args.function] if getattr(args, n) is None]
    if missing:
        argp.error(f"{args.function} needs {' '.join(missing)}")
    return args


def read_text(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise UserError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise UserError(f"{path}: {what} is a directory, not a file") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: {what} is not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read {what}: {e.strerror}") from None
    if not text.strip():
        raise UserError(f"{path}: {what} is empty")
    return text


def output_dir_for(path):
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def git_revision():
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        return subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def build_model(args, pretrain_dataset):
    sizes = {k: getattr(args, k) or v for k, v in COURSE_MODEL.items()}
    mconf = GPTConfig(pretrain_dataset.vocab_size, pretrain_dataset.block_size, **sizes)
    return INITIALIZE[args.variant](mconf)


def configure(tconf, args, params_path, data_paths):
    """Apply the command line's schedule overrides and bookkeeping to a course TrainerConfig."""
    for name in ("max_epochs", "batch_size", "learning_rate", "num_workers"):
        if getattr(args, name) is not None:
            setattr(tconf, name, getattr(args, name))
    tconf.precision = args.precision
    tconf.compile, tconf.backend = args.compile, args.backend
    tconf.ckpt_path = params_path + ".ckpt"
    tconf.resume = args.resume
    tconf.log_path = params_path + ".log.jsonl"
    tconf.progress = not args.quiet
    tconf.run_info = {"function": args.function, "variant": args.variant, "git": git_revision(),
                      "seed": args.seed, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                      "data": {p: sha256(p) for p in data_paths if p},
                      "config": {k: getattr(tconf, k) for k in ("max_epochs", "batch_size", "learning_rate",
                                                                "lr_decay", "warmup_tokens", "final_tokens",
                                                                "weight_decay", "num_workers", "compile")}}
    if args.tb_expt_name:
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
    rows = ds.split_rows(read_text(args.eval_corpus_path, "eval file"), args.eval_corpus_path)
    vocab = pretrain_dataset.vocab
    room = model.max_positions() - 1  # the question and its MASK must leave one position to answer
    prompts, dropped, cut = [], 0, 0
    for _, question, _ in rows:
        question, n = vocab.encodable(question)
        dropped += n
        if len(question) + 1 > room:
            question, cut = question[-(room - 1):], cut + 1
        prompts.append(vocab.encode(question + ds.MASK_CHAR))
    if dropped:
        print(f"warning: {args.eval_corpus_path}: dropped {dropped} characters not in the pretraining "
              f"vocabulary; every question is still answered", file=sys.stderr)
    if cut:
        print(f"warning: {args.eval_corpus_path}: {cut} questions longer than the block were cut to "
              f"their last {room - 1} characters", file=sys.stderr)
    mask_id = vocab.stoi[ds.MASK_CHAR]
    completions = greedy_decode(model, prompts, ANSWER_STEPS, stop_id=mask_id,
                                precision=resolve_precision(args.precision, device),
                                batch_size=args.eval_batch_size)
    predictions = [vocab.decode(c).split(ds.MASK_CHAR)[0] for c in completions]
    output_dir_for(args.outputs_path)
    atomic_write_text("".join(p + "\n" for p in predictions), args.outputs_path)
    answers = [a for _, _, a in rows]
    if all(a is not None for a in answers):
        correct = sum(p == a for p, a in zip(predictions, answers))
        total = len(answers)
        print(f"Correct: {correct} out of {total}: {correct / total * 100}%")
        return {"correct": correct, "total": total, "accuracy": correct / total}
    print(f"Predictions written to {args.outputs_path}; no targets provided")
    return {"correct": None, "total": len(answers), "accuracy": None}


def most_common_baseline(args):
    """The accuracy of answering every question with the most common training place."""
    train = ds.split_rows(read_text(args.finetune_corpus_path, "finetuning corpus"), args.finetune_corpus_path)
    rows = ds.split_rows(read_text(args.eval_corpus_path, "eval file"), args.eval_corpus_path)
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
    pretrain_dataset = ds.CharCorruptionDataset(text, args.block_size or BLOCK_SIZE)
    if len(pretrain_dataset) == 0:
        raise UserError(f"{args.pretrain_corpus_path}: no document of at least {ds.MIN_DOC_CHARS} characters")
    model = build_model(args, pretrain_dataset)
    block_size = pretrain_dataset.block_size

    if args.function == "evaluate":
        return evaluate(args, model, pretrain_dataset)

    output_dir_for(args.writing_params_path)
    if args.function == "pretrain":
        tconf, trainer = pretrain(pretrain_dataset, block_size, model)
        data = [args.pretrain_corpus_path]
    else:
        read_text(args.finetune_corpus_path, "finetuning corpus")
        if args.reading_params_path is not None and not os.path.exists(args.reading_params_path):
            raise UserError(f"{args.reading_params_path}: params file not found")
        tconf, trainer = finetune(args.reading_params_path, args.finetune_corpus_path, pretrain_dataset,
                                  block_size, model)
        data = [args.pretrain_corpus_path, args.finetune_corpus_path, args.reading_params_path]
    configure(tconf, args, args.writing_params_path, data)
    t0 = time.time()
    train(model, args.writing_params_path, trainer)
    return {"final_loss": trainer.final_loss, "seconds": time.time() - t0}


def main(argv=None):
    args = parse_args(argv)
    try:
        result = run(args)
    except (UserError, ds.DataError, ParamsError, NonFiniteLoss) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("interrupted; the last written params and checkpoint are intact", file=sys.stderr)
        sys.exit(130)
    return result


if __name__ == "__main__":
    main()
