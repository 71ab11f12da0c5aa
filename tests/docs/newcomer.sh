#!/usr/bin/env bash
# A newcomer's path, as the README gives it: a fresh clone, the lean install, the build without
# the test suite, then the README's quick start (its console blocks: wrap, a crashing cell,
# `reports show latest`) against the program that clone built. Prints each step's time.
#   tests/docs/newcomer.sh [REPO]    (default: this checkout's HEAD, cloned into a temp dir)
#   tests/docs/newcomer.sh --in-place
#       this checkout itself, built into ./build: what scripts/test.sh runs as its newcomer
#       stage (unless KWD_NEWCOMER_STAGE=0), on CI's fresh clone, before its build stage (which
#       adds the tests to ./build: the program is compiled once, not twice).
set -euo pipefail
in_place=0
if [ "${1:-}" = --in-place ]; then in_place=1; fi
step() {
  local name="$1" start=$SECONDS
  shift
  "$@"
  echo "newcomer: $name took $((SECONDS - start)) s" >&2
}
if [ "$in_place" = 1 ]; then
  cd "$(dirname "$0")/../.."
else
  repo="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  step clone git clone --quiet "$repo" "$work/kernel-watchdog"
  cd "$work/kernel-watchdog"
fi
step "scripts/setup.sh --lean" scripts/setup.sh --lean
step "scripts/build.sh build -DKWD_BUILD_TESTS=OFF" scripts/build.sh build -DKWD_BUILD_TESTS=OFF
step "the README's quick start" /usr/bin/python3 tests/docs/check_docs.py \
  --binary build/kernel-watchdog --only-console README.md
echo "newcomer: all of it took $SECONDS s" >&2
