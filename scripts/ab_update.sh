#!/usr/bin/env bash
# A/B of the update's speed between revisions, in one device call.
#   here:   bash scripts/ab_update.sh prepare NAME=REV [NAME=REV ...]   (git revisions -> ab/NAME/src)
#   device: bash scripts/ab_update.sh run NAME [NAME ...]               (run with carry [".whl", "ab"])
# NAME "work" is the working tree's src and needs no prepare. Every variant runs the working
# tree's benchmarks/bench_train.py (defaults only, no SB3) in its own process; later variants
# reuse the compile cache, so put a throwaway or the baseline first. JSON lands in $OUT/ab_NAME.json.
# MODES (default compiled_bf16) picks bench_train's modes, e.g. MODES="compiled_bf16 triton_both".
set -uo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in
  prepare)
    shift
    for spec in "$@"; do
      name=${spec%%=*} rev=${spec#*=}
      rm -rf "ab/$name" && mkdir -p "ab/$name" && git archive "$rev" src | tar -x -C "ab/$name" || exit 1
      echo "ab/$name <- $(git rev-parse --short "$rev")"
    done ;;
  run)
    shift
    OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/site
    python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl || exit 1
    export PYTHONUNBUFFERED=1
    for name in "$@"; do
      src=src; [ "$name" != work ] && src=ab/$name/src
      PYTHONPATH=/tmp/site:$src timeout 170 python3 benchmarks/bench_train.py --device cuda \
          --modes ${MODES:-compiled_bf16} --skip-sb3 --collect-steps 16 --out "$OUT/ab_$name.json" \
          2> "$OUT/ab_$name.err" > /dev/null
      echo "== $name"; grep -E "update median|collect [0-9]|Error" "$OUT/ab_$name.err" | tail -3
    done ;;
  *) echo "usage: $0 prepare NAME=REV ... | run NAME ..."; exit 2 ;;
esac
