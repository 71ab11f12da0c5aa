# What a Python wheel (scikit-build-core, pyproject.toml) installs, instead of packaging.cmake's
# system layout. The program goes to the wheel's scripts (a virtualenv's bin/, ~/.local/bin
# with --user, a pipx/uv tool's bin), as ruff's and uv's wheels do: it is on PATH as itself,
# no Python starts before it. Its HTTP module goes to the data tree's lib/kernel-watchdog,
# which lands at bin/../lib/kernel-watchdog, where the program looks for it
# (src/http/module.cpp).
install(TARGETS kernel-watchdog RUNTIME DESTINATION ${SKBUILD_SCRIPTS_DIR})
install(TARGETS kernel-watchdog-http LIBRARY DESTINATION ${SKBUILD_DATA_DIR}/lib/kernel-watchdog)
