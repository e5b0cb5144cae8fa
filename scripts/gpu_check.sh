#!/usr/bin/env bash
# One call on the GPU machine: the CUDA tests, then the GPU benchmarks; results land in $OUT.
# Needs the wheels in .whl (pydantic, gymnasium, stable-baselines3, ...): run with carry [".whl"].
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/site
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__)" | tee -a "$OUT/gpu.txt"
timeout 240 python3 -m pytest -q -p no:cacheprovider -m gpu \
    tests/env tests/replay tests/agents tests/training tests/backtest 2>&1 | tee "$OUT/gpu_tests.txt" | tail -25
timeout 200 python3 benchmarks/bench_backtest.py --device cuda --out "$OUT/bench_backtest.json" \
    2> "$OUT/bench_backtest.err" > /dev/null; tail -4 "$OUT/bench_backtest.err"
timeout 300 python3 benchmarks/bench_train.py --device cuda --compile --out "$OUT/bench_train.json" \
    2> "$OUT/bench_train.err" > /dev/null; tail -6 "$OUT/bench_train.err"
