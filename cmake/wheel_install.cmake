# What a Python wheel (scikit-build-core, pyproject.toml) installs, instead of packaging.cmake's
# system layout. The program and its HTTP module go inside the package, in
# kernel_watchdog/_bin (the module beside the program, where src/http/module.cpp looks first).
# Inside the package, not in the scripts directory: only there is the path from the program
# to the libraries that auditwheel bundles (kernel_watchdog.libs) the same under every install
# scheme (virtualenv, --user, --target, pipx, uv), so a relative RPATH reaches them. The
# `kernel-watchdog` on PATH is the package's console script, which execs the program.
install(TARGETS kernel-watchdog RUNTIME DESTINATION ${SKBUILD_PLATLIB_DIR}/kernel_watchdog/_bin)
install(TARGETS kernel-watchdog-http LIBRARY DESTINATION ${SKBUILD_PLATLIB_DIR}/kernel_watchdog/_bin)
# The crash handler the shim loads into kernels, beside the program (src/stacks/crash_message.cpp).
if(TARGET kernel-watchdog-crash)
  install(TARGETS kernel-watchdog-crash LIBRARY DESTINATION ${SKBUILD_PLATLIB_DIR}/kernel_watchdog/_bin)
endif()

# libzmq and libcrypto are opened at their first use, not linked (deferred_library.hpp), so
# auditwheel cannot see them: the wheel carries them under their sonames beside the program,
# where the deferred loader looks first. auditwheel then bundles what they need in turn
# (libsodium, libpgm, libnorm, Kerberos...), as for any library in the wheel.
if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  find_library(KWD_WHEEL_LIBZMQ NAMES libzmq.so.5 PATHS ${LIBZMQ_LIBRARY_DIRS} REQUIRED)
  find_library(KWD_WHEEL_LIBCRYPTO NAMES libcrypto.so.3 REQUIRED)
  foreach(library KWD_WHEEL_LIBZMQ KWD_WHEEL_LIBCRYPTO)
    get_filename_component(soname ${${library}} NAME)
    file(REAL_PATH ${${library}} real)
    install(FILES ${real} DESTINATION ${SKBUILD_PLATLIB_DIR}/kernel_watchdog/_bin RENAME ${soname})
  endforeach()
endif()
