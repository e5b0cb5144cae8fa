#!/usr/bin/env bash
# End-to-end `foxhunt train` wall time on a synthetic trend market, as a user runs it:
#   bash scripts/e2e_train.sh [BARS] [FOLDS] [extra foxhunt train args...]
# FH_GLOBAL="--config FILE" passes global foxhunt options (they go before the subcommand).
# Prints the wall time and the phase split from timings.jsonl; the run lands in $OUT/e2e.
# Needs the wheels in .whl (run with carry [".whl"]).
set -uo pipefail
OUT=${OUT:-/tmp/out}
BARS=${1:-30000}; FOLDS=${2:-3}; shift 2 || true
mkdir -p "$OUT" /tmp/site
[ -d /tmp/site/pydantic ] || python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 FOXHUNT_HOME=/tmp/fxhome
rm -rf /tmp/fxhome "$OUT/e2e"
python3 -m foxhunt data synth --symbol SYN --family trend --bars "$BARS" --seed 7 > /dev/null
start=$(date +%s.%N)
python3 -m foxhunt ${FH_GLOBAL:-} train SYN --folds "$FOLDS" --out "$OUT/e2e" "$@" 2>&1 | tail -25
end=$(date +%s.%N)
python3 - "$OUT/e2e" "$start" "$end" <<'PY'
import json, sys
from pathlib import Path
run, start, end = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
rows = [json.loads(l) for l in (run / "timings.jsonl").read_text().splitlines() if l]
tot = {k: sum(r[k] for r in rows) / 1e3 for k in ("experience_ms", "training_ms", "validation_ms")}
wall = end - start
print(f"e2e wall {wall:.1f} s; phases (s): " + ", ".join(f"{k[:-3]} {v:.1f}" for k, v in tot.items())
      + f"; untimed (setup, compile, test, writes) {wall - sum(tot.values()):.1f}")
PY
