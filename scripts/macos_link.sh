#!/usr/bin/env bash
# Compiles kernel-watchdog for macOS arm64 and x86_64 on this Linux machine, with the Zig of
# scripts/macos_compile.sh (PyPI's ziglang, .cache/venv-zig), links it for arm64 (and x86_64
# with KWD_MACOS_LINK_ARCHS="arm64 x86_64") and checks each Mach-O file it links.
#
# What is linked, and against what:
#   - the program as CMakeLists.txt builds it on Apple platforms (src/ without its linux/
#     folders, src/main.cpp; not the HTTP module, a module of its own), compiled for each arch
#     with the project's warnings as errors, macOS 13 the oldest (KWD_MACOS_MIN), in batches;
#   - macOS's libSystem as the stub (.tbd) that zig carries, and zig's own libc++ and libc++abi,
#     built from LLVM's sources and linked statically (zig's cache: .cache/zig-global). zig's
#     linker fails on any symbol that nothing defines; it is never told otherwise;
#   - not libzmq or libcrypto: the program opens them at their first use, on macOS as on
#     Linux (src/platform/deferred_lib*.cpp; their names and places in
#     src/platform/darwin/library_names.cpp). Core Foundation and I/O Kit are opened at run
#     time too (src/probes/darwin/io_kit_library.cpp);
#   - spdlog, fmt and simdjson built here for macOS from Debian's own source packages, of the
#     versions of the -dev packages installed (the headers every other build here uses).
#     apt-get source fetches them through a private apt configuration (deb-src lines for
#     Debian's archive, checked by apt against Debian's keys; the system's sources untouched).
#     They are kept as static archives in .cache/macos-deps/, keyed by their versions, zig's,
#     the arch and the oldest macOS. Built, not used header-only: simdjson has no header-only
#     mode (Debian ships simdjson.h without simdjson.cpp), and spdlog's and fmt's would compile
#     their implementations into every batch again. nlohmann-json, CLI11 and cppzmq are
#     header-only: Debian's headers, staged as for the compile check.
#
# What is checked (scripts/macos_link_check.py, with Debian's llvm: llvm-objdump --macho,
# llvm-nm): each program is a macOS executable of its CPU whose oldest macOS is 13.0; its load
# commands name only /usr/lib/libSystem.B.dylib (or /usr/lib/libc++.1.dylib), no @rpath; every
# undefined symbol is bound to libSystem and exported by its stub for that arch, and none is a
# weak import (how clang links a function newer than the deployment target).
#
# What cannot be checked here: running it. The stub is the newest SDK's and says nothing of
# when each symbol came; that macOS 13 has them rests on the headers' availability attributes
# (an error at compile time here) and on no weak import. zig's libc++ is LLVM's newest, linked
# in, not Xcode's. Whether it starts, finds libzmq and libcrypto (Homebrew's), reads its
# probes and writes a report is the GitHub workflow's macOS job, which builds it with Apple's
# toolchain and Homebrew's libraries and runs it (arm64 only; x86_64 is compiled here, never run).
#
# Usage: scripts/macos_link.sh [OUT_DIR]   (default build/macos-link; the programs are
#        OUT_DIR/kernel-watchdog-ARCH for each arch linked)
# Env: KWD_ZIG_PYTHON, KWD_BUILD_JOBS, KWD_MACOS_MIN (as scripts/macos_compile.sh),
#      KWD_MACOS_OPT (the program's optimisation level, default -O0: every call the sources make
#      stays a symbol the linker must find, where an optimiser may inline or drop some; and
#      both arches compiled in 137 s here against 221 s at -O1, 2 cores, caches warm).
#
# Time (this machine, 2 cores, KWD_BUILD_JOBS=2, alone): 137 s with .cache/macos-deps and
# .cache/zig-global filled; the first run adds ~35 s for spdlog, fmt and simdjson and ~170 s
# for zig's libc++ (both arches).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
out="$(realpath -m "${1:-build/macos-link}")"
jobs="${KWD_BUILD_JOBS:-$(nproc)}"
macos_min="${KWD_MACOS_MIN:-13.0}"
opt="${KWD_MACOS_OPT:--O0}"
# shellcheck source=scripts/macos_common.sh
. scripts/macos_common.sh
kwd_macos_find_zig macos_link
zig_version="$("$zig" version)"
tbd="$(dirname "$zig")/lib/libc/darwin/libSystem.tbd"
# zig builds its libc++ once for each target and keeps it here, across runs and build folders.
export ZIG_GLOBAL_CACHE_DIR="${ZIG_GLOBAL_CACHE_DIR:-$root/.cache/zig-global}"
deps="$root/.cache/macos-deps"
rm -rf "$out"
mkdir -p "$out/logs" "$deps"
started=$SECONDS

