#!/usr/bin/env bash
# Learning experiments in one device call: each CONFIG:MARKET pair of bench_learning.py in its own
# process, all in parallel on the one GPU; logs and JSON tarred into $OUT/learning_grid.tgz.
#   bash scripts/learning_grid.sh "--bars 20000 --folds 2 --seeds 0" base:trend w1:trend ...
# A third field, CONFIG:MARKET:SEED, runs that seed alone (one process per seed).
# CONFIG names benchmarks/configs/learning/CONFIG.toml. Needs the wheels in .whl (carry [".whl"]).
# ROOT=ab/NAME runs a revision prepared by `scripts/ab_update.sh prepare NAME=REV` (its src,
# benchmarks and configs) instead of the working tree (then carry [".whl", "ab"]).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; GRID=/tmp/grid; mkdir -p "$OUT" "$GRID" /tmp/site
python3 -m pip install -q --no-deps --no-index --target /tmp/site .whl/*.whl 2>/dev/null || exit 1
ROOT=${ROOT:-.}
export PYTHONPATH=/tmp/site:$ROOT/src PYTHONUNBUFFERED=1 FOXHUNT_HOME=/tmp/fh
ARGS=$1; shift
LIMIT=${LIMIT:-480}
for pair in "$@"; do
  IFS=: read -r cfg market seed <<< "$pair"
  name=${cfg}_$market${seed:+_s$seed}
  timeout "$LIMIT" python3 "$ROOT/benchmarks/bench_learning.py" --markets "$market" $ARGS \
      ${seed:+--seeds $seed} --deploy-all --device cuda \
      --config "$ROOT/benchmarks/configs/learning/$cfg.toml" \
      --out "$GRID/$name.json" > /dev/null 2> "$GRID/$name.err" &
done
wait
tar -czf "$OUT/learning_grid${TAG:-}.tgz" -C "$GRID" .
python3 - "$GRID" <<'PY'
import json, pathlib, sys
print(f"{'run':34} {'agent':>7} {'rule':>7} {'oracle':>7} {'t':>6}  per fold: test Sharpe/trades/flat, val Sharpe")
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    for m in json.loads(f.read_text())["markets"]:
        s = m["summary"]
        folds = [x for seed in m["seeds"] for x in seed["folds"]]
        per = "  ".join(f"{x['test']['agent']['sharpe']:+.1f}/{x['test']['agent']['trades']}/"
                        f"{x['test']['agent']['flat']:.2f},{x['agent_val_sharpe']:+.1f}" for x in folds)
        print(f"{f.stem:34} {s['agent']['mean']:+7.2f} {s['rule']['mean']:+7.2f} "
              f"{(s['oracle']['mean'] or 0):+7.2f} {s['t'].get('agent', 0):+6.2f}  {per}")
PY
for f in "$GRID"/*.err; do echo "== $(basename "$f")"; tail -4 "$f"; done
