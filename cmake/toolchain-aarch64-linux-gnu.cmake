# Cross-compiles for aarch64 Linux on an x86_64 Debian machine (scripts/aarch64.sh):
#   cmake -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake -DKWD_AARCH64_SYSROOT=DIR
# The compiler is Debian's g++-aarch64-linux-gnu; the libraries and headers CMakeLists.txt finds
# (libzmq, spdlog, fmt, simdjson, OpenSSL, libdw, Catch2...) are the arm64 -dev packages of a
# sysroot directory that scripts/aarch64.sh unpacks (Debian 12's arm64 packages, extracted, not
# installed). Test programs run under qemu-user with that sysroot as the root of their dynamic
# loader and libraries (CMAKE_CROSSCOMPILING_EMULATOR), as Catch2's test discovery does.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

# The sysroot: given on the command line or in the environment on the first configure, kept in
# the cache for later ones (try_compile projects get it through the environment).
if(NOT KWD_AARCH64_SYSROOT AND DEFINED ENV{KWD_AARCH64_SYSROOT})
  set(KWD_AARCH64_SYSROOT "$ENV{KWD_AARCH64_SYSROOT}")
endif()
if(NOT KWD_AARCH64_SYSROOT OR NOT EXISTS "${KWD_AARCH64_SYSROOT}/usr/include/aarch64-linux-gnu")
  message(FATAL_ERROR "KWD_AARCH64_SYSROOT ('${KWD_AARCH64_SYSROOT}') is not an arm64 sysroot: "
                      "scripts/aarch64.sh makes one")
endif()
set(KWD_AARCH64_SYSROOT "${KWD_AARCH64_SYSROOT}" CACHE PATH "The arm64 sysroot directory")
set(ENV{KWD_AARCH64_SYSROOT} "${KWD_AARCH64_SYSROOT}")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES KWD_AARCH64_SYSROOT)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_SYSROOT "${KWD_AARCH64_SYSROOT}")
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# mold links (what CMakeLists.txt's KWD_LINKER=auto picks for the native build): the cross
# compiler finds no aarch64 `ld.mold` for -fuse-ld=mold, so the check there fails and the
# compiler's default `ld` is used; -B makes that default mold's own `ld` (it links aarch64 too).
if(EXISTS /usr/libexec/mold/ld)
  foreach(kind EXE SHARED MODULE)
    set(CMAKE_${kind}_LINKER_FLAGS_INIT "-B/usr/libexec/mold")
  endforeach()
endif()

# Headers, libraries and CMake packages from the sysroot only; programs (pkg-config, python)
# from the build machine.
set(CMAKE_FIND_ROOT_PATH "${KWD_AARCH64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config (libzmq, cpp-httplib) reads the sysroot's .pc files, and prefixes their paths.
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${KWD_AARCH64_SYSROOT}")
set(ENV{PKG_CONFIG_LIBDIR}
    "${KWD_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${KWD_AARCH64_SYSROOT}/usr/share/pkgconfig")
unset(ENV{PKG_CONFIG_PATH})

# aarch64 programs built here run under qemu-user, their loader and libraries the sysroot's.
find_program(KWD_QEMU_AARCH64 qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR "${KWD_QEMU_AARCH64};-L;${KWD_AARCH64_SYSROOT}")
