#!/usr/bin/env bash
# conda-build runs this in the source tree with PREFIX, CPU_COUNT and CMAKE_ARGS set (the last
# carries the install prefix, the build type, and on macOS the SDK and deployment target).
set -euxo pipefail

# Tests need Catch2 2 and Debian's test stack; warnings stay warnings on conda's compilers.
# shellcheck disable=SC2086 # CMAKE_ARGS is a list of arguments
cmake -S "${SRC_DIR:-.}" -B build-conda -G Ninja ${CMAKE_ARGS:-} \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="${PREFIX}" \
  -DCMAKE_INSTALL_LIBDIR=lib \
  -DKWD_BUILD_TESTS=OFF \
  -DKWD_WERROR=OFF
cmake --build build-conda --parallel "${CPU_COUNT:-1}"
cmake --install build-conda
