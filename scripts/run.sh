#!/usr/bin/env bash
# `make run`: set up what is missing, build the release binary, migrate, ingest
# the demo corpus and serve. The build needs nothing the set-up installs on a
# machine of this kind (a Rust toolchain and a C compiler), so it starts first,
# in the background, and compiles while the set-up waits on apt, pip and
# PostgreSQL; the set-up keeps the terminal (sudo may ask for a password).
# Then the build's output is shown from its first line while it finishes.
set -euo pipefail
shopt -s inherit_errexit

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

BIN="${CARGO_TARGET_DIR:-target}/release/data-plane"
DEMO_CORPUS="${DEMO_CORPUS:-.data/corpus/demo}"
DEMO_SPACE="${DEMO_SPACE:-demo}"
BUILD_LOG=".data/build/cargo-release.log"
BUILD=(cargo build --release -p data-plane)

mkdir -p "$(dirname "$BUILD_LOG")"
started="$(date +%s)"

# In a session of its own, so that stopping it stops its compilers too.
setsid "${BUILD[@]}" --color="$([[ -t 1 ]] && echo always || echo never)" >"$BUILD_LOG" 2>&1 &
build_pid=$!
# A failed set-up, or Ctrl-C at any point before the build ends, stops the
# build too (the traps make the shell exit on a signal, which runs EXIT).
tail_pid=""
trap 'kill -TERM -- -"$build_pid" $tail_pid 2>/dev/null || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bash scripts/setup.sh --no-browser

echo "build: cargo build --release (started with the set-up; its output so far, then as it comes)"
# In the background so that `wait` returns at once on a signal.
tail -n +1 -f --pid="$build_pid" "$BUILD_LOG" &
tail_pid=$!
wait "$tail_pid" || true
build_rc=0
wait "$build_pid" || build_rc=$?
trap - EXIT INT TERM
if ((build_rc != 0)); then
    # A compiler package the set-up has just installed may be what it lacked:
    # one more try in the foreground shows the error, if any, as cargo prints it.
    echo "build: the background build failed (exit $build_rc); building again now that the set-up is done"
    "${BUILD[@]}"
fi
echo "build: done, $(($(date +%s) - started))s since make run started"

"$BIN" migrate
"$BIN" ingest "$DEMO_CORPUS" --space "$DEMO_SPACE"
echo "ready: $(($(date +%s) - started))s since make run started"
exec "$BIN" serve
