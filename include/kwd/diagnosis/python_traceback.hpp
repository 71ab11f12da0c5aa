#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kwd::diagnosis {

struct PythonFrame {
  std::string file;
  int line = 0;
  std::string function;
};

// What Python's faulthandler printed when the interpreter died of a fatal signal.
struct FaulthandlerDump {
  std::string fatal_error;          // "Segmentation fault", "Aborted", ...
  std::string thread;               // "Current thread 0x00007f..." header of the crashing thread
  std::vector<PythonFrame> frames;  // the crashing thread, most recent call first
  std::string text;                 // the whole dump, as printed
};

// The last faulthandler dump in `text`, if any.
std::optional<FaulthandlerDump> parse_faulthandler(std::string_view text);

// One frame line of a faulthandler dump ('  File "x.py", line 3 in f'), found anywhere in `line`.
std::optional<PythonFrame> parse_faulthandler_frame(std::string_view line);

// ipykernel compiles each cell to a file named /tmp/ipykernel_<pid>/<hash>.py.
bool is_cell_file(std::string_view file);

// The report's `python_traceback` section: {source, fatal_error, thread, text,
// frames: [{file, line, function, in_cell, code?}]}. `execution` (may be null) lets frames in
// the cell that was running carry the line of code they point at. Null when no text
// holds a faulthandler dump.
nlohmann::json find_python_traceback(const nlohmann::json& report);

}  // namespace kwd::diagnosis
