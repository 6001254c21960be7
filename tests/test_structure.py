"""The code's shape: no import cycle in the package, configs that refuse a setting they do not
have, and one home for the course model's size."""

import ast
from pathlib import Path

import pytest

from submission import GPTConfig, TrainerConfig
from submission.model import COURSE_MODEL

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "submission"


def import_graph(folder):
    """{module: the package's modules it imports}, from the source of every .py file in
    `folder`; imports inside functions count too (a lazy import still ties two modules)."""
    modules = {p.stem for p in folder.glob("*.py")} - {"__init__"}
    graph = {}
    for name in modules:
        uses = set()
        for node in ast.walk(ast.parse((folder / f"{name}.py").read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level == 1 or (node.module or "").startswith(folder.name)):
                target = (node.module or "").removeprefix(folder.name).strip(".")
                uses |= {target} if target else {a.name for a in node.names}
            elif isinstance(node, ast.Import):
                uses |= {a.name.removeprefix(folder.name + ".") for a in node.names}
        graph[name] = uses & modules
    return graph


def cycles(graph):
    """Every module from which its own imports lead back to it."""
    def reaches(start):
        seen, todo = set(), list(graph[start])
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo += graph[m]
        return seen
    return sorted(m for m in graph if m in reaches(m))


def test_the_package_has_no_import_cycle():
    graph = import_graph(PACKAGE)
    assert {"trainer", "helper", "checkpoint", "model"} <= set(graph)
    assert "checkpoint" in graph["trainer"] and "helper" not in graph["trainer"]
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_lazy_import_cycle(tmp_path):
    (tmp_path / "a.py").write_text("from .b import f\n")
    (tmp_path / "b.py").write_text("def f():\n    from . import a\n")
    (tmp_path / "c.py").write_text("from .a import g\n")
    assert import_graph(tmp_path) == {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert cycles(import_graph(tmp_path)) == ["a", "b"]


# Every keyword the course's code (all editions) and the grader give the two configs.
COURSE_GPT = dict(n_layer=4, n_head=8, n_embd=256, embd_pdrop=0.1, resid_pdrop=0.1, attn_pdrop=0.1,
                  synthesizer=False, rope=False, perceiver=True, bottleneck_dim=32)
COURSE_TRAINER = dict(max_epochs=650, batch_size=128, learning_rate=6e-3, lr_decay=True, warmup_tokens=512 * 20,
                      final_tokens=200 * 10 * 128, num_workers=4, betas=(0.9, 0.95), grad_norm_clip=1.0,
                      weight_decay=0.1, ckpt_path=None)


def test_configs_take_the_course_settings():
    config = GPTConfig(256, 128, **COURSE_GPT)
    assert all(getattr(config, k) == v for k, v in COURSE_GPT.items())
    assert (config.vocab_size, config.block_size, config.variant) == (256, 128, "perceiver")
    tconf = TrainerConfig(**COURSE_TRAINER)
    assert all(getattr(tconf, k) == v for k, v in COURSE_TRAINER.items())
    tconf.max_epochs, config.variant = 3, "rope"  # set afterwards, as the course's code and run.py do
    assert tconf.max_epochs == 3 and config.rope and not config.perceiver


@pytest.mark.parametrize("make, key, message", [
    (lambda: GPTConfig(256, 128, n_embed=512), "n_embed",
     "GPTConfig: unknown setting 'n_embed' (did you mean n_embd?)"),
    (lambda: TrainerConfig(max_epoch=3), "max_epoch",
     "TrainerConfig: unknown setting 'max_epoch' (did you mean max_epochs?)"),
    (lambda: setattr(TrainerConfig(), "learningrate", 1e-3), "learningrate",
     "TrainerConfig: unknown setting 'learningrate' (did you mean learning_rate?)"),
    (lambda: GPTConfig(256, 128, xyz=1), "xyz", "GPTConfig: unknown setting 'xyz' (its settings: attn_pdrop, "),
])
def test_an_unknown_setting_is_an_error_naming_it(make, key, message):
    with pytest.raises(TypeError) as e:
        make()
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_run_py_builds_the_course_model_by_default():
    """The course's numbers, written out: the one home (model.COURSE_MODEL) must hold them."""
    import run  # src/ is on the path (conftest.py)
    args = run.parse_args(["--function", "pretrain", "--variant", "vanilla", "--pretrain_corpus_path", "w.txt",
                           "--writing_params_path", "p.params"])
    assert run.model_sizes(args) == dict(n_layer=4, n_head=8, n_embd=256, block_size=128) == COURSE_MODEL
    args = run.parse_args(["pretrain", "vanilla", "w.txt", "--writing_params_path", "p.params", "--n_layer", "2"])
    assert run.model_sizes(args) == dict(COURSE_MODEL, n_layer=2)
