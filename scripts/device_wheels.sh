#!/usr/bin/env bash
# Fetch the py3.12 wheels the H200 machine lacks into .whl (git-ignored) for `run` with carry [".whl"].
# The device image already has torch, numpy, pyarrow, rich, typer, pandas, hypothesis, pytest.
# numba and llvmlite (the paper trader's kernels) are ~64 MB, which with the working tree passes
# the 64 MiB a run may carry: they are fetched only with WITH_NUMBA=1 (training, tune and
# bench_learning do not import them; paper trading and the vectorbt peer do).
# LIVE=1 fills .whl-live instead, for `scripts/gpu_session.sh live` (carry [".whl-live"]): what
# benchmarks/bench_live.py needs, and quickfix-ssl, which has no cp312 wheel on PyPI: it is built
# here from its sdist with a local python3.12 (~10 minutes on 2 cores; gcc and libssl-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${LIVE:-0}" = 1 ]; then
  PY312=${PY312:-$(command -v python3.12 || true)}
  [ -n "$PY312" ] || { echo "LIVE=1: needs python3.12 (PY312=...) to build quickfix-ssl" >&2; exit 2; }
  mkdir -p .whl-live
  if ! ls .whl-live/quickfix_ssl-*cp312*.whl > /dev/null 2>&1; then
    "$PY312" -m pip install -q setuptools wheel
    "$PY312" -m pip download -q --no-deps --no-binary :all: -d /tmp/qfsrc quickfix-ssl==1.15.1.post4
    "$PY312" -m pip wheel -q --no-deps --no-build-isolation -w .whl-live /tmp/qfsrc/quickfix-ssl-1.15.1.post4.tar.gz
  fi
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --platform any -d .whl-live pydantic==2.12.5 pydantic-core==2.41.5 annotated-types==0.7.0 \
      typing-inspection==0.4.2 SQLAlchemy==2.1.9 greenlet
  ls -la .whl-live
  exit 0
fi
PKGS=(pydantic==2.12.5 pydantic-core==2.41.5 annotated-types==0.7.0 typing-inspection==0.4.2
      duckdb==1.4.3 databento-dbn==0.45.0 gymnasium==1.2.2 farama-notifications==0.0.4
      stable-baselines3==2.7.1
      SQLAlchemy==2.1.9 greenlet
      optuna==5.1.0 alembic==1.20.1 Mako==1.4.3 colorlog==6.12.0 tqdm==4.70.1 cmaes==0.13.1)
[ "${WITH_NUMBA:-0}" = 1 ] && PKGS+=(numba==0.68.1 llvmlite==0.50.0)
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d .whl "${PKGS[@]}"
ls -la .whl
