# `cmake --install` and CPack: the program, its HTTP module, the man page, bash and zsh
# completion and the service templates, where a Debian system looks for each; `cpack -G DEB`
# in the build directory makes kernel-watchdog_VERSION_ARCH.deb.
if(SKBUILD)
  include(${CMAKE_SOURCE_DIR}/cmake/wheel_install.cmake)
  return()
endif()

include(GNUInstallDirs)

install(TARGETS kernel-watchdog RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The module is looked for in ../lib/kernel-watchdog beside the executable (src/http/module.cpp).
install(TARGETS kernel-watchdog-http LIBRARY DESTINATION lib/kernel-watchdog)
if(TARGET kernel-watchdog-crash)
  install(TARGETS kernel-watchdog-crash LIBRARY DESTINATION lib/kernel-watchdog)
endif()
install(FILES ${CMAKE_SOURCE_DIR}/docs/kernel-watchdog.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

set(KWD_COMPLETIONS ${CMAKE_BINARY_DIR}/completions)
add_custom_command(
  OUTPUT ${KWD_COMPLETIONS}/kernel-watchdog ${KWD_COMPLETIONS}/_kernel-watchdog
  COMMAND ${CMAKE_COMMAND} -E make_directory ${KWD_COMPLETIONS}
  COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:kernel-watchdog> -DSHELL_NAME=bash
          -DOUTPUT=${KWD_COMPLETIONS}/kernel-watchdog -P ${CMAKE_SOURCE_DIR}/cmake/write_completion.cmake
  COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:kernel-watchdog> -DSHELL_NAME=zsh
          -DOUTPUT=${KWD_COMPLETIONS}/_kernel-watchdog -P ${CMAKE_SOURCE_DIR}/cmake/write_completion.cmake
  DEPENDS kernel-watchdog ${CMAKE_SOURCE_DIR}/cmake/write_completion.cmake
  COMMENT "Writing the bash and zsh completion"
  VERBATIM)
add_custom_target(kernel-watchdog-completions ALL
                  DEPENDS ${KWD_COMPLETIONS}/kernel-watchdog ${KWD_COMPLETIONS}/_kernel-watchdog)
install(FILES ${KWD_COMPLETIONS}/kernel-watchdog
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
install(FILES ${KWD_COMPLETIONS}/_kernel-watchdog
        DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)

# The systemd user unit with the installed program's path, so that
# `systemctl --user enable --now kernel-watchdog` works without `service install`; the launchd
# agent stays a template (`service install` fills in the user's paths).
# The prefix is the one installed to (`cmake --install --prefix`, CPack's /usr), known only
# then: the unit is written by a script at install time.
install(CODE "set(KWD_UNIT_TEMPLATE \"${CMAKE_SOURCE_DIR}/systemd/kernel-watchdog.service\")
              set(KWD_BINDIR \"${CMAKE_INSTALL_BINDIR}\")")
install(SCRIPT ${CMAKE_SOURCE_DIR}/cmake/install_systemd_unit.cmake)
install(FILES ${CMAKE_SOURCE_DIR}/launchd/org.kernel-watchdog.daemon.plist
        DESTINATION ${CMAKE_INSTALL_DATADIR}/kernel-watchdog/launchd)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/LICENSE
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_PACKAGE_NAME kernel-watchdog)
set(CPACK_PACKAGE_VENDOR "kernel-watchdog")
set(CPACK_PACKAGE_CONTACT "kernel-watchdog maintainers <maintainers@kernel-watchdog.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "crash watchdog for Jupyter kernels")
set(CPACK_PACKAGE_DESCRIPTION
    "Watches Jupyter kernels from outside and, when one dies, writes a crash report naming the signal or exit code, the running cell, the memory trend, the GPU state and what to do.")
set(CPACK_PACKAGE_HOMEPAGE_URL "https://github.com/kernel-watchdog/kernel-watchdog")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_SOURCE_DIR}/LICENSE)
# Staged with DESTDIR, so that the install prefix is /usr itself while the unit is written.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
# The linked shared libraries' packages, as dpkg-shlibdeps finds them (libspdlog1.10...).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  # Opened at first use, not linked (platform/deferred_library.hpp): dpkg-shlibdeps cannot see
  # them, so they are named here (libcrypto.so.3 is Debian's libssl3).
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libzmq5 (>= 4.3), libssl3 (>= 3.0.0)")
  # Also opened at run time, and optional: without it `stacks` and hang reports have no
  # native frames and say so (src/stacks/linux/libdw_api.cpp).
  set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libdw1")
endif()
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-ipykernel, jupyter-client")
set(CPACK_STRIP_FILES ON)
include(CPack)