# Debian's source package of an installed -dev package, unpacked (patches applied) into
# .cache/macos-deps/src/ once per version; prints its folder.
debian_source() {  # BINARY_PACKAGE
  local source version folder apt_dir
  read -r source version < <(dpkg-query -W -f='${source:Package} ${source:Version}\n' "$1")
  folder="$deps/src/${source}_${version#*:}"
  if [ ! -f "$folder/.unpacked" ]; then
    apt_dir="$out/apt"  # apt's lists: fetched again for each miss, never kept stale
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$deps/src"
    echo "deb-src http://deb.debian.org/debian $(. /etc/os-release && echo "$VERSION_CODENAME") main" \
      >"$apt_dir/sources.list"
    local apt=(apt-get -q -o "Dir::Etc::SourceList=$apt_dir/sources.list"
      -o Dir::Etc::SourceParts=/nonexistent -o "Dir::State::Lists=$apt_dir/lists"
      -o "Dir::Cache=$apt_dir/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
    if [ ! -f "$apt_dir/updated" ]; then
      "${apt[@]}" update >&2 && touch "$apt_dir/updated"
    fi
    rm -rf "$folder" "$folder.tmp" && mkdir -p "$folder.tmp"
    if ! (cd "$folder.tmp" && "${apt[@]}" source "$source=$version" >&2); then
      echo "macos_link: Debian's archive has no $source $version, the version of $1 installed" \
        "(apt-get upgrade $1?)" >&2
      return 1
    fi
    mv "$folder.tmp/$(cd "$folder.tmp" && find . -mindepth 1 -maxdepth 1 -type d | head -n 1)" "$folder"
    rm -rf "$folder.tmp"
    touch "$folder/.unpacked"
  fi
  echo "$folder"
}

spdlog_src="$(debian_source libspdlog-dev)"
fmt_src="$(debian_source libfmt-dev)"
simdjson_src="$(debian_source libsimdjson-dev)"

# Zig's target for an arch of Apple's name.
zig_target() { case "$1" in arm64) echo "aarch64-macos.$macos_min" ;; *) echo "$1-macos.$macos_min" ;; esac; }

