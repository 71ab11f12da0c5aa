#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kwd::smoke {

// A notebook that cannot be run, said in one line that names the file.
struct NotebookError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct CodeCell {
  std::size_t index = 0;   // in the notebook's cells
  std::size_t number = 0;  // among code cells, from 1
  std::string source;
  std::vector<std::string> tags;
  [[nodiscard]] bool tagged(std::string_view tag) const;
  // The first non-empty line, for names ("cell 3: model.fit(x)").
  [[nodiscard]] std::string first_line() const;
};

struct Notebook {
  std::filesystem::path path;
  nlohmann::json document;  // nbformat 4 (an nbformat 3 file is upgraded)
  std::vector<CodeCell> code_cells;
  std::string kernel_name;           // metadata.kernelspec.name; "" when it says none
  std::optional<double> timeout_s;   // metadata.execution.timeout (nbmake)
  std::optional<bool> allow_errors;  // metadata.execution.allow_errors (nbmake)
  // metadata.kernel_watchdog.peak_memory ("2G" or bytes): what `smoke -j auto` counts on for
  // a notebook it has no history of.
  std::optional<std::int64_t> declared_peak_rss;
  std::vector<std::string> warnings;  // what nbclient would tolerate
};

// Reads and checks a notebook. Throws NotebookError: not found, not JSON or not UTF-8,
// not nbformat 3 or 4, no cells, a cell without a usable source.
Notebook load_notebook(const std::filesystem::path& path);
// The same for a notebook's text; `path` names it in errors and is the notebook's path.
Notebook parse_notebook(std::string_view text, const std::filesystem::path& path);

// A cell's "source" as one string: nbformat allows a string or a list of strings.
std::string joined_text(const nlohmann::json& multiline);

}  // namespace kwd::smoke
