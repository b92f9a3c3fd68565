#!/usr/bin/env bash
# Replays inputs through a fuzz target, under the same sanitizers:
#   fuzz/replay.sh otlp fuzz/findings/otlp/crash-...      (or uid_memory, line_scan, text_views)
# It prints the difference or the sanitizer's report, and exits non-zero if there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
target=$1
shift
source fuzz/env.sh
PYTHONMALLOC=$(python_malloc "$target") exec $PY "fuzz/${target}_target.py" "$@"
