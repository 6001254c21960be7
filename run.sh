#!/usr/bin/env bash
# Every stage of the assignment, from any working directory: ./run.sh STAGE [extra run.py flags]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="$ROOT/src"
SUB="$SRC/submission"
DATA="${DATA_DIR:-$ROOT/data}"
WIKI="$DATA/wiki.txt"
TRAIN="$DATA/birth_places_train.tsv"
DEV="$DATA/birth_dev.tsv"
TEST="$DATA/birth_test_inputs.tsv"

usage() {
  cat >&2 <<'EOF'
usage: ./run.sh STAGE [extra flags for src/run.py]

main jobs:
  quickstart                          set up, then the whole experiment at a reduced scale (CPU, minutes)
  test                                set up, then the test suite and the grader
course stages (course hyperparameters; params and predictions go to src/submission/):
  vanilla_finetune_without_pretrain   (also: vanilla_finetime_without_pretrain)
  vanilla_eval_dev_without_pretrain
  vanilla_eval_test_without_pretrain
  vanilla_pretrain
  vanilla_finetune_with_pretrain
  vanilla_eval_dev_with_pretrain
  vanilla_eval_test_with_pretrain
  synthesizer_pretrain
  synthesizer_finetune_with_pretrain  (also: synthesizer_finetrain_with_pretrain)
  synthesizer_eval_dev_with_pretrain
  synthesizer_eval_test_with_pretrain
  london_baseline                     dev accuracy of always answering the most common training place
other:
  setup                               install torch, numpy, tqdm, pytest into .venv unless present
                                      (and matplotlib, optional: figures)
  data [--stats]                      regenerate data/ (byte-identical), or compare it with the course's
  explore                             numerical checks of the written part (written/README.md)
  bench                               training and evaluation speed: fast path vs plain fp32 eager
  grader [TEST_ID]                    src/grader.py
  plot RECORD.log.jsonl ... --out FIGURE.png
                                      loss curves of training runs from their records (matplotlib)
EOF
  exit 2
}

# The interpreter: $PYTHON if set and complete, else the project's .venv, else the active
# python3 if complete, else a new .venv (built from $PYTHON or python3).
setup() {
  local py="${PYTHON:-python3}" deps="import torch, numpy, tqdm, pytest"
  if [ -n "${PYTHON:-}" ] && "$PYTHON" -c "$deps" 2>/dev/null; then
    PY="$PYTHON"; return
  fi
  if [ -x "$ROOT/.venv/bin/python" ] && "$ROOT/.venv/bin/python" -c "$deps" 2>/dev/null; then
    PY="$ROOT/.venv/bin/python"; return
  fi
  if "$py" -c "$deps" 2>/dev/null; then
    PY="$py"; return
  fi
  echo "setting up $ROOT/.venv (torch, numpy, tqdm, pytest)..." >&2
  "$py" -m venv "$ROOT/.venv"
  "$ROOT/.venv/bin/python" -m pip install --quiet -r "$ROOT/requirements.txt"
  PY="$ROOT/.venv/bin/python"
}

# Optional packages (requirements-optional.txt: matplotlib, for figures) go into the
# project's .venv only, when `setup`, `quickstart` or `plot` finds them missing.  A failed
# install only means no figures: it is noted, not retried until `./run.sh setup`, and never
# stops the job.
optional() {
  local failed="$ROOT/.venv/.optional-install-failed"
  [ "$PY" = "$ROOT/.venv/bin/python" ] || return 0
  "$PY" -c "import matplotlib" 2>/dev/null && return 0
  [ "${1:-}" = retry ] || [ ! -e "$failed" ] || return 0
  echo "installing matplotlib into $ROOT/.venv (optional: figures)..." >&2
  if "$PY" -m pip install --quiet -r "$ROOT/requirements-optional.txt"; then
    rm -f "$failed"
  else
    touch "$failed"
    echo "notice: matplotlib could not be installed; jobs run without figures (./run.sh setup tries again)" >&2
  fi
}

