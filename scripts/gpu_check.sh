#!/usr/bin/env bash
# GPU work in one device call: the CUDA tests and/or the GPU benchmarks; results land in $OUT.
#   bash scripts/gpu_check.sh [tests] [train] [backtest] [breakdown] [blocks] [headline] [defaults]
#                             [branches] [variants] [inductor]
#   (no argument: the first three)
# breakdown: the defaults and the one-stream A/B without SB3, with the update's per-piece profile.
# blocks: the defaults with 8 collect steps per graph, without SB3, with the breakdown.
# headline: the defaults only (collect blocks beside single collect steps), kernel timelines,
# the SB3 peer.
# defaults: the defaults only, without SB3, with kernel timelines (a quick check of the update).
# branches: benchmarks/probe_graph_branches.py (two chains of small kernels in one graph), with
# the default hardware queues and with CUDA_DEVICE_MAX_CONNECTIONS=32.
# variants: the defaults against each [train.performance] setting at its alternative
# (one_stream, single_updates, single_collect, tf32), without SB3.
# inductor: the defaults against inductor's coordinate-descent tuning and max-autotune for the
# matmuls (each on top of the default combo kernels, each in its own process), without SB3.
# Needs the wheels in .whl (pydantic, gymnasium, stable-baselines3, ...): run with carry [".whl"].
set -uo pipefail
OUT=${OUT:-/tmp/out}
STAGES=${*:-tests train backtest}
mkdir -p "$OUT" /tmp/site
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__)" | tee -a "$OUT/gpu.txt"
for stage in $STAGES; do
  case $stage in
    tests)
      timeout 420 python3 -m pytest -rfE -p no:cacheprovider -m gpu --durations=8 \
          tests/env tests/replay tests/agents tests/training tests/backtest 2>&1 \
          | tee "$OUT/gpu_tests.txt" | tail -25 ;;
    train)
      timeout 330 python3 benchmarks/bench_train.py --device cuda --out "$OUT/bench_train.json" \
          2> "$OUT/bench_train.err" > /dev/null; tail -12 "$OUT/bench_train.err" ;;
    backtest)
      timeout 150 python3 benchmarks/bench_backtest.py --device cuda \
          --out "$OUT/bench_backtest.json" 2> "$OUT/bench_backtest.err" > /dev/null
      tail -4 "$OUT/bench_backtest.err" ;;
    breakdown)
      timeout 240 python3 benchmarks/bench_train.py --device cuda --skip-sb3 --breakdown --timeline \
          --modes one_stream compiled_bf16 --out "$OUT/bench_breakdown.json" \
          2> "$OUT/bench_breakdown.err" > /dev/null; tail -8 "$OUT/bench_breakdown.err" ;;
    blocks)
      timeout 200 python3 benchmarks/bench_train.py --device cuda --skip-sb3 --collect-block 8 --timeline --breakdown \
          --modes compiled_bf16 --out "$OUT/bench_blocks.json" \
          2> "$OUT/bench_blocks.err" > /dev/null; tail -6 "$OUT/bench_blocks.err" ;;
    headline)
      timeout 300 python3 benchmarks/bench_train.py --device cuda --modes compiled_bf16 \
          --timeline --out "$OUT/bench_headline.json" \
          2> "$OUT/bench_headline.err" > /dev/null; tail -12 "$OUT/bench_headline.err" ;;
    defaults)
      timeout 150 python3 benchmarks/bench_train.py --device cuda --skip-sb3 --modes compiled_bf16 \
          --timeline --out "$OUT/bench_defaults.json" 2> "$OUT/bench_defaults.err" > /dev/null
      grep -E "update median|collect [0-9]|failed" "$OUT/bench_defaults.err" ;;
    branches)
      for conn in default 32; do
        extra=; [ "$conn" != default ] && extra=CUDA_DEVICE_MAX_CONNECTIONS=$conn
        env $extra timeout 120 python3 \
            benchmarks/probe_graph_branches.py --out "$OUT/probe_branches_$conn.json" \
            2> "$OUT/probe_branches_$conn.err" > /dev/null
        echo "== connections $conn"; grep -E "median" "$OUT/probe_branches_$conn.err"
      done ;;
    variants)
      timeout 500 python3 benchmarks/bench_train.py --device cuda --skip-sb3 --collect-steps 16 \
          --modes compiled_bf16 one_stream single_updates single_collect tf32 \
          --out "$OUT/bench_variants.json" 2> "$OUT/bench_variants.err" > /dev/null
      grep -E "update median|collect [0-9]|failed" "$OUT/bench_variants.err" ;;
    inductor)
      for variant in defaults coordinate_descent_tuning max_autotune_gemm; do
        extra=; [ "$variant" != defaults ] && extra="--inductor combo_kernels=true --inductor $variant=true"
        limit=100; [ "$variant" = max_autotune_gemm ] && limit=280
        timeout $limit python3 benchmarks/bench_train.py --device cuda --skip-sb3 --collect-steps 16 \
            --modes compiled_bf16 $extra --out "$OUT/inductor_$variant.json" \
            2> "$OUT/inductor_$variant.err" > /dev/null
        echo "== $variant"; grep -E "update median|collect [0-9]|failed|Error" "$OUT/inductor_$variant.err"
      done ;;
    *) echo "unknown stage $stage (tests, train, backtest, breakdown, blocks, headline, defaults, branches, variants, inductor)"; exit 2 ;;
  esac
done
