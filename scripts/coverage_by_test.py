#!/usr/bin/python3
"""Which C++ lines each integration test file reaches that the unit tests do not: the evidence
for what the sanitizer stage (scripts/sanitize.sh) runs.

    scripts/coverage_by_test.py [--build build-cov] [--jobs 3] [--out DIR] [TEST_FILE...]
    scripts/coverage_by_test.py --cover-only [--out DIR]   (the last section again)

Builds the program and the unit tests with gcov (-DKWD_COVERAGE=ON, -O0) into --build, runs the
unit tests once and each integration test file (default: every tests/integration/test_*.py)
with its own GCOV_PREFIX, so that runs side by side keep their counters apart, then reads
every run's counters with gcov's JSON output. It prints, per test file: its wall time, whether
it passed, the src/ and include/ lines it ran, how many of those the unit tests never ran
("beyond unit"), and how many no other run reached ("only here"). Those lines, file by file,
go to --out/<test>.beyond-unit.txt for reading. Last, the smallest set of integration runs it
finds that together reach every line any of them reaches beyond the unit tests (greedy, by new
lines per second): the runs left out add no line there.

A program killed by SIGKILL writes no counters (gcov writes at exit; the build sends _exit and
raise through tests/coverage/flush_on_exit.c first): a test's reach is a lower bound.
Run it under the CPU lock on a shared machine: flock /tmp/kwd-cpu.lock scripts/coverage_by_test.py
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def build(build_dir, jobs):
    subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=Debug", "-DCMAKE_CXX_FLAGS_DEBUG=-g0",
                    "-DCMAKE_C_FLAGS_DEBUG=-g0", "-DKWD_COVERAGE=ON"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(build_dir), "-j", str(jobs), "--target",
                    "kernel-watchdog", "kwd-unit-tests"], check=True)


def run(name, argv, prefix, env, log):
    prefix.mkdir(parents=True, exist_ok=True)
    # Tests may run the program as another user: it must be able to write its counters.
    os.chmod(prefix, 0o1777)
    started = time.monotonic()
    with open(log, "w") as out:
        rc = subprocess.run(argv, env={**env, "GCOV_PREFIX": str(prefix)}, stdout=out,
                            stderr=subprocess.STDOUT, cwd=ROOT).returncode
    return name, rc, time.monotonic() - started


def lines_reached(prefix, build_dir):
    """{source path: {line: count}} of the instrumented src/ and include/kwd lines, from the
    counters written under `prefix` (GCOV_PREFIX): each .gcda has its .gcno copied beside it."""
    reached = {}
    mirrored = prefix / str(build_dir.resolve()).lstrip("/")
    for gcda in mirrored.rglob("*.gcda"):
        gcno = build_dir / gcda.relative_to(mirrored).with_suffix(".gcno")
        if not gcno.exists():
            continue
        shutil.copy(gcno, gcda.with_suffix(".gcno"))
        proc = subprocess.run(["gcov", "--stdout", "--json-format", gcda.name], cwd=gcda.parent,
                              capture_output=True, text=True)
        for doc in proc.stdout.splitlines():
            if not doc.startswith("{"):
                continue
            for f in json.loads(doc).get("files", []):
                path = os.path.realpath(os.path.join(gcda.parent, f["file"]))
                if not (path.startswith(str(ROOT / "src")) or
                        path.startswith(str(ROOT / "include" / "kwd"))):
                    continue
                counts = reached.setdefault(os.path.relpath(path, ROOT), {})
                for line in f["lines"]:
                    n = line["line_number"]
                    counts[n] = counts.get(n, 0) + line["count"]
    return reached


def covered(reached):
    return {(f, n) for f, counts in reached.items() for n, c in counts.items() if c > 0}


def smallest_cover(reach, seconds):
    """Integration runs that together reach every line any of them reaches beyond the unit
    tests: chosen greedily by new lines per second, then each dropped again (the slowest
    first) whose lines the others kept reach too. -> {run: lines no other run kept reaches}.
    A run left out reaches no line beyond the unit tests and the runs kept."""
    unit = set(map(tuple, reach.get("unit", [])))
    beyond = {n: set(map(tuple, r)) - unit for n, r in reach.items() if n != "unit"}
    wanted = set().union(*beyond.values()) if beyond else set()
    candidates, kept = dict(beyond), []
    while wanted:
        name = max(candidates,
                   key=lambda n: (len(candidates[n] & wanted) / max(seconds.get(n, 1), 1), n))
        new = candidates.pop(name) & wanted
        if not new:
            break
        kept.append(name)
        wanted -= new
    for name in sorted(kept, key=lambda n: -seconds.get(n, 0)):
        rest = set().union(*(beyond[m] for m in kept if m != name))
        if beyond[name] <= rest:
            kept.remove(name)
    return {n: len(beyond[n] - set().union(*(beyond[m] for m in kept if m != n))) for n in kept}


def print_cover(reach, summary):
    kept = smallest_cover(reach, {n: s["seconds"] for n, s in summary.items()})
    print("\nThe smallest set of integration runs found that reaches every line they reach "
          "together beyond the unit tests (greedy by new lines per second, then pruned):")
    for name, only in sorted(kept.items(), key=lambda kv: -kv[1]):
        print(f"  keep  {name:<24} {only} lines no other run kept reaches "
              f"({summary[name]['seconds']} s)")
    for name in sorted(n for n in summary if n != "unit" and n not in kept):
        print(f"  leave {name:<24} no line beyond the unit tests and the runs kept "
              f"({summary[name]['seconds']} s)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", type=pathlib.Path, default=ROOT / "build-cov")
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--out", type=pathlib.Path, default=None)
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--cover-only", action="store_true",
                        help="run nothing: read --out's reach.json and summary.json of an "
                             "earlier run and print the smallest set of runs again")
    parser.add_argument("tests", nargs="*", type=pathlib.Path)
    args = parser.parse_args()
    build_dir = args.build.resolve()
    out = (args.out or build_dir / "coverage-by-test").resolve()
    tests = args.tests or sorted((ROOT / "tests" / "integration").glob("test_*.py"))
    if args.cover_only:
        print_cover(json.loads((out / "reach.json").read_text()),
                    json.loads((out / "summary.json").read_text()))
        return
    if not args.no_build:
        build(build_dir, os.cpu_count() or 2)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)

    env = dict(os.environ, KWD_BINARY=str(build_dir / "kernel-watchdog"),
               KWD_BUILD_DIR=str(build_dir))
    runs = [("unit", [str(build_dir / "tests" / "kwd-unit-tests")])]
    runs += [(t.stem, ["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                       str(t.resolve())]) for t in tests]
    results = {}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run, name, argv, out / "counters" / name, env,
                               out / f"{name}.log") for name, argv in runs]
        for future in concurrent.futures.as_completed(futures):
            name, rc, seconds = future.result()
            results[name] = (rc, seconds)
            print(f"  ran {name}: rc {rc}, {seconds:.0f} s", file=sys.stderr, flush=True)

    reach = {name: covered(lines_reached(out / "counters" / name, build_dir))
             for name, _ in runs}
    unit = reach["unit"]
    instrumented = set()
    for name, _ in runs:
        instrumented |= {(f, n) for f, counts in
                         lines_reached(out / "counters" / name, build_dir).items()
                         for n in counts}
    everyone = set().union(*reach.values())
    print(f"\n{len(everyone)} of {len(instrumented)} instrumented lines of src/ and "
          f"include/kwd reached by some run; the unit tests reach {len(unit)}.")
    print(f"{'run':<22} {'rc':>3} {'time':>7} {'lines':>7} {'beyond unit':>12} {'only here':>10}")
    summary = {}
    for name, _ in runs:
        mine = reach[name]
        others = set().union(*(r for n, r in reach.items() if n != name))
        beyond = mine - unit
        only = mine - others
        rc, seconds = results[name]
        print(f"{name:<22} {rc:>3} {seconds:>6.0f}s {len(mine):>7} {len(beyond):>12} {len(only):>10}")
        summary[name] = {"rc": rc, "seconds": round(seconds), "lines": len(mine),
                         "beyond_unit": len(beyond), "only_here": len(only)}
        by_file = {}
        for f, n in sorted(beyond):
            by_file.setdefault(f, []).append(n)
        (out / f"{name}.beyond-unit.txt").write_text(
            "".join(f"{f}: {len(ns)} lines: {' '.join(map(str, ns))}\n" for f, ns in
                    sorted(by_file.items(), key=lambda kv: -len(kv[1]))))
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    # Every run's reached lines, for questions this table does not answer (what a set of runs
    # reaches beyond another set).
    (out / "reach.json").write_text(json.dumps({n: sorted(r) for n, r in reach.items()}))
    print_cover({n: sorted(r) for n, r in reach.items()}, summary)


if __name__ == "__main__":
    main()
