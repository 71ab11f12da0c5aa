# shellcheck shell=bash
# What scripts/macos_compile.sh and scripts/macos_link.sh share: Zig's toolchain from the
# ziglang venv, the third-party headers staged apart from the rest of /usr/include, the
# project's warnings, and the unity batches. Sourced, not run; the caller has cd'd to the root.

# Sets $zig to the ziglang venv's zig (KWD_ZIG_PYTHON: the venv's python), or exits.
kwd_macos_find_zig() {  # NAME (the script, for the messages)
  local python="${KWD_ZIG_PYTHON:-.cache/venv-zig/bin/python}"
  if ! zig="$("$python" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))' 2>/dev/null)"; then
    echo "$1: no ziglang in $python (scripts/setup.sh makes .cache/venv-zig)" >&2
    exit 1
  fi
  echo "$1: zig $("$zig" version), clang $("$zig" clang --version | sed -n 's/.*clang version \([^ ]*\).*/\1/p')" >&2
}

# Third-party headers only, linked from where Debian puts them into DIR: no glibc or Linux
# header can mix in. OpenSSL's headers are split: the configuration ones live in the
# multiarch folder.
kwd_macos_stage_headers() {  # DIR ENTRY... (names under /usr/include; "openssl" for OpenSSL's)
  local staging="$1" entry header multiarch
  shift
  multiarch="$(gcc -print-multiarch 2>/dev/null || dpkg-architecture -qDEB_HOST_MULTIARCH)"
  mkdir -p "$staging"
  for entry in "$@"; do
    if [ "$entry" = openssl ]; then
      mkdir -p "$staging/openssl"
      for header in /usr/include/openssl/*.h "/usr/include/$multiarch/openssl/"*.h; do
        ln -sf "$header" "$staging/openssl/"
      done
      continue
    fi
    [ -e "/usr/include/$entry" ] || { echo "/usr/include/$entry missing" >&2; return 1; }
    ln -s "/usr/include/$entry" "$staging/$entry"
  done
}

# CMakeLists.txt's KWD_WARNINGS (-Wno-restrict is GCC's alone; this clang calls Catch2's
# __COUNTER__ a C2y extension).
kwd_macos_warnings=(-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Werror
  -Wno-c2y-extensions)

# The sources CMakeLists.txt builds into the program on Apple platforms (src/ without its linux/
# folders and without the HTTP module, which is a module of its own).
kwd_macos_program_sources() {
  find src -name '*.cpp' | grep -v -e '/linux/' -e '/httplib_module/' | sort
}

# Reads sources on stdin; writes batches of 16 into OUT/unity/PREFIX_NNN.cpp, one translation
# unit each (as CMake's unity build does on Linux, KWD_UNITY_BATCH_SIZE): the headers and
# templates every file instantiates are parsed once a batch. Prints the batches' paths; the HTTP
# module, which needs flags of its own, is printed as itself, alone.
kwd_macos_unity_batches() {  # OUT ROOT PREFIX
  mkdir -p "$1/unity"
  python3 -c '
import os, sys
out, root, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
batches, current = [], []
for src in (line.strip() for line in sys.stdin):
    if not src:
        continue
    if "/httplib_module/" in src:
        print(src)
        continue
    if len(current) == 16:
        batches.append(current)
        current = []
    current.append(src)
if current:
    batches.append(current)
for i, batch in enumerate(batches):
    path = os.path.join(out, "unity", "%s_%03d.cpp" % (prefix, i))
    with open(path, "w") as f:
        for src in batch:
            f.write("#include \"%s/%s\"\n" % (root, src))
    print(path)
' "$1" "$2" "$3"
}

# Each failed compile's log kept under DIR, its first 60 lines on stderr; prints their count.
kwd_macos_show_logs() {  # DIR
  local failed=0 log
  while IFS= read -r log; do
    failed=$((failed + 1))
    echo "== ${log#"$1/"}" >&2
    head -n 60 "$log" >&2
  done < <(find "$1" -name '*.log' | sort)
  echo "$failed"
}
