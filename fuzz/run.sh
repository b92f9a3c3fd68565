#!/usr/bin/env bash
# Runs the fuzz targets for a bounded time: `fuzz/run.sh SECONDS` (in all, split between
# the targets). Exits non-zero on a finding, which libFuzzer writes to
# fuzz/findings/<target>/ (crash-*: the input; `fuzz/replay.sh TARGET FILE` replays it).
# Each target's corpus is kept in fuzz/corpus/<target>/, so a later run starts from what
# this one reached. `make fuzz` builds, seeds and calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
TOTAL=${1:-120}
source fuzz/env.sh

run() { # target, seconds, seed corpus folders...
  local target=$1 seconds=$2
  shift 2
  mkdir -p "fuzz/corpus/$target" "fuzz/findings/$target"
  echo "fuzz: $target for ${seconds}s"
  set +e
  PYTHONMALLOC=$(python_malloc "$target") $PY "fuzz/${target}_target.py" -max_total_time="$seconds" -print_final_stats=1 \
    -timeout=10 -rss_limit_mb=4096 -artifact_prefix="fuzz/findings/$target/" \
    "fuzz/corpus/$target" "$@" 2>&1 | grep -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse) '
  local status=${PIPESTATUS[0]}
  set -e
  if [ "$status" != 0 ]; then
    echo "fuzz: $target found something (exit $status): see fuzz/findings/$target/"
    echo "fuzz: replay with fuzz/replay.sh $target fuzz/findings/$target/<file>"
    exit "$status"
  fi
}

# The OTLP decoder is the larger surface: half the time; the others a sixth each.
run otlp $((TOTAL / 2)) fuzz/seeds/otlp
run uid_memory $((TOTAL / 6))
run line_scan $((TOTAL / 6))
run text_views $((TOTAL - TOTAL / 2 - 2 * (TOTAL / 6)))
