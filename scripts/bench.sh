#!/usr/bin/env bash
# Runs every executable benches/*.sh in name order, each under a header, and
# keeps going after a failure so one broken benchmark hides no other figures.
# Exits non-zero when any of them failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

shopt -s nullglob
ran=0
failed=()
for bench in benches/*.sh; do
    if [[ ! -x "$bench" ]]; then
        echo "skipping $bench: not executable"
        continue
    fi
    ran=$((ran + 1))
    printf '\n=== %s ===\n' "$(basename "$bench" .sh)"
    started="$(date +%s)"
    if "$bench"; then
        echo "--- $(basename "$bench" .sh): ok in $(($(date +%s) - started))s"
    else
        rc=$?
        echo "--- $(basename "$bench" .sh): FAILED (exit $rc) after $(($(date +%s) - started))s"
        failed+=("$bench")
    fi
done

if ((ran == 0)); then
    echo "no benchmarks in benches/"
fi
if ((${#failed[@]} > 0)); then
    echo "failed: ${failed[*]}" >&2
    exit 1
fi
