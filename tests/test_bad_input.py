"""Bad input through the command line: one clear line, a non-zero exit, no traceback, no output.

Every case of the issue's list runs `src/run.py` (a few run `run.sh` with DATA_DIR) in a
subprocess on tiny files, each in its own copy of a temporary data folder; variations of
those cases (IN_PROCESS) call run.py's main() in this process, which is the same code
without the two seconds of `import torch` per case. All cases run in one module fixture
(subprocesses two at a time, in-process cases meanwhile), and each test then checks its
own case: the message names the file, the line where one applies, and the problem; the
exit code is 1 (2 for a bad command line); stderr holds no traceback; the run wrote nothing.
"""

import builtins
import os
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from submission import GPTConfig, initialize_synthesizer_model, initialize_vanilla_model
from submission.checkpoint import ParamsError, read_params_file
from submission.dataset import MASK_CHAR, CharCorruptionDataset
from inprocess import load_cli, run_in_process  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RUN_PY = ROOT / "src" / "run.py"
RUN_SH = ROOT / "run.sh"

TINY = ["--n_layer", "1", "--n_head", "2", "--n_embd", "16", "--block_size", "64"]
SCHEDULE = ["--max_epochs", "1", "--batch_size", "8", "--num_workers", "0", "--precision", "fp32", "--quiet"]
PLACES = ["Paris", "London", "Lagos", "Rome", "Tokyo", "Berlin"]
NAMES = [f"{f} {l}" for f in ("Alice", "Bruno", "Chen", "Dara", "Elif", "Farid") for l in ("Smith", "Weber")]


def env():
    e = dict(os.environ)
    e["OMP_NUM_THREADS"] = "1"
    e["PYTHON"] = sys.executable  # run.sh: use this interpreter
    e.pop("DATA_DIR", None)
    return e


def rows(people, answers=True):
    return "".join(f"Where was {n} born?" + (f"\t{p}" if answers else "") + "\n" for n, p in people)


def tiny_params(path, variant, text, **sizes):
    config = GPTConfig(CharCorruptionDataset(text, 64).vocab_size, 64,
                       **{"n_layer": 1, "n_head": 2, "n_embd": 16, **sizes})
    torch.manual_seed(0)
    model = (initialize_vanilla_model if variant == "vanilla" else initialize_synthesizer_model)(config)
    torch.save(model.state_dict(), path)


