#!/usr/bin/env bash
# A newcomer's path, as the README gives it: a fresh clone, the lean install, the build without
# the test suite, then the README's quick start (its console blocks: wrap, a crashing cell,
# `reports show latest`) against the program that clone built. Prints each step's time.
#   tests/docs/newcomer.sh [REPO]    (default: this checkout's HEAD, cloned into a temp dir)
# It compiles the whole program once more (about 3 minutes on 2 cores); scripts/test.sh runs it
# as its newcomer stage unless KWD_NEWCOMER_STAGE=0.
set -euo pipefail
repo="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
step() {
  local name="$1" start=$SECONDS
  shift
  "$@"
  echo "newcomer: $name took $((SECONDS - start)) s" >&2
}
step clone git clone --quiet "$repo" "$work/kernel-watchdog"
cd "$work/kernel-watchdog"
step "scripts/setup.sh --lean" scripts/setup.sh --lean
step "scripts/build.sh build -DKWD_BUILD_TESTS=OFF" scripts/build.sh build -DKWD_BUILD_TESTS=OFF
step "the README's quick start" /usr/bin/python3 tests/docs/check_docs.py \
  --binary build/kernel-watchdog --only-console README.md
echo "newcomer: all of it took $SECONDS s" >&2
