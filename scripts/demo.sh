#!/usr/bin/env bash
# Sets up, builds, and shows kernel-watchdog at work: a real ipykernel, launched by a real
# jupyter_client through a wrapped kernelspec, runs a cell that crashes it; the terminal
# then shows the crash report.
set -euo pipefail
cd "$(dirname "$0")/.."
KWD_SETUP_FRAMEWORKS=0 scripts/setup.sh  # the demo needs no TensorFlow
scripts/build.sh
exec /usr/bin/python3 scripts/demo.py --watchdog "$PWD/build/kernel-watchdog"
