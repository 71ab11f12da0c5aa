#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds (the program, then the Python wheel from the same
# objects; the aarch64 wheel, cross-compiled and tested under qemu: scripts/aarch64.sh; the
# program compiled and linked for macOS: scripts/macos_link.sh), and runs the whole test suite
# (ctest); then, as
# CI does, the same suite against an ASan+UBSan build and the NVML tests under TSan
# (scripts/sanitize.sh), and every fuzz target for 20 s on its corpus (scripts/fuzz.sh).
# Extra arguments go to both ctest runs, e.g. scripts/test.sh -R integration.test_launcher
# KWD_SANITIZE_STAGE=0 / KWD_FUZZ_STAGE=0 / KWD_NEWCOMER_STAGE=0 / KWD_AARCH64_STAGE=0 /
# KWD_MACOS_STAGE=0 leave those stages out (a quicker local run).
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
    --ninja-log aarch64=build-aarch64/.ninja_log \
    >&2 || true
  rm -f "$timings"
}
trap print_timings EXIT
# Last run's JUnit files would pass for this run's in the table.
rm -f build/ctest-junit.xml build-asan/ctest-junit.xml

# The cores' busy and idle ticks since boot (/proc/stat's first line): a stage's share of busy
# cores says whether more at once would help it (idle cores) or only less work would (busy).
cpu_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6; exit}' /proc/stat; }
stage() {
  local name="$1"
  shift
  local start=$SECONDS status=0 busy0 idle0 busy1 idle1
  read -r busy0 idle0 < <(cpu_ticks)
  "$@" || status=$?
  read -r busy1 idle1 < <(cpu_ticks)
  printf '%s\t%s\t%s\t%s\n' "$name" "$((SECONDS - start))" "$([ $status = 0 ] && echo ok || echo "failed ($status)")" \
    "$(( (busy1 - busy0) * 100 / (busy1 - busy0 + idle1 - idle0 + 1) ))" >>"$timings"
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
# The README's newcomer path (tests/docs/newcomer.sh --in-place): the lean install, the program
# built without its tests into ./build, and the README's quick start against it. The build
# stage then adds the tests to that build: the program is compiled once, not twice (a clone
# of its own cost 3 to 5 minutes of compiling). The full install came first, so what the lean
# list lacks is not found here. KWD_NEWCOMER_STAGE=0 leaves it out of a quicker local run.
if [ "${KWD_NEWCOMER_STAGE:-1}" != 0 ]; then stage newcomer tests/docs/newcomer.sh --in-place; fi
stage build scripts/build.sh build -DKWD_BUILD_TESTS=ON
# The docs site (mkdocs.yml, strict: a broken link fails it; not --quiet, which also stops
# MkDocs 1.6 counting the warnings that strict fails on) and the docs' own commands and
# claims, checked against the program just built (tests/docs/check_docs.py).
stage docs sh -c 'NO_MKDOCS_2_WARNING=1 .cache/venv-docs/bin/mkdocs build && /usr/bin/python3 tests/docs/check_docs.py --binary build/kernel-watchdog'
# The fuzz targets share the sanitizer build (scripts/asan_build.sh): sanitize.sh builds them
# with it when the fuzz stage follows. (Compiling that build beside the tests at idle priority
# was tried: on this 2-core machine the tests stage went from 16 to 26 minutes and the
# framework corpus timed out; the cores are not idle while kernels start.)
export KWD_FUZZ_STAGE="${KWD_FUZZ_STAGE:-1}"
# The manylinux wheel, from the objects just built (nothing compiled again); the Python
# package's tests install it into a fresh virtualenv (tests/integration/test_python_package.py).
stage wheel scripts/wheel.sh build dist
KWD_WHEEL=$(ls "$PWD"/dist/kernel_watchdog-*.whl)
export KWD_WHEEL
# The aarch64 wheel, cross-compiled here, and its tests under qemu-user (scripts/aarch64.sh):
# an arm64 sysroot of Debian's packages (kept in .cache/aarch64 until its list changes), the
# program and unit tests in a unity build, the wheel, the unit tests and real arm64 kernels
# dying under the arm64 watchdog. KWD_AARCH64_STAGE=0 leaves it out.
if [ "${KWD_AARCH64_STAGE:-1}" != 0 ]; then stage aarch64 scripts/aarch64.sh; fi
# kernel-watchdog compiled for macOS arm64 and x86_64 with Zig, linked for arm64 and its Mach-O
# file checked (scripts/macos_link.sh). A stage of its own, on both cores: on a fresh machine
# it first builds zig's libc++ and spdlog, fmt and simdjson for macOS, which as a ctest entry
# on one core beside the other tests ran past its 15 minutes. It compiles the whole program,
# so the tests stage's compile check (portability.macos_compile) is left the unit tests.
# KWD_MACOS_STAGE=0 leaves it out (the compile check then does the whole program again).
if [ "${KWD_MACOS_STAGE:-1}" != 0 ]; then
  stage macos scripts/macos_link.sh build/macos-link
  export KWD_MACOS_UNIT_TESTS_ONLY=1
fi
stage tests run_ctest "$@"
if [ "${KWD_SANITIZE_STAGE:-1}" != 0 ]; then stage sanitizers scripts/sanitize.sh "$@"; fi
if [ "${KWD_FUZZ_STAGE:-1}" != 0 ]; then stage fuzz scripts/fuzz.sh; fi
