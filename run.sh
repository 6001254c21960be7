#!/usr/bin/env bash
# Every stage of the assignment, from any working directory: ./run.sh STAGE [extra run.py flags]
# DATA_DIR: the data folder (default data/); OUT_DIR: where stages write (default src/submission/).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="$ROOT/src"
SUB="${OUT_DIR:-$SRC/submission}"  # where the course stages write params and predictions
DATA="${DATA_DIR:-$ROOT/data}"
WIKI="$DATA/wiki.txt"
TRAIN="$DATA/birth_places_train.tsv"
DEV="$DATA/birth_dev.tsv"
TEST="$DATA/birth_test_inputs.tsv"

# The attention variants, as in src/submission/variants.py (a test keeps the two equal);
# each has the stages <variant>_pretrain, _finetune_with_pretrain, _eval_{dev,test}_with_pretrain.
VARIANTS="vanilla synthesizer rope perceiver"

usage() {
  {
    cat <<'EOF'
usage: ./run.sh STAGE [extra flags for src/run.py]

main jobs:
  quickstart                          set up, then the whole experiment at a reduced scale (CPU, minutes)
  test                                set up, then the test suite and the grader
  reproduce [--estimate]              every variant's course stages, then the course's results table
                                      (the full schedule: hours on a CPU; finished stages are skipped)
course stages (course hyperparameters; params and predictions go to src/submission/):
  vanilla_finetune_without_pretrain   (also: vanilla_finetime_without_pretrain)
  vanilla_eval_dev_without_pretrain
  vanilla_eval_test_without_pretrain
EOF
    for v in $VARIANTS; do
      printf '  %-35s %s\n' "${v}_pretrain" "" "${v}_finetune_with_pretrain" \
        "$([ "$v" = synthesizer ] && echo "(also: synthesizer_finetrain_with_pretrain)")" \
        "${v}_eval_dev_with_pretrain" "" "${v}_eval_test_with_pretrain" ""
    done
    cat <<'EOF'
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
environment:
  TORCHRUN="--standalone --nproc_per_node=N"   course stages under torchrun (data-parallel, N processes)
EOF
  } | sed 's/ *$//' >&2
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

# TORCHRUN="--nproc_per_node=2" (torchrun's own flags) runs every run.py stage under torchrun
# with this interpreter: data-parallel training, process 0 writing (docs/speed.md: several GPUs).
runpy() {
  if [ -n "${TORCHRUN:-}" ]; then
    # shellcheck disable=SC2086  # the flags split into words on purpose
    "$PY" -m torch.distributed.run $TORCHRUN "$SRC/run.py" "$@"
  else
    "$PY" "$SRC/run.py" "$@"
  fi
}

stage="${1:-}"
[ -n "$stage" ] || usage
shift
case "$stage" in  # the course handouts' misspellings
  vanilla_finetime_without_pretrain) stage=vanilla_finetune_without_pretrain ;;
  synthesizer_finetrain_with_pretrain) stage=synthesizer_finetune_with_pretrain ;;
esac

# A stage of the pretrained pipeline: <variant>_<step> with a known variant.
variant_stage() {
  v="${stage%%_*}" step="${stage#*_}"
  case " $VARIANTS " in *" $v "*) ;; *) return 1 ;; esac
  case "$step" in pretrain|finetune_with_pretrain|eval_dev_with_pretrain|eval_test_with_pretrain) return 0 ;; esac
  return 1
}

if variant_stage; then
  setup
  case "$step" in
    pretrain)
      runpy --function pretrain --variant "$v" --pretrain_corpus_path "$WIKI" \
        --writing_params_path "$SUB/$v.pretrain.params" "$@" ;;
    finetune_with_pretrain)
      need "$SUB/$v.pretrain.params" "${v}_pretrain"
      runpy --function finetune --variant "$v" --pretrain_corpus_path "$WIKI" \
        --reading_params_path "$SUB/$v.pretrain.params" --writing_params_path "$SUB/$v.finetune.params" \
        --finetune_corpus_path "$TRAIN" "$@" ;;
    eval_*)
      case "$step" in eval_dev_*) split=dev; file="$DEV" ;; *) split=test; file="$TEST" ;; esac
      need "$SUB/$v.finetune.params" "${v}_finetune_with_pretrain"
      runpy --function evaluate --variant "$v" --pretrain_corpus_path "$WIKI" \
        --reading_params_path "$SUB/$v.finetune.params" --eval_corpus_path "$file" \
        --outputs_path "$SUB/$v.pretrain.$split.predictions" "$@" ;;
  esac
  exit
fi

case "$stage" in
  setup) setup; optional retry; echo "python: $PY" ;;
  test)
    setup
    optional  # so that the figure tests draw, where matplotlib can be installed
    cd "$ROOT"
    "$PY" -m pytest "$@"
    (cd "$SRC" && "$PY" grader.py)
    ;;
  quickstart) setup; optional; "$PY" "$SRC/quickstart.py" "$@" ;;
  reproduce) setup; optional; "$PY" "$SRC/reproduce.py" "$@" ;;
  data)
    setup
    "$PY" "$ROOT/data/generate.py" "$@" ;;
  explore) setup; "$PY" "$ROOT/written/explore.py" "$@" ;;
  bench) setup; "$PY" "$SRC/bench.py" "$@" ;;
  grader) setup; cd "$SRC" && "$PY" grader.py "$@" ;;
  plot) setup; optional; "$PY" "$SRC/plots.py" "$@" ;;
  london_baseline) setup; "$PY" "$SRC/run.py" --function baseline --variant vanilla --pretrain_corpus_path "$WIKI" \
      --finetune_corpus_path "$TRAIN" --eval_corpus_path "$DEV" "$@" ;;

  vanilla_finetune_without_pretrain)
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

  *)
    echo "error: unknown stage '$stage'" >&2
    usage ;;
esac
