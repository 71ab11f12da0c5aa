#!/usr/bin/env bash
# Compiles kernel-watchdog for macOS on this Linux machine, with Zig's clang and the macOS
# libc and system headers that PyPI's ziglang wheel carries (scripts/setup.sh puts it in
# .cache/venv-zig):
#   - every source under a darwin/ folder, for arm64 and for x86_64;
#   - the whole program (src/ without its linux/ folders, main.cpp, the HTTP module) and the
#     unit tests that CMake builds on a Mac (tests/unit/ without linux/) for arm64.
# Each file is compiled -fsyntax-only with the project's warnings as errors, by the clang -cc1
# command line that `zig c++ -target <arch>-macos` itself would run (so zig's libc++ and
# macOS headers, the target's defines and builtins), with only its action changed.
#
# What it does not do: link. scripts/macos_link.sh links the program (libzmq and libcrypto are
# opened at run time, so not needed); the unit tests are compiled only (their Catch2 main does
# not compile with zig's clang, see program_sources below). zig carries no Apple frameworks
# (CoreFoundation, IOKit): the IOAccelerator probe reaches them through our own declarations
# (src/probes/darwin/io_kit.hpp), which the GitHub workflow's macOS job checks against Apple's
# headers. zig's libc++ is LLVM's newest, not the one in Xcode's SDK: what Apple's older
# libc++ lacks shows up only on a Mac.
#
# The third-party libraries are header-portable (nlohmann-json, spdlog, fmt, CLI11, cppzmq,
# zmq.h, simdjson, OpenSSL, cpp-httplib, brotli, Catch2): Debian's headers are reached through a
# staging folder of links to them alone, so no glibc or Linux header can mix in.
#
# Usage: scripts/macos_compile.sh [OUT_DIR]   (default build/macos-compile)
# Env: KWD_ZIG_PYTHON (the ziglang venv's python), KWD_BUILD_JOBS (parallel compiles),
#      KWD_MACOS_UNIT_TESTS_ONLY=1 (the unit tests alone: the program was compiled and linked
#      by scripts/macos_link.sh), KWD_MACOS_MIN (the oldest macOS targeted, default 13.0),
#      KWD_MACOS_DARWIN_ONLY=1 (the
#      darwin/ pass alone, e.g. to try another KWD_MACOS_MIN quickly).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
out="$(realpath -m "${1:-build/macos-compile}")"
jobs="${KWD_BUILD_JOBS:-$(nproc)}"
macos_min="${KWD_MACOS_MIN:-13.0}"
# shellcheck source=scripts/macos_common.sh
. scripts/macos_common.sh
kwd_macos_find_zig macos_compile
rm -rf "$out"
mkdir -p "$out/logs"

# Third-party headers only, linked from where Debian puts them.
staging="$out/include"
kwd_macos_stage_headers "$staging" nlohmann spdlog fmt CLI zmq.h zmq.hpp zmq_addon.hpp \
  simdjson.h httplib.h brotli catch2 openssl

# The embedded texts (data tables, the plist, ...) as the CMake build generates them.
cmake -DKWD_EMBED_OUT_DIR="$out/generated" -P cmake/embed_text.cmake

# The project's warnings (scripts/macos_common.sh) and the definitions its targets carry
# (spdlog and fmt compiled, fmt outside spdlog; the unit tests' fake NVML folder).
flags=(-std=c++20 -fno-sanitize=all -g0 "${kwd_macos_warnings[@]}"
  -DKWD_VERSION=\"macos-compile\" -DKWD_SOURCE_DIR=\"$root\"
  -DSPDLOG_COMPILED_LIB -DSPDLOG_SHARED_LIB -DSPDLOG_FMT_EXTERNAL -DFMT_SHARED
  -DSIMDJSON_THREADS_ENABLED=1 -DKWD_FAKE_NVML_DIR=\"/nonexistent\"
  -I"$root/include" -I"$out/generated" -isystem "$staging")
# cpp-httplib's own definitions (TLS, zlib, brotli support), as its pkg-config file says.
read -r -a httplib_flags <<<"$(pkg-config --cflags-only-other cpp-httplib)"

# The -cc1 command line zig's driver makes for one target, as a response file, with its
# action made -fsyntax-only and without the output and input it was asked about.
cc1_args() {  # ARCH FILE EXTRA_FLAGS...
  local arch="$1" file="$2"
  shift 2
  echo 'int main() {}' >"$out/probe.cpp"
  "$zig" c++ -target "$arch-macos.$macos_min" "${flags[@]}" "$@" -### -c "$out/probe.cpp" \
    -o "$out/probe.o" 2>&1 | grep -F -- ' "-cc1" ' |
    python3 -c '
import shlex, sys
args = shlex.split(sys.stdin.read())[2:]  # past the zig executable and -cc1
i = args.index("-o")
del args[i:i + 2]
assert args[-1].endswith("probe.cpp"), args[-1]
args = ["-fsyntax-only" if a == "-emit-obj" else a for a in args[:-1]]
sys.stdout.write("\n".join(shlex.quote(a) for a in args) + "\n")' >"$file"
  grep -qx -- -fsyntax-only "$file"
}

