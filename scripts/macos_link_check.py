#!/usr/bin/env python3
"""Checks a Mach-O program that scripts/macos_link.sh linked, with LLVM's own tools.

    macos_link_check.py --tbd LIBSYSTEM_TBD --arch arm64|x86_64 --min 13.0 PROGRAM

- Its load commands name only the system's libraries (libSystem, libc++), no @rpath and no
  weak library; it is a macOS executable of the right CPU, whose oldest macOS is --min.
- Every undefined symbol is bound to libSystem (llvm-nm -m says from which library) and is
  exported for this arch by the libSystem stub the linker was given (read here again, apart
  from the linker). None is a weak import: clang makes one of a function newer than the
  deployment target, the only way such a function links for an older macOS.

The stub is the newest SDK's (zig carries one libSystem.tbd, without the version each symbol
came in): that a symbol is there on macOS 13 rests on the headers' availability attributes,
which the compile holds as errors (-Wunguarded-availability-new), and on no weak import.
Prints what it found; exit status 1 on a violation.
"""

import argparse
import re
import subprocess
import sys

import yaml

SYSTEM_LIBRARIES = {"/usr/lib/libSystem.B.dylib", "/usr/lib/libc++.1.dylib"}
CPU = {"arm64": "ARM64", "x86_64": "X86_64"}


def run(*command):
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def tbd_exports(path, arch):
    """Every symbol the stub's documents (libSystem and its re-exported libraries) export for
    arch on macOS. arm64 programs bind to arm64e's list where the stub has no plain arm64."""
    wanted = {f"{arch}-macos", "arm64e-macos"} if arch == "arm64" else {f"{arch}-macos"}

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, _, node: loader.construct_mapping(node))
    symbols = set()
    with open(path, encoding="utf-8") as text:
        for document in yaml.load_all(text, Loader=Loader):
            for section in ("exports", "reexports"):
                for entry in (document or {}).get(section) or []:
                    if not wanted & set(entry.get("targets", [])):
                        continue
                    for key in ("symbols", "weak-symbols", "thread-local-symbols"):
                        symbols.update(entry.get(key) or [])
                    for name in entry.get("objc-classes") or []:
                        symbols.update(f"_OBJC_{kind}_$_{name}" for kind in ("CLASS", "METACLASS"))
    return symbols


def load_commands(program):
    """(cmd, its fields) for each load command of `llvm-objdump --macho --private-headers`."""
    commands, current = [], None
    for line in run("llvm-objdump", "--macho", "--private-headers", program).splitlines():
        if line.startswith("Load command"):
            current = None
            continue
        fields = line.split(None, 1)
        if len(fields) != 2:
            continue
        key, value = fields
        if key == "cmd":
            current = {}
            commands.append((value.strip(), current))
        elif current is not None:
            current.setdefault(key, value.strip())
    return commands


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tbd", required=True)
    parser.add_argument("--arch", required=True, choices=sorted(CPU))
    parser.add_argument("--min", required=True)
    parser.add_argument("program")
    args = parser.parse_args()
    problems = []

    header = run("llvm-objdump", "--macho", "--private-header", args.program)
    if not re.search(rf"\b{CPU[args.arch]}\b.*\bEXECUTE\b", header):
        problems.append(f"not a macOS {args.arch} executable:\n{header}")

    commands = load_commands(args.program)
    libraries = []
    for cmd, fields in commands:
        if cmd in ("LC_LOAD_DYLIB", "LC_LOAD_WEAK_DYLIB", "LC_REEXPORT_DYLIB",
                   "LC_LOAD_UPWARD_DYLIB", "LC_LAZY_LOAD_DYLIB"):
            name = fields.get("name", "").split(" (offset")[0]
            libraries.append(name)
            if cmd != "LC_LOAD_DYLIB" or name not in SYSTEM_LIBRARIES:
                problems.append(f"{cmd} {name}: not one of the system's {sorted(SYSTEM_LIBRARIES)}")
        elif cmd == "LC_RPATH":
            problems.append(f"LC_RPATH {fields.get('path')}: the program must need none")
    builds = [fields for cmd, fields in commands if cmd == "LC_BUILD_VERSION"]
    if len(builds) != 1 or builds[0].get("platform") != "macos" or builds[0].get("minos") != args.min:
        problems.append(f"LC_BUILD_VERSION is not platform macos, minos {args.min}: {builds}")

    exports = tbd_exports(args.tbd, args.arch)
    undefined = []
    for line in run("llvm-nm", "-m", "--undefined-only", args.program).splitlines():
        match = re.match(r"\s*\(undefined\) (weak )?external (\S+) \(from (\S+)\)$", line)
        if not match:
            problems.append(f"an undefined symbol not bound to a library: {line.strip()}")
            continue
        weak, symbol, library = match.groups()
        undefined.append(symbol)
        if weak:
            problems.append(f"{symbol} is a weak import (newer than macOS {args.min}?)")
        if library != "libSystem":
            problems.append(f"{symbol} comes from {library}, not libSystem")
        elif symbol not in exports:
            problems.append(f"{symbol} is not exported by {args.tbd} for {args.arch}")

    print(f"{args.program}: {args.arch}, macOS {args.min} and newer; loads {', '.join(libraries)};"
          f" {len(undefined)} undefined symbols, every one exported by libSystem's stub, none weak"
          if not problems else f"{args.program}: FAILED")
    for problem in problems:
        print("  " + problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
