#!/usr/bin/env bash
# One device call's set-up, then its steps, each timed, output under $OUT (run with carry [".whl"]):
#   bash scripts/gpu_session.sh STEP [STEP ...]
# Steps:
#   mps          start CUDA MPS (processes sharing the GPU then run their kernels side by side;
#                a later call on the same warm machine finds it running) and list its server
#   es[:ARGS]    `foxhunt train ES` on the bundled sample as a user runs it, cold compile cache
#                (ES_CACHE=DIR: that inductor cache, kept between steps; FH_GLOBAL: options
#                before the subcommand, e.g. --config FILE),
#                wall time and phase split (ARGS: extra train options, + for spaces)
#   e2e          scripts/e2e_train.sh: 30,000 synthetic bars, 3 folds, the defaults
#   live         benchmarks/bench_live.py on the machine's own CPUs and disk (carry [".whl-live"]
#                instead of .whl: LIVE=1 bash scripts/device_wheels.sh builds it), JSON in $OUT
#   fd:NAME:SECS:ARGS  bench_learning.py --false-deploys --device cuda --resume
#                --out $OUT/fd_NAME.json (carried back in and resumed if ab/fd_NAME.json exists),
#                stopped after SECS seconds; ARGS with + for spaces
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/site
WHEELS=.whl; [ -d .whl-live ] && WHEELS=.whl-live
[ -d /tmp/site/pydantic ] || python3 -m pip install -q --no-deps --no-index --target /tmp/site $WHEELS/*.whl \
    2>/dev/null || exit 1
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1
stamp() { date -u +%H:%M:%S; }
for step in "$@"; do
  echo "== $(stamp) $step"
  case $step in
    mps)
      nvidia-cuda-mps-control -d 2>&1
      timeout 60 python3 -c "import torch; torch.ones(1, device='cuda').sum().item()" \
        && echo get_server_list | nvidia-cuda-mps-control && echo "MPS: a server as above" ;;
    es|es:*)
      args=${step#es}; args=${args#:}; args=${args//+/ }
      export FOXHUNT_HOME=/tmp/fxes TORCHINDUCTOR_CACHE_DIR=${ES_CACHE:-/tmp/inductor_es_$RANDOM}
      rm -rf /tmp/fxes; python3 -m foxhunt data sample > /dev/null
      start=$(date +%s.%N)
      python3 -m foxhunt ${FH_GLOBAL:-} train ES --folds 3 --out /tmp/fxes/run $args 2>&1 | grep -v "^\[" | tail -12
      end=$(date +%s.%N)
      python3 - /tmp/fxes/run "$start" "$end" <<'PY'
import json, sys
from pathlib import Path
run, start, end = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
print(f"ES wall {end - start:.1f} s; phases:", json.loads((run / "phases.json").read_text()))
PY
      unset FOXHUNT_HOME TORCHINDUCTOR_CACHE_DIR ;;
    e2e)
      bash scripts/e2e_train.sh 30000 3 ;;
    live)
      nproc; df -h /tmp | tail -1
      timeout 300 python3 benchmarks/bench_live.py --out "$OUT/bench_live_device.json" 2> "$OUT/bench_live_device.err"
      echo "bench_live: rc $?"; grep -A12 "^figure" "$OUT/bench_live_device.err" ;;
    fd:*)
      IFS=: read -r _ name secs args <<< "$step"; args=${args//+/ }
      [ -f "ab/fd_$name.json" ] && cp "ab/fd_$name.json" "$OUT/fd_$name.json"
      TORCHINDUCTOR_COMPILE_THREADS=2 timeout "$secs" python3 benchmarks/bench_learning.py --false-deploys --device cuda \
        --resume --out "$OUT/fd_$name.json" $args > /dev/null 2> "$OUT/fd_$name.log"
      echo "fd $name: rc $?"; grep -v "epoch" "$OUT/fd_$name.log" | tail -8 ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
echo "== $(stamp) done"; nvidia-smi --query-gpu=name --format=csv,noheader
