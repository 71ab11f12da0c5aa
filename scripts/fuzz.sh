#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, clang, ASan + UBSan) into the sanitizer build,
# build-asan (scripts/asan_build.sh: the objects the sanitizer stage's tests ran), and runs
# each on its seed corpus tests/fuzz/corpus/<target>/ for FUZZ_SECONDS (default 20), FUZZ_JOBS
# (default: the number of cores) at a time.
#   scripts/fuzz.sh [TARGET...]      e.g. scripts/fuzz.sh wire iopub
# What a run finds is kept in build-asan/fuzz-corpus/<target>/ (never written into the repo);
# a crash, leak, UB or timeout leaves its input in build-asan/fuzz-findings/ and fails the
# script.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-20}"

scripts/asan_build.sh kwd-fuzzers
out=build-asan

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cpp; do
    n="$(basename "$f" .cpp)"
    targets+=("${n#fuzz_}")
  done
fi

export ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
mkdir -p "$out/fuzz-findings"

# One target: its log in build-asan/fuzz-<target>.log, a line saying how it went.
fuzz_one() {
  local t="$1" log="$out/fuzz-$1.log"
  mkdir -p "$out/fuzz-corpus/$t"
  # Seeds: tests/fuzz/corpus/<target>; the diagnosis reads reports too, so it also starts
  # from the report views' seeds (every fixture report, trimmed to a few KiB by
  # tests/fuzz/record_seeds.py: whole recordings run to 230 KiB and slow a run tenfold).
  local seeds=("tests/fuzz/corpus/$t")
  if [ "$t" = diagnosis ]; then seeds+=(tests/fuzz/corpus/report); fi
  if "$out/tests/fuzz/kwd-fuzz-$t" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/fuzz-findings/$t-" \
      "$out/fuzz-corpus/$t" "${seeds[@]}" >"$log" 2>&1; then
    echo "fuzz $t: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log" | tail -1)"
  else
    echo "fuzz $t: FAILED ($out/fuzz-findings/, $log)"
    tail -60 "$log"
    return 1
  fi
}

# As many at a time as there are cores (each target is one process).
jobs="${FUZZ_JOBS:-$(nproc)}"
rm -f "$out"/fuzz-failed-*
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
    sleep 1
  done
  (fuzz_one "$t" || touch "$out/fuzz-failed-$t") &
done
wait
if compgen -G "$out/fuzz-failed-*" >/dev/null; then
  exit 1
fi
