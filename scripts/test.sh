#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds (the program, then the Python wheel from the same
# objects), and runs the whole test suite (ctest); then, as
# CI does, the same suite against an ASan+UBSan build and the NVML tests under TSan
# (scripts/sanitize.sh), and every fuzz target for 20 s on its corpus (scripts/fuzz.sh).
# Extra arguments go to both ctest runs, e.g. scripts/test.sh -R integration.test_launcher
# KWD_SANITIZE_STAGE=0 / KWD_FUZZ_STAGE=0 leave those stages out (a quicker local run).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's time goes to $timings; on the way out, passed or failed, a table says where the
# run's time went (scripts/timing_table.py): the stages, the slowest tests of both ctest runs
# (their JUnit files) and the slowest compiles of each build (ninja's logs). Over 45 minutes
# it warns: CI's budget (issue 44).
timings="$(mktemp)"
print_timings() {
  /usr/bin/python3 scripts/timing_table.py --stages "$timings" --total "$SECONDS" \
    --junit build=build/ctest-junit.xml --junit asan=build-asan/ctest-junit.xml \
    --ninja-log build=build/.ninja_log --ninja-log asan=build-asan/.ninja_log \
    >&2 || true
  rm -f "$timings"
  # A stage that failed leaves no sanitizer build compiling on.
  if [ -n "${background_build:-}" ]; then kill -- -"$background_build" 2>/dev/null || true; fi
}
trap print_timings EXIT
# Last run's JUnit files would pass for this run's in the table.
rm -f build/ctest-junit.xml build-asan/ctest-junit.xml

stage() {
  local name="$1"
  shift
  local start=$SECONDS status=0
  "$@" || status=$?
  printf '%s\t%s\t%s\n' "$name" "$((SECONDS - start))" "$([ $status = 0 ] && echo ok || echo "failed ($status)")" >>"$timings"
  echo "test.sh: stage '$name' took $((SECONDS - start)) s" >&2
  return $status
}
# Four tests at a time on two cores: most wait on kernels, not on a core. Those that need the
# machine or a core to themselves say so in tests/CMakeLists.txt (RUN_SERIAL, RESOURCE_LOCK).
run_ctest() (
  cd build && ctest --output-on-failure --timeout 600 -j "${KWD_TEST_JOBS:-4}" \
    --output-junit ctest-junit.xml "$@"
)

stage setup scripts/setup.sh
stage build scripts/build.sh
# The sanitizer builds (ASan with the fuzzers, TSan) compile beside the wheel and the tests, at
# idle priority: the tests mostly wait on kernels, and the compilers take only the cycles they
# leave (SCHED_IDLE yields to any other process at once; timing-sensitive tests keep their core).
# The sanitizer stage then waits for what is left of it, and builds again in the foreground what
# failed here (so its errors are shown there).
export KWD_FUZZ_STAGE="${KWD_FUZZ_STAGE:-1}"
background_build=""
if [ "${KWD_SANITIZE_STAGE:-1}" != 0 ]; then
  # Its own process group (setsid), so that a run that stops early stops all of it.
  setsid sh -c 'start=$(date +%s) status=ok
    chrt --idle 0 nice -n 19 scripts/sanitize.sh --build-only >build/sanitizer-build.log 2>&1 ||
      status="failed: build/sanitizer-build.log"
    printf "%s\t%s\t%s\n" "sanitizer build, beside the tests" "$(($(date +%s) - start))" "$status" >>"$1"' \
    sh "$timings" &
  background_build=$!
fi
# The manylinux wheel, from the objects just built (nothing compiled again); the Python
# package's tests install it into a fresh virtualenv (tests/integration/test_python_package.py).
stage wheel scripts/wheel.sh build dist
KWD_WHEEL=$(ls "$PWD"/dist/kernel_watchdog-*.whl)
export KWD_WHEEL
stage tests run_ctest "$@"
sanitizers() {
  if [ -n "$background_build" ]; then
    wait "$background_build" || true
    background_build=""
  fi
  scripts/sanitize.sh "$@"
}
if [ "${KWD_SANITIZE_STAGE:-1}" != 0 ]; then stage sanitizers sanitizers "$@"; fi
if [ "${KWD_FUZZ_STAGE:-1}" != 0 ]; then stage fuzz scripts/fuzz.sh; fi