# The three libraries for one arch, as static archives (built once per key); prints their folder.
# Compiled as their own builds compile them (Release, -O2; spdlog with fmt from outside), their
# warnings unheard (-w: their code, not ours; clang 22 deprecates their literal operators).
third_party() {  # ARCH
  local arch="$1" key lib
  key="$deps/build/$(basename "$spdlog_src")+$(basename "$fmt_src")+$(basename "$simdjson_src")/zig-$zig_version-macos-$macos_min-$arch"
  if [ ! -f "$key/.built" ]; then
    rm -rf "$key" && mkdir -p "$key/obj"
    {
      for file in "$fmt_src"/src/format.cc "$fmt_src"/src/os.cc; do echo "fmt $file"; done
      for file in "$spdlog_src"/src/*.cpp; do
        [ "$(basename "$file")" = fmt.cpp ] || echo "spdlog $file"  # spdlog's bundled fmt: not used
      done
      echo "simdjson $simdjson_src/singleheader/simdjson.cpp"
    } | xargs -P "$jobs" -L 1 sh -c '
      obj="$1" lib="$2" file="$3"
      "$KWD_ZIG" c++ -target "$KWD_TARGET" -std=c++20 -O2 -g0 -w -DNDEBUG -DSPDLOG_COMPILED_LIB \
        -DSPDLOG_FMT_EXTERNAL -DSIMDJSON_THREADS_ENABLED=1 -I"$KWD_SPDLOG/include" \
        -I"$KWD_FMT/include" -I"$KWD_SIMDJSON/singleheader" -c "$file" \
        -o "$obj/$lib-$(basename "$file").o"
    ' sh "$key/obj"
    for lib in fmt spdlog simdjson; do
      "$zig" ar rcs "$key/lib$lib.a" "$key/obj/$lib-"*.o
    done
    rm -rf "$key/obj"
    touch "$key/.built"
  fi
  echo "$key"
}
export KWD_ZIG="$zig" KWD_SPDLOG="$spdlog_src" KWD_FMT="$fmt_src" KWD_SIMDJSON="$simdjson_src"

# The header-only libraries and the headers of those opened at run time, from Debian.
staging="$out/include"
kwd_macos_stage_headers "$staging" nlohmann CLI zmq.h zmq.hpp zmq_addon.hpp openssl
cmake -DKWD_EMBED_OUT_DIR="$out/generated" -P cmake/embed_text.cmake
flags=(-std=c++20 "$opt" -g0 "${kwd_macos_warnings[@]}" -DNDEBUG
  -DKWD_VERSION=\"macos-link\" -DKWD_SOURCE_DIR=\"$root\"
  -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSIMDJSON_THREADS_ENABLED=1
  -I"$root/include" -I"$out/generated" -isystem "$spdlog_src/include" -isystem "$fmt_src/include"
  -isystem "$simdjson_src/singleheader" -isystem "$staging")

batches="$(kwd_macos_program_sources | kwd_macos_unity_batches "$out" "$root" program)"
status=0
# Linked: KWD_MACOS_LINK_ARCHS (default arm64). x86_64 is compiled whole but not linked by
# default: its link built zig's libc++ and the three libraries a second time on a fresh machine
# (125 of the stage's 428 s), for a check of undefined symbols against the same libSystem stub
# that arm64's link makes; KWD_MACOS_LINK_ARCHS="arm64 x86_64" links both.
link_archs=" ${KWD_MACOS_LINK_ARCHS:-arm64} "
for arch in arm64 x86_64; do
  start=$SECONDS
  export KWD_TARGET KWD_OBJ="$out/obj/$arch"
  KWD_TARGET="$(zig_target "$arch")"
  mkdir -p "$KWD_OBJ" "$out/logs/$arch"
  linked=0
  if [[ "$link_archs" == *" $arch "* ]]; then linked=1; fi
  libs=""
  if [ "$linked" = 1 ]; then libs="$(third_party "$arch")"; fi
  deps_s=$((SECONDS - start))
  # One compile per batch, $jobs at once; a batch's log is kept only when it failed.
  if ! echo "$batches" | xargs -P "$jobs" -I{} bash -c '
      log="$1/$(basename "$2").log"
      if "$KWD_ZIG" c++ -target "$KWD_TARGET" "${@:3}" -c "$2" -o "$KWD_OBJ/$(basename "$2").o" \
        >"$log" 2>&1; then rm -f "$log"; else exit 1; fi
    ' bash "$out/logs/$arch" {} "${flags[@]}"; then
    status=1
    continue
  fi
  compile_s=$((SECONDS - start - deps_s))
  if [ "$linked" = 0 ]; then
    echo "macos_link: $arch: $(echo "$batches" | wc -l) batches compiled in ${compile_s} s (not linked: KWD_MACOS_LINK_ARCHS)" >&2
    continue
  fi
  program="$out/kernel-watchdog-$arch"
  if ! "$zig" c++ -target "$KWD_TARGET" "$KWD_OBJ"/*.o "$libs/libspdlog.a" "$libs/libfmt.a" \
    "$libs/libsimdjson.a" -o "$program" >"$out/logs/$arch/link.log" 2>&1; then
    status=1
    continue
  fi
  rm -f "$out/logs/$arch/link.log"
  echo "macos_link: $arch: libraries in ${deps_s} s, $(echo "$batches" | wc -l) batches in ${compile_s} s, linked in $((SECONDS - start - deps_s - compile_s)) s" >&2
  python3 scripts/macos_link_check.py --tbd "$tbd" --arch "$arch" --min "$macos_min" "$program" ||
    status=1
done

kwd_macos_show_logs "$out/logs" >/dev/null
if [ "$status" != 0 ]; then
  echo "macos_link: FAILED" >&2
  exit 1
fi
echo "macos_link: kernel-watchdog compiled for macOS arm64 and x86_64, linked and checked for ${KWD_MACOS_LINK_ARCHS:-arm64} in $((SECONDS - started)) s" >&2
