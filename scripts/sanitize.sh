#!/usr/bin/env bash
# The test suite again against a build with AddressSanitizer + UndefinedBehaviorSanitizer
# (build-asan: the library, the binary the integration tests run, the unit tests), and the
# NVML tests under ThreadSanitizer (build-tsan). Any sanitizer report fails the run: UBSan
# halts on the first error, and every report is also written under build-asan/sanitizer-logs,
# which must stay empty (a report in a process whose exit status no test looks at still counts).
# Extra arguments go to ctest, e.g. scripts/sanitize.sh -R unit
set -euo pipefail
cd "$(dirname "$0")/.."

jobs="${KWD_BUILD_JOBS:-$(nproc)}"
# Only what the tests run is built (not the benchmarks); the fuzz targets, which link the same
# objects, are built here too when the fuzz stage follows (KWD_FUZZ_STAGE, scripts/test.sh):
# the build is shared (scripts/asan_build.sh).
asan_targets=(kernel-watchdog kwd-unit-tests)
if [ "${KWD_FUZZ_STAGE:-0}" != 0 ]; then asan_targets+=(kwd-fuzzers); fi
scripts/asan_build.sh "${asan_targets[@]}"
# The NVML worker thread under ThreadSanitizer.
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DKWD_NVML_TSAN=ON >/dev/null
cmake --build build-tsan -j "$jobs" --target kwd-nvml-tsan-tests

logs="$PWD/build-asan/sanitizer-logs"
rm -rf "$logs"
mkdir -p "$logs"
chmod 1777 "$logs"  # a test may run the binary as another user: it must still log here
# Only our binaries are instrumented (the Python kernels and jupyter_client are not); the
# options reach them through the environment ctest runs them in. Leak detection is on.
# log_exe_name: the file names the program too (ubsan.kernel-watchdog.PID): a fresh run once
# left an empty ubsan.PID, a report cut off by a kill, with nothing to say whose it was.
export ASAN_OPTIONS="detect_leaks=1:log_exe_name=1:log_path=$logs/asan:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_exe_name=1:log_path=$logs/ubsan:${UBSAN_OPTIONS:-}"
# One test is left out here: it asserts the watchdog's own RSS (growth under 1 MiB over a
# busy minute). Under ASan that is the allocator's quarantine and shadow memory, not the
# watchdog's, and the normal build's run of the suite checks it. (The forged/oversized
# messages test runs here, all but its peak-RSS check: what reads hostile frames is what ASan
# is for.)
export PYTEST_ADDOPTS="-k 'not test_watchdog_memory_stays_flat_over_a_busy_session' ${PYTEST_ADDOPTS:-}"
# A fifth, where a test tries the same thing many times over; the normal build's run does all:
# - integration.test_report_readers runs every reader on a fifth of its ~300 broken reports
#   (the whole suite ran 9 minutes otherwise);
# - the readers' unit test reads every fixture and a fifth of its ~20,000 broken copies, a
#   different fifth per fixture (313 s in CI otherwise, the stage's tail);
# - the report store's crash-safety unit test makes a fifth of its kills (each fork of this
#   binary is slow).
export KWD_SANITIZER_STRIDE=5
# What runs here is what runs this build's C++: every unit test, and the integration tests
# that drive the program through real kernels. Left out, each for running no C++ line under
# ASan that the tests here do not:
# - the framework corpus, the PyPI-stack rerun of the launcher tests and the Python package's
#   runners and its Jupyter extension (server and UI): the same C++ paths as the tests here (the
#   corpus's reports are judged again by the unit tests, which run here), and with TensorFlow
#   kernels and nbmake/papermill they would add minutes under ASan;
# - the macOS compile check: it builds nothing of this build's (it ran with the normal build);
# - layers.* and packaging.*: Python and Ruby reading the sources and the recipes, no C++;
# - integration.test_install: it skips itself in a sanitizer build (packaging is the release
#   build's); left out, pytest is not started for nothing.
# - the interpreter matrix: the watchdog's C++ runs the same under each interpreter (only the
#   kernel differs).
# And, for CI's 45 minutes (the fresh run of 052b71e spent 754 s in this stage, 859 s summed
# over its integration tests at three at a time), those whose C++ is not where the sanitizers
# find bugs: ASan and UBSan find them where our C++ reads what others wrote (IOPub frames,
# reports, /proc, ELF and a kernel's memory for its stacks), in long-lived processes with
# threads (the daemon, the read workers of a stalled mount) and in the fuzzers. Left to the
# normal build's run:
# - test_smoke, test_smoke_scheduling (248 s here): the runner's scheduling is unit-tested
#   here (test_smoke_*), its kernels are the launcher's, which test_protocol drives;
# - test_diagnosis (74 s): the diagnosis reads a report, which the diagnosis fixtures, the
#   readers' broken copies and the report fuzzer feed it here;
# - test_other_kernels (67 s): other languages' kernels behind the same watch;
# - the crash-safety unit test of the report store (145 s at a fifth of its kills): what it
#   tests is the file system's view of a torn write; the write itself runs in every report here.
# Earlier, by what they reach (scripts/coverage_by_test.py over this stage's integration tests,
# 2026-11-29: the unit tests reach 10,928 lines of src/ and include/kwd, the integration tests
# 5,381 more; a greedy cover of those by lines per second, pruned, kept 17 of 19 files):
# - test_notice, test_prometheus: no line beyond the unit tests and the files kept;
# - test_memory (129 s under gcov, and its quiet entry runs alone): 4 lines no kept file
#   reaches, an Xid's timestamp clamped with min() (nvml_probe.cpp:42, 151) and a cell's GPU
#   figures printed in the summary (terminal_summary.cpp:181-182); the normal build runs it;
# - the interpreter matrix's prefix entry: 2 lines, a remedy's choice of words
#   (remedies_crash.cpp:50, 55).
crash_safety="a writer killed at any point of a report's write leaves no partial report"
# Three at a time: the kernels are waited on, not a core (RUN_SERIAL tests still run alone).
status=0
(cd build-asan && ctest --output-on-failure --timeout 600 -j "${KWD_SANITIZE_TEST_JOBS:-3}" \
  --output-junit ctest-junit.xml \
  -E "^(integration\.(test_frameworks|test_python_package|test_jupyter_extension|test_jupyterlab_ui|test_install|test_notice|test_prometheus|test_memory|quiet\.test_memory|test_smoke|test_smoke_scheduling|test_diagnosis|test_other_kernels|pypi_stack\..*|interpreters\..*)|portability\..*|layers\..*|packaging\..*|${crash_safety})\$" "$@") ||
  status=$?
if compgen -G "$logs/*" >/dev/null; then
  echo "sanitize: sanitizer reports in $logs:" >&2
  for f in "$logs"/*; do
    echo "== $f" >&2
    if [ -s "$f" ]; then
      cat "$f" >&2
    else
      echo "(empty: the process was ended, most likely killed, after its sanitizer opened this file to report)" >&2
    fi
  done
  status=1
fi

# The NVML worker thread under ThreadSanitizer.
(cd build-tsan && ctest --output-on-failure --timeout 600 -R '^nvml\.tsan$') || status=$?
exit $status
