# cmake -DPROGRAM=... -DSHELL_NAME=bash|zsh -DOUTPUT=... -P write_completion.cmake
# The completion script, as the built program writes it from its own command tree.
execute_process(COMMAND ${PROGRAM} completion ${SHELL_NAME} OUTPUT_FILE ${OUTPUT}
                RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} completion ${SHELL_NAME} failed: ${result}")
endif()