def write_files(d):
    rng = random.Random(0)
    people = [(n, rng.choice(PLACES)) for n in NAMES]
    wiki = "\n".join(f"{n} was born in {p} . Where was {n} born? In {p}, later {rng.choice(PLACES)} ."
                     for n, p in people)
    files = {
        "wiki.txt": wiki,
        "train.tsv": rows(people[:8]),
        "dev.tsv": rows(people[8:]),
        "test_inputs.tsv": rows(people[8:], answers=False),
        "empty.txt": "",
        "blank.txt": "\n \n\n",
        "short_docs.txt": "ab\n\n\nabc\n" + wiki + "\n\nxy\n",
        "all_short.txt": "ab\n\nabc\n",
        "reserved.txt": "Alice was born in Paris .\nBruno " + MASK_CHAR + " Rome .\n",
        "notab.tsv": "Where was Alice Smith born?\tParis\nWhere was Bruno Smith born? London\n",
        "extratab.tsv": "Where was Alice Smith born?\tParis\nWhere was Bruno Smith born?\tLondon\tUK\n",
        "emptyrow.tsv": "Where was Alice Smith born?\tParis\n\nWhere was Bruno Smith born?\tLondon\n",
        "mixed.tsv": "Where was Alice Smith born?\tParis\nWhere was Bruno Smith born?\n",
        "emptyanswer.tsv": "Where was Alice Smith born?\tParis\nWhere was Bruno Smith born?\t\n",
        "crlf_blank_tail.tsv": rows(people[8:]).replace("\n", "\r\n") + "\r\n\n",
        "oov.tsv": "Where was Zoë Ünal born?\tKraków\nWhere was Alice Smith born?\tParis",  # no final newline
        "long.tsv": "Where was " + "Alice Smith " * 8 + "born?\tParis\nWhere was Chen Weber born?\tRome\n",
    }
    for name, text in files.items():
        (d / name).write_text(text, encoding="utf-8", newline="")
    (d / "latin1.txt").write_bytes(wiki.encode("utf-8") + "\nZoë\n".encode("latin-1"))
    (d / "folder").mkdir()
    tiny_params(d / "vanilla.params", "vanilla", wiki)
    tiny_params(d / "synth.params", "synthesizer", wiki)
    tiny_params(d / "other_vocab.params", "vanilla", wiki + "§¶")
    good = (d / "vanilla.params").read_bytes()
    (d / "truncated.params").write_bytes(good[:len(good) // 2])
    (d / "zero.params").write_bytes(b"")
    (d / "text.params").write_text("not a model\n")
    torch.save({"model": torch.load(d / "vanilla.params"), "optimizer": {}, "epoch": 0}, d / "x.params.ckpt")
    return people


def py(function, variant="vanilla", *extra):
    return [sys.executable, str(RUN_PY), "--function", function, "--variant", variant, *TINY, *SCHEDULE, *extra]


def pretrain(corpus, out="out/p.params", *extra):
    return py("pretrain", "vanilla", "--pretrain_corpus_path", corpus, "--writing_params_path", out, *extra)


def finetune(tsv, out="out/f.params", *extra, corpus="wiki.txt"):
    return py("finetune", "vanilla", "--pretrain_corpus_path", corpus, "--finetune_corpus_path", tsv,
              "--writing_params_path", out, *extra)


def evaluate(tsv, params="vanilla.params", out="out/pred.txt", variant="vanilla", *extra, corpus="wiki.txt"):
    return py("evaluate", variant, "--pretrain_corpus_path", corpus, "--reading_params_path", params,
              "--eval_corpus_path", tsv, "--outputs_path", out, *extra)


def sh(stage, *extra):
    return ["bash", str(RUN_SH), stage, *TINY, *SCHEDULE, *extra]


# name: (command, expected substrings of the error line, exit code, extra environment)
# Every error case runs in its own folder, and must leave it exactly as it found it.
ERRORS = {
    # files that are missing, unreadable, empty or of the wrong kind
    "corpus_missing": (pretrain("nope.txt"), ["nope.txt: pretraining corpus not found"]),
    "corpus_is_folder": (pretrain("folder"), ["folder: pretraining corpus is a directory"]),
    "corpus_not_utf8": (pretrain("latin1.txt"), ["latin1.txt:13: pretraining corpus is not UTF-8"]),
    "corpus_empty": (pretrain("empty.txt"), ["empty.txt: pretraining corpus is empty"]),
    "corpus_blank_lines_only": (pretrain("blank.txt"), ["blank.txt: pretraining corpus is empty"]),
    "corpus_only_short_docs": (pretrain("all_short.txt"), ["all_short.txt: no document of at least 4 characters"]),
    "corpus_reserved_char": (pretrain("reserved.txt"), ["reserved.txt:2: contains '⁇'", "reserves"]),
    "finetune_file_missing": (finetune("nope.tsv"), ["nope.tsv: finetuning corpus not found"]),
    "finetune_file_empty": (finetune("empty.txt"), ["empty.txt: finetuning corpus is empty"]),
    "eval_file_missing": (evaluate("nope.tsv"), ["nope.tsv: eval file not found"]),
    "eval_file_empty": (evaluate("blank.txt"), ["blank.txt: eval file is empty"]),
    "params_missing_evaluate": (evaluate("dev.tsv", "nope.params"), ["nope.params: params file not found"]),
    "params_missing_finetune": (finetune("train.tsv", "out/f.params", "--reading_params_path", "nope.params"),
                                ["nope.params: params file not found"]),
    "output_is_folder": (evaluate("dev.tsv", "vanilla.params", "folder"),
                         ["folder: is a directory; the predictions file needs a file name"]),
    "output_under_a_file": (pretrain("wiki.txt", "wiki.txt/p.params"),
                            ["wiki.txt/p.params: cannot create the params file's folder", "is a file"]),
    # TSV rows
    "finetune_row_without_tab": (finetune("notab.tsv"), ["notab.tsv:2: no tab: expected 'question<TAB>answer'"]),
    "finetune_row_extra_tab": (finetune("extratab.tsv"), ["extratab.tsv:2: expected 'question<TAB>answer', "
                                                          "found 2 tabs"]),
    "finetune_empty_row": (finetune("emptyrow.tsv"), ["emptyrow.tsv:2: empty row"]),
    "finetune_empty_answer": (finetune("emptyanswer.tsv"), ["emptyanswer.tsv:2: empty answer"]),
    "finetune_question_too_long": (finetune("long.tsv"), ["long.tsv:1: question and answer are 118 characters",
                                                          "the block holds 64"]),
    "eval_row_extra_tab": (evaluate("extratab.tsv"), ["extratab.tsv:2: expected 'question<TAB>answer', "
                                                      "found 2 tabs"]),
    "eval_empty_row": (evaluate("emptyrow.tsv"), ["emptyrow.tsv:2: empty row"]),
    "eval_some_rows_without_answer": (evaluate("mixed.tsv"), ["mixed.tsv:2: no tab, but line 1 has",
                                                              "every row an answer, or none"]),
    # params that do not fit, or are damaged
    "params_other_variant": (evaluate("dev.tsv", "synth.params"),
                             ["synth.params: params do not fit this model: it is a synthesizer model, "
                              "this run builds vanilla"]),
    "params_other_variant_finetune": (finetune("train.tsv", "out/f.params", "--reading_params_path", "synth.params"),
                                      ["synth.params: params do not fit", "it is a synthesizer model"]),
    "params_vanilla_into_synthesizer": (evaluate("dev.tsv", "vanilla.params", "out/pred.txt", "synthesizer"),
                                        ["vanilla.params: params do not fit", "it is a vanilla model"]),
    "params_other_vocabulary": (evaluate("dev.tsv", "other_vocab.params"),
                                ["other_vocab.params: params do not fit", "vocabulary size"]),
    "params_other_model_size": (evaluate("dev.tsv", "vanilla.params", "out/pred.txt", "vanilla",
                                         "--n_embd", "32", "--n_layer", "2"),
                                ["vanilla.params: params do not fit this model: embedding width 16 vs 32 here; "
                                 "1 layers vs 2 here"]),
    "params_other_block_size": (evaluate("dev.tsv", "vanilla.params", "out/pred.txt", "vanilla",
                                         "--block_size", "32"), ["block size 64 vs 32 here"]),
    "params_truncated": (evaluate("dev.tsv", "truncated.params"),
                         ["truncated.params: not a readable params file: truncated or corrupt"]),
    "params_empty": (evaluate("dev.tsv", "zero.params"), ["zero.params: params file is empty (0 bytes)"]),
    "params_not_torch": (evaluate("dev.tsv", "text.params"), ["text.params: not a readable params file"]),
    "params_is_a_checkpoint": (evaluate("dev.tsv", "x.params.ckpt"),
                               ["x.params.ckpt: is a training checkpoint, not a params file"]),
    # training that goes wrong
    "non_finite_loss": (pretrain("wiki.txt", "out/p.params", "--learning_rate", "1e30"),
                        ["loss became", "at step", "(epoch 1)", "no params were written",
                         "no checkpoint was written yet"]),
    # through run.sh, with DATA_DIR
    "run_sh_missing_data_dir": (sh("vanilla_pretrain"), ["nowhere/wiki.txt: pretraining corpus not found"],
                                {"DATA_DIR": "nowhere"}),
    "run_sh_finetune_row_without_tab": (sh("vanilla_finetune_without_pretrain"),
                                        ["sh_data/birth_places_train.tsv:2: no tab"], {"DATA_DIR": "sh_data"}),
    "run_sh_baseline_eval_extra_tab": (sh("london_baseline"), ["sh_dev/birth_dev.tsv:2: expected "
                                                               "'question<TAB>answer', found 2 tabs"],
                                       {"DATA_DIR": "sh_dev"}),
}
# Wrong command lines: argparse's usage, then one error line, exit 2.
USAGE_ERRORS = {
    "block_too_small": (pretrain("wiki.txt", "out/p.params", "--block_size", "8"), ["--block_size must be at least 9"]),
    "heads_do_not_divide": (pretrain("wiki.txt", "out/p.params", "--n_head", "3"),
                            ["--n_embd (16) must be a multiple of --n_head (3)"]),
    "negative_learning_rate": (pretrain("wiki.txt", "out/p.params", "--learning_rate", "-1"),
                               ["--learning_rate must be positive"]),
    "dropout_of_one": (pretrain("wiki.txt", "out/p.params", "--dropout", "1"), ["--dropout must be in [0, 1), not 1.0"]),
}
# Inputs that are fine, or fixable with a warning: exit 0.
OK = {
    "corpus_with_short_docs": pretrain("short_docs.txt", "new/deeper/p.params", "--tb_expt_name", "x"),
    "finetune_unknown_characters": finetune("oov.tsv"),
    "eval_crlf_and_blank_tail": evaluate("crlf_blank_tail.tsv", "vanilla.params", "new/pred.txt"),
    "eval_unknown_characters": evaluate("oov.tsv"),
    "eval_test_inputs_without_answers": evaluate("test_inputs.tsv"),
    "eval_question_too_long_vanilla": evaluate("long.tsv"),
    "eval_question_too_long_synthesizer": evaluate("long.tsv", "synth.params", "out/pred.txt", "synthesizer"),
}


# Variations, run in this process (see the module docstring).
IN_PROCESS = {"corpus_blank_lines_only", "corpus_reserved_char", "finetune_file_empty", "params_missing_finetune",
              "output_is_folder", "output_under_a_file", "finetune_empty_answer", "eval_row_extra_tab",
              "eval_empty_row", "eval_some_rows_without_answer", "params_other_variant_finetune",
              "params_vanilla_into_synthesizer", "params_other_block_size", "params_empty", "params_not_torch",
              "params_is_a_checkpoint", "corpus_only_short_docs", "heads_do_not_divide", "negative_learning_rate",
              "eval_test_inputs_without_answers", "eval_question_too_long_synthesizer", "corpus_is_folder",
              "eval_file_empty"}


def snapshot(folder):
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Run every case (two at a time), each in a fresh copy of the data folder."""
    base = tmp_path_factory.mktemp("bad_input")
    source = base / "_source"
    source.mkdir()
    write_files(source)
    sh_data = source / "sh_data"
    sh_data.mkdir()
    (sh_data / "wiki.txt").write_text((source / "wiki.txt").read_text(encoding="utf-8"), encoding="utf-8")
    (sh_data / "birth_places_train.tsv").write_text((source / "notab.tsv").read_text(encoding="utf-8"),
                                                    encoding="utf-8")
    sh_dev = source / "sh_dev"  # a good training file, a bad dev file
    sh_dev.mkdir()
    (sh_dev / "birth_places_train.tsv").write_text((source / "train.tsv").read_text(encoding="utf-8"),
                                                   encoding="utf-8")
    (sh_dev / "birth_dev.tsv").write_text((source / "extratab.tsv").read_text(encoding="utf-8"),
                                          encoding="utf-8")

    cases = {**{k: v[0] for k, v in ERRORS.items()}, **{k: v[0] for k, v in USAGE_ERRORS.items()}, **OK}
    extra_env = {k: v[2] for k, v in ERRORS.items() if len(v) > 2}

    def prepare(name):
        folder = base / name
        subprocess.run(["cp", "-a", str(source), str(folder)], check=True)
        return folder, snapshot(folder)

    def one(name):
        folder, before = prepare(name)
        e = {**env(), **{k: str(folder / v) if k == "DATA_DIR" else v for k, v in extra_env.get(name, {}).items()}}
        r = subprocess.run(cases[name], capture_output=True, text=True, cwd=folder, env=e, timeout=300)
        return name, (r, folder, before, snapshot(folder))

    cli = load_cli()
    with ThreadPoolExecutor(max_workers=2) as pool:
        running = pool.map(one, [name for name in cases if name not in IN_PROCESS])
        done = {}
        for name in IN_PROCESS:
            folder, before = prepare(name)
            done[name] = (run_in_process(cli, cases[name][2:], folder), folder, before, snapshot(folder))
        return {**done, **dict(running)}


def error_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize("name", ERRORS)
def test_bad_input_is_one_clear_line(name, results):
    r, folder, before, after = results[name]
    expected = ERRORS[name][1]
    assert r.returncode == 1, f"{name}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "Traceback" not in r.stderr, r.stderr
    lines = error_lines(r.stderr)
    assert len(lines) == 1 and r.stderr.strip().splitlines()[-1] == lines[0], r.stderr
    assert all(s in lines[0] for s in expected), f"{name}: {lines[0]!r} lacks one of {expected}"
    # nothing written: no params, checkpoint, predictions or temporary file, and no new folder
    # (the non-finite loss leaves its record, the run log, and nothing else)
    new = set(after) - set(before)
    if name == "non_finite_loss":
        assert new == {"out", "out/p.params.log.jsonl"}, new
    else:
        assert not new, f"{name} left {new}"
    assert all(after[k] == before[k] for k in before), f"{name} modified a file"


@pytest.mark.parametrize("name", USAGE_ERRORS)
def test_bad_command_line_is_a_usage_error(name, results):
    r, folder, before, after = results[name]
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert r.stderr.startswith("usage: ") and ".py: error: " in last, r.stderr
    assert all(s in last for s in USAGE_ERRORS[name][1]), last
    assert set(after) == set(before)


@pytest.mark.parametrize("name", OK)
def test_fixable_input_runs(name, results):
    r, folder, before, after = results[name]
    assert r.returncode == 0, f"{name}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert "Traceback" not in r.stderr and not error_lines(r.stderr)
    assert not [k for k in after if k.endswith(".tmp")]


def test_output_folder_is_created_and_tensorboard_is_optional(results):
    r, folder, _, _ = results["corpus_with_short_docs"]
    assert (folder / "new" / "deeper" / "p.params").is_file()
    try:
        import torch.utils.tensorboard  # noqa: F401
    except ImportError:
        assert "warning: tensorboard is not installed; --tb_expt_name ignored" in r.stderr


def predictions(folder, path="out/pred.txt"):
    return (folder / path).read_text(encoding="utf-8").split("\n")[:-1]


def test_trailing_newlines_and_crlf_are_fine(results):
    r, folder, _, _ = results["eval_crlf_and_blank_tail"]
    assert len(predictions(folder, "new/pred.txt")) == 4  # four rows; the blank tail is not a row
    assert "Correct:" in r.stdout and "out of 4" in r.stdout
    r, folder, _, _ = results["finetune_unknown_characters"]  # oov.tsv has no final newline
    assert (folder / "out" / "f.params").is_file()


def test_eval_unknown_characters_warn_once_and_answer_everything(results):
    r, folder, _, _ = results["eval_unknown_characters"]
    warnings = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: oov.tsv: dropped 3 characters not in the pretraining vocabulary "
                        "(3 distinct: 'Z', 'Ü', 'ë') from 1 of 2 rows; every question is still answered"], warnings
    assert len(predictions(folder)) == 2


def test_finetune_unknown_characters_are_summarised(results):
    r, folder, _, _ = results["finetune_unknown_characters"]
    warnings = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, r.stderr
    assert "oov.tsv: dropped" in warnings[0] and "from 1 of 2 rows" in warnings[0]
    assert "'ó'" in warnings[0] and "training on the rest of each row" in warnings[0]
    assert (folder / "out" / "f.params").is_file()


def test_test_inputs_without_answers_are_answered(results):
    r, folder, _, _ = results["eval_test_inputs_without_answers"]
    assert "no targets provided" in r.stdout
    assert len(predictions(folder)) == 4


@pytest.mark.parametrize("variant,keep", [("vanilla", 62), ("synthesizer", 61)])
def test_long_questions_are_cut_in_evaluation(variant, keep, results):
    r, folder, _, _ = results[f"eval_question_too_long_{variant}"]
    assert (f"warning: long.tsv: 1 question longer than the block was cut to the last {keep} characters"
            in r.stderr), r.stderr
    assert len(predictions(folder)) == 2


def test_short_documents_are_counted(results):
    r, folder, _, _ = results["corpus_with_short_docs"]
    assert "7 of " in r.stdout and "documents are shorter than 4 characters (empty lines included)" in r.stdout, r.stdout
    assert (folder / "new" / "deeper" / "p.params").is_file()


def test_unreadable_files_are_named(tmp_path, monkeypatch, capsys):
    """Permission errors (a chmod cannot produce them for root, so they are simulated)."""
    cli = load_cli()
    corpus, params = tmp_path / "wiki.txt", tmp_path / "p.params"
    corpus.write_text("Alice was born in Paris .\n", encoding="utf-8")
    tiny_params(params, "vanilla", corpus.read_text(encoding="utf-8"))
    real_open = builtins.open

    def denied(path, *args, **kwargs):
        if str(path) in (str(corpus), str(params)):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", denied)
    with pytest.raises(cli.UserError, match=f"^{corpus}: cannot read pretraining corpus: Permission denied$"):
        cli.read_text(str(corpus), "pretraining corpus")
    with pytest.raises(ParamsError, match=f"^{params}: cannot read params file: Permission denied$"):
        read_params_file(str(params))