# The standard library and JSON/log headers that most files include, parsed once per target
# into a precompiled header that the whole-program pass puts before every file (it halves
# that pass). The darwin/ pass goes without it: there a header a file forgets is still missed.
precompile() {  # ARCH RSP PCH_RSP
  local arch="$1" rsp="$2" rsp_pch="$3"
  cat >"$out/common-$arch.hpp" <<'HEADERS'
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
HEADERS
  sed 's/^-fsyntax-only$/-emit-pch/' "$rsp" >"$out/pch-$arch.rsp"
  "$zig" clang -cc1 @"$out/pch-$arch.rsp" -x c++-header "$out/common-$arch.hpp" \
    -o "$out/common-$arch.pch"
  cp "$rsp" "$rsp_pch"
  printf '%s\n' -include-pch "$out/common-$arch.pch" >>"$rsp_pch"
}

# ARCH [pch] followed by the sources on stdin; each one's diagnostics go to logs/ARCH/.
compile_all() {
  local arch="$1" rsp="$out/cc1-$1.rsp" rsp_http="$out/cc1-$1-http.rsp"
  local rsp_default="$rsp"
  cc1_args "$arch" "$rsp"
  cc1_args "$arch" "$rsp_http" "${httplib_flags[@]}"
  if [ "${2:-}" = pch ]; then
    rsp_default="$out/cc1-$arch-pch.rsp"
    precompile "$arch" "$rsp" "$rsp_default"
  fi
  mkdir -p "$out/logs/$arch"
  # One clang per file, $jobs at once; a file's log is kept only when it failed.
  xargs -P "$jobs" -I{} sh -c '
    zig="$1" rsp_http="$2" logs="$3" rsp="$4" src="$5"
    case "$src" in */httplib_module/*) rsp="$rsp_http" ;; esac
    log="$logs/$src.log"
    mkdir -p "$(dirname "$log")"
    if "$zig" clang -cc1 @"$rsp" "$src" >"$log" 2>&1; then rm -f "$log"; else exit 1; fi
  ' sh "$zig" "$rsp_http" "$out/logs/$arch" "$rsp_default" {}
}

# The whole-program pass compiles its sources in batches of 16, one translation unit each (as
# CMake's unity build does on Linux, KWD_UNITY_BATCH_SIZE): the headers and templates every
# file instantiates are parsed once a batch. It took 274 s in CI file by file, alone on the
# machine; 99 s here in batches of 8 that never spanned two folders, 65 s in batches of 16 that
# may (CMake's batches span folders too, so the sources already compile together that way).
# The HTTP module, which needs flags of its own, stays a file by itself.
unity_batches() { kwd_macos_unity_batches "$out" "$root" batch; }

darwin_sources() { find src -path '*/darwin/*' -name '*.cpp' | sort; }
# The sources CMakeLists.txt builds into the program on Apple platforms, the HTTP module, and
# the unit tests tests/CMakeLists.txt builds there. Not tests/unit/main.cpp, which is Catch2's
# main alone: inside Catch2 2's single header, zig's clang 22 with macOS's headers loses
# <float.h>'s and <math.h>'s macros (DBL_MAX_10_EXP, INFINITY), Apple's toolchain does not.
program_sources() {
  find src tests/unit -name '*.cpp' | grep -v -e '/linux/' -e '^tests/unit/main\.cpp$' | sort
}

# KWD_MACOS_UNIT_TESTS_ONLY=1 (scripts/test.sh, after its macos stage compiled and linked the
# program for both architectures with scripts/macos_link.sh): the unit tests alone.
if [ "${KWD_MACOS_UNIT_TESTS_ONLY:-0}" = 1 ]; then
  program_sources() { find tests/unit -name '*.cpp' | grep -v -e '/linux/' -e '^tests/unit/main\.cpp$' | sort; }
fi

status=0
start=$SECONDS
darwin_count=0
if [ "${KWD_MACOS_UNIT_TESTS_ONLY:-0}" != 1 ]; then
  darwin_count="$(darwin_sources | wc -l)"
  darwin_sources | compile_all x86_64 || status=1
  echo "macos_compile: x86_64: the $darwin_count darwin/ sources in $((SECONDS - start)) s" >&2
fi
program_count=0
if [ "${KWD_MACOS_DARWIN_ONLY:-0}" = 0 ]; then
  start=$SECONDS
  program_count="$(program_sources | wc -l)"
  program_sources | unity_batches | compile_all aarch64 pch || status=1
  what="the whole program and its unit tests"
  [ "${KWD_MACOS_UNIT_TESTS_ONLY:-0}" = 1 ] && what="the unit tests"
  echo "macos_compile: aarch64: $what, $program_count sources in $(find "$out/unity" -name '*.cpp' | wc -l) batches, in $((SECONDS - start)) s" >&2
fi

failed="$(kwd_macos_show_logs "$out/logs")"
if [ "$status" != 0 ]; then
  echo "macos_compile: FAILED ($failed files did not compile)" >&2
  exit 1
fi
echo "macos_compile: every file compiled for macOS ($darwin_count darwin/ x86_64, $program_count aarch64)" >&2
