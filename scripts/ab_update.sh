#!/usr/bin/env bash
# A/B of the update's speed between revisions, in one device call.
#   here:   bash scripts/ab_update.sh prepare NAME=REV [NAME=REV ...]  (revisions -> ab/NAME/{src,benchmarks})
#   device: bash scripts/ab_update.sh run NAME[:MODE][@VAR=VALUE] [...] (carry [".whl", "ab"])
# NAME "work" is the working tree and needs no prepare. Each variant runs its own
# benchmarks/bench_train.py on its own src, in mode MODE (default compiled_bf16, the defaults)
# without SB3, in its own process, with the environment variable VAR set to VALUE if given
# (e.g. work@CUDA_DEVICE_MAX_CONNECTIONS=32); later variants reuse the compile cache, so put a
# throwaway or the baseline first. JSON lands in $OUT/ab_NAME[_MODE][_VAR].json.
set -uo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in
  prepare)
    shift
    for spec in "$@"; do
      name=${spec%%=*} rev=${spec#*=}
      rm -rf "ab/$name" && mkdir -p "ab/$name" \
          && git archive "$rev" src benchmarks | tar -x -C "ab/$name" || exit 1
      echo "ab/$name <- $(git rev-parse --short "$rev")"
    done ;;
  run)
    shift
    OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/site
    python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
    export PYTHONUNBUFFERED=1
    for spec in "$@"; do
      env_set=; [[ $spec == *@* ]] && env_set=${spec#*@} spec=${spec%%@*}
      name=${spec%%:*} mode=compiled_bf16 tag=$name
      [ "$spec" != "$name" ] && mode=${spec#*:} tag=${name}_$mode
      [ -n "$env_set" ] && tag=${tag}_${env_set%%=*}
      root=.; [ "$name" != work ] && root=ab/$name
      env $env_set PYTHONPATH=/tmp/site:$root/src timeout 170 python3 $root/benchmarks/bench_train.py \
          --device cuda --modes "$mode" --skip-sb3 --collect-steps 16 --out "$OUT/ab_$tag.json" \
          2> "$OUT/ab_$tag.err" > /dev/null
      echo "== $tag"; grep -E "update median|collect [0-9]|Error" "$OUT/ab_$tag.err" | tail -3
    done ;;
  *) echo "usage: $0 prepare NAME=REV ... | run NAME[:MODE][@VAR=VALUE] ..."; exit 2 ;;
esac