need() {  # need FILE STAGE: a stage's input, and the stage that makes it
  if [ ! -f "$1" ]; then
    echo "error: $1 not found: run ./run.sh $2 first" >&2
    exit 1
  fi
}

runpy() { "$PY" "$SRC/run.py" "$@"; }

stage="${1:-}"
[ -n "$stage" ] || usage
shift

case "$stage" in
  setup) setup; optional retry; echo "python: $PY" ;;
  test)
    setup
    cd "$ROOT"
    "$PY" -m pytest "$@"
    (cd "$SRC" && "$PY" grader.py)
    ;;
  quickstart) setup; optional; "$PY" "$SRC/quickstart.py" "$@" ;;
  data)
    setup
    "$PY" "$ROOT/data/generate.py" "$@" ;;
  explore) setup; "$PY" "$ROOT/written/explore.py" "$@" ;;
  bench) setup; "$PY" "$SRC/bench.py" "$@" ;;
  grader) setup; cd "$SRC" && "$PY" grader.py "$@" ;;
  plot) setup; optional; "$PY" "$SRC/plots.py" "$@" ;;
  london_baseline) setup; "$PY" "$SRC/run.py" --function baseline --variant vanilla --pretrain_corpus_path "$WIKI" \
      --finetune_corpus_path "$TRAIN" --eval_corpus_path "$DEV" "$@" ;;

  vanilla_finetune_without_pretrain|vanilla_finetime_without_pretrain)
    setup
    runpy --function finetune --variant vanilla --pretrain_corpus_path "$WIKI" \
      --writing_params_path "$SUB/vanilla.model.params" --finetune_corpus_path "$TRAIN" "$@" ;;
  vanilla_eval_dev_without_pretrain)
    setup; need "$SUB/vanilla.model.params" vanilla_finetune_without_pretrain
    runpy --function evaluate --variant vanilla --pretrain_corpus_path "$WIKI" \
      --reading_params_path "$SUB/vanilla.model.params" --eval_corpus_path "$DEV" \
      --outputs_path "$SUB/vanilla.nopretrain.dev.predictions" "$@" ;;
  vanilla_eval_test_without_pretrain)
    setup; need "$SUB/vanilla.model.params" vanilla_finetune_without_pretrain
    runpy --function evaluate --variant vanilla --pretrain_corpus_path "$WIKI" \
      --reading_params_path "$SUB/vanilla.model.params" --eval_corpus_path "$TEST" \
      --outputs_path "$SUB/vanilla.nopretrain.test.predictions" "$@" ;;

  vanilla_pretrain|synthesizer_pretrain)
    setup; v="${stage%%_*}"
    runpy --function pretrain --variant "$v" --pretrain_corpus_path "$WIKI" \
      --writing_params_path "$SUB/$v.pretrain.params" "$@" ;;
  vanilla_finetune_with_pretrain|synthesizer_finetune_with_pretrain|synthesizer_finetrain_with_pretrain)
    setup; v="${stage%%_*}"
    need "$SUB/$v.pretrain.params" "${v}_pretrain"
    runpy --function finetune --variant "$v" --pretrain_corpus_path "$WIKI" \
      --reading_params_path "$SUB/$v.pretrain.params" --writing_params_path "$SUB/$v.finetune.params" \
      --finetune_corpus_path "$TRAIN" "$@" ;;
  vanilla_eval_dev_with_pretrain|synthesizer_eval_dev_with_pretrain|vanilla_eval_test_with_pretrain|synthesizer_eval_test_with_pretrain)
    setup; v="${stage%%_*}"
    case "$stage" in *_dev_*) split=dev; file="$DEV" ;; *) split=test; file="$TEST" ;; esac
    need "$SUB/$v.finetune.params" "${v}_finetune_with_pretrain"
    runpy --function evaluate --variant "$v" --pretrain_corpus_path "$WIKI" \
      --reading_params_path "$SUB/$v.finetune.params" --eval_corpus_path "$file" \
      --outputs_path "$SUB/$v.pretrain.$split.predictions" "$@" ;;
  *)
    echo "error: unknown stage '$stage'" >&2
    usage ;;
esac
