# Run by `cmake --install` (see packaging.cmake): the systemd user unit, with ExecStart naming
# the program where this install puts it.
file(READ "${KWD_UNIT_TEMPLATE}" unit)
string(REPLACE "ExecStart=@KWD_EXECUTABLE@"
               "ExecStart=${CMAKE_INSTALL_PREFIX}/${KWD_BINDIR}/kernel-watchdog" unit "${unit}")
set(target "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/lib/systemd/user/kernel-watchdog.service")
message(STATUS "Installing: ${target}")
file(WRITE "${target}" "${unit}")
list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${CMAKE_INSTALL_PREFIX}/lib/systemd/user/kernel-watchdog.service")
