#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds, and runs the whole test suite (ctest).
# Extra arguments go to ctest, e.g. scripts/test.sh -R integration.test_launcher
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
ctest --output-on-failure --timeout 600 -j 2 "$@"
