#pragma once

#include <string>
#include <string_view>

namespace kwd::report {

// Text from a report (kernel stderr, cell code, evidence, paths) made safe to print on a
// terminal: C0 controls other than tab and newline, DEL and the C1 controls (U+0080..U+009F)
// become U+FFFD, so a report cannot set the window title, write the clipboard (OSC 52), clear
// the screen or move the cursor. A CRLF is a newline. Bytes that are not UTF-8 become U+FFFD.
std::string terminal_safe(std::string_view text);

// Text without its ANSI escape sequences (CSI "ESC [ ... letter", as IPython colours its
// tracebacks): for files and for logs that are not a terminal.
std::string without_ansi_sequences(std::string_view text);

}  // namespace kwd::report
