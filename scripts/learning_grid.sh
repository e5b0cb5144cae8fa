#!/usr/bin/env bash
# Learning experiments in one device call: each CONFIG:MARKET pair of bench_learning.py in its own
# process, all in parallel on the one GPU; logs and JSON tarred into $OUT/learning_grid.tgz.
#   bash scripts/learning_grid.sh "--bars 20000 --folds 2 --seeds 0" base:trend w1:trend ...
# A third field, CONFIG:MARKET:SEED, runs that seed alone (one process per seed).
# The runs share the GPU: on an H100, 15 runs of 60,000 updates (3 folds x 20,000) take about 6
# minutes, and five of 750,000 about 17, past a call's 10; each run's JSON holds every fold it
# finished before LIMIT stopped it.
# CONFIG names benchmarks/configs/learning/CONFIG.toml. Needs the wheels in .whl (carry [".whl"]).
# ROOT=ab/NAME runs a revision prepared by `scripts/ab_update.sh prepare NAME=REV` (its src,
# benchmarks and configs) instead of the working tree (then carry [".whl", "ab"]).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; GRID=/tmp/grid; rm -rf "$GRID"; mkdir -p "$OUT" "$GRID" /tmp/site
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
    doc = json.loads(f.read_text())
    for m in doc["markets"]:
        folds = [x for seed in m["seeds"] for x in seed["folds"] if "agent" in x["test"]]
        per = "  ".join(f"{x['test']['agent']['sharpe']:+.1f}/{x['test']['agent']['trades']}/"
                        f"{x['test']['agent']['flat']:.2f},{x['agent_val_sharpe']:+.1f}" for x in folds)
        s = m["summary"]
        if s is None:  # cut by LIMIT: the folds it finished
            print(f"{f.stem:34} {'(incomplete)':>30}  {per}")
            continue
        print(f"{f.stem:34} {s['agent']['mean']:+7.2f} {s['rule']['mean']:+7.2f} "
              f"{((s.get('oracle') or {}).get('mean') or 0):+7.2f} {s['t'].get('agent', 0):+6.2f}  {per}")
PY
for f in "$GRID"/*.err; do echo "== $(basename "$f")"; tail -4 "$f"; done
