// A notebook handed to `kernel-watchdog smoke` is outside input: any bytes either load as a
// notebook whose cells can be named and run, or are refused with a NotebookError (one line that
// names the file). Anything else escaping is a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kwd/smoke/notebook.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto notebook = kwd::smoke::parse_notebook(text, "/fuzz/input.ipynb");
    for (const auto& cell : notebook.code_cells) {
      (void)cell.first_line();
      (void)cell.tagged("raises-exception");
    }
  } catch (const kwd::smoke::NotebookError&) {
  }
  return 0;
}
