#!/usr/bin/python3
"""Where a run of scripts/test.sh spent its time: a table printed at its end.

    timing_table.py --stages FILE [--junit LABEL=FILE]... [--ninja-log LABEL=FILE]...
                    [--budget SECONDS] [--total SECONDS]

--stages: lines "name<TAB>seconds<TAB>ok|failed[<TAB>busy %]" that test.sh wrote, one per stage
  run (busy %: the share of the cores' time that was busy over the stage).
--junit: ctest's --output-junit file of a run (label: which build it ran against).
--ninja-log: a build directory's .ninja_log (label: that build), for its slowest compiles.
Files that are missing (a stage that never ran) are said to be missing, not an error: the
table is printed on the way out of a failed run too.
Only the standard library: it runs before (and without) any virtualenv.
"""
import argparse
import pathlib
import sys
import xml.etree.ElementTree as ET

SLOWEST_TESTS = 15
SLOWEST_UNITS = 10


def minutes(seconds):
    return f"{seconds:7.0f} s {seconds / 60:5.1f} min"


def labelled(value):
    label, sep, path = value.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"{value}: expected LABEL=FILE")
    return label, pathlib.Path(path)


def read_stages(path):
    stages = []
    if path and path.exists():
        for line in path.read_text().splitlines():
            fields = line.split("\t")
            if len(fields) in (3, 4):
                busy = int(fields[3]) if len(fields) == 4 else None
                stages.append((fields[0], float(fields[1]), fields[2], busy))
    return stages


def read_junit(path):
    """(test name, seconds, status) of every test case in a ctest JUnit file."""
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        status = case.get("status") or "run"
        if case.find("failure") is not None:
            status = "failed"
        elif case.find("skipped") is not None:
            status = "skipped"
        cases.append((case.get("name", "?"), float(case.get("time") or 0), status))
    return cases


def read_ninja_log(path):
    """Seconds per object file of the last build of each (.ninja_log keeps every build's lines;
    the last line for an output is the one that made it)."""
    last = {}
    lines = path.read_text().splitlines()
    if not lines or not lines[0].startswith("# ninja log v"):
        return {}
    for line in lines[1:]:
        fields = line.split("\t")
        if len(fields) >= 4 and fields[3].endswith(".o"):
            last[fields[3]] = (int(fields[1]) - int(fields[0])) / 1000
    return last


def short_object(name, build_dir):
    """CMakeFiles/kwd.dir/src/cli/run_command.cpp.o -> kwd: src/cli/run_command.cpp; a unity
    batch (CMakeFiles/kwd.dir/Unity/unity_3_cxx.cxx.o) is named by the files it includes."""
    parts = name.split("/")
    for i, part in enumerate(parts):
        if part.endswith(".dir"):
            source = "/".join(parts[i + 1:])[:-2]
            unity = build_dir / name[:-2]
            if source.startswith("Unity/") and unity.exists():
                included = [line.split("/")[-1].rstrip('"') for line in
                            unity.read_text().splitlines() if line.startswith("#include")]
                source = f"{source} ({' '.join(included)})"
            return f"{part[:-4]}: {source}"
    return name


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stages", type=pathlib.Path)
    parser.add_argument("--junit", type=labelled, action="append", default=[])
    parser.add_argument("--ninja-log", type=labelled, action="append", default=[])
    parser.add_argument("--total", type=float, help="the whole run's wall time")
    parser.add_argument("--budget", type=float, default=45 * 60)
    args = parser.parse_args()
    out = sys.stdout

    print("\n== timing: stages", file=out)
    stages = read_stages(args.stages)
    for name, seconds, status, busy in stages:
        cores = f"cores {busy:3d}% busy" if busy is not None else ""
        print(f"  {name:<12} {minutes(seconds)}  {cores:<16} {'' if status == 'ok' else status}",
              file=out)
    total = args.total if args.total is not None else sum(s[1] for s in stages)
    print(f"  {'total':<12} {minutes(total)}", file=out)

    cases = []
    for label, path in args.junit:
        if not path.exists():
            print(f"  ({label}: no {path}; its tests did not run)", file=out)
            continue
        try:
            cases += [(seconds, label, name, status) for name, seconds, status in read_junit(path)]
        except ET.ParseError as e:
            print(f"  ({label}: {path} unreadable: {e})", file=out)
    if cases:
        print(f"\n== timing: the {min(SLOWEST_TESTS, len(cases))} slowest of {len(cases)} tests",
              file=out)
        for seconds, label, name, status in sorted(cases, reverse=True)[:SLOWEST_TESTS]:
            flag = "" if status in ("run", "passed") else f"  {status}"
            print(f"  {seconds:7.1f} s  {label:<10} {name}{flag}", file=out)
        for label in dict.fromkeys(label for _, label, _, _ in cases):
            mine = [s for s, lab, _, _ in cases if lab == label]
            print(f"  {label}: {len(mine)} tests, {sum(mine):.0f} s summed over tests "
                  "(more than the wall time when ctest ran several at once)", file=out)

    for label, path in args.ninja_log:
        if not path.exists():
            print(f"\n  ({label}: no {path}; nothing built there)", file=out)
            continue
        units = read_ninja_log(path)
        if not units:
            continue
        print(f"\n== timing: {label}: {len(units)} objects, {sum(units.values()):.0f} s of "
              f"compiling summed; the {min(SLOWEST_UNITS, len(units))} slowest", file=out)
        for name, seconds in sorted(units.items(), key=lambda kv: kv[1], reverse=True)[:SLOWEST_UNITS]:
            print(f"  {seconds:7.1f} s  {short_object(name, path.parent)}", file=out)

    if total > args.budget:
        print(f"\nWARNING: this run took {total / 60:.1f} min, over the budget of "
              f"{args.budget / 60:.0f} min (issue 44: a fresh machine's .ci/run stays under it)",
              file=out)


if __name__ == "__main__":
    main()
