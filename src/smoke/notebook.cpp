#include "kwd/smoke/notebook.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "kwd/util/size_parse.hpp"

namespace kwd::smoke {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& why) {
  throw NotebookError(path.string() + ": " + why);
}

std::vector<std::string> tags_of(const nlohmann::json& cell) {
  std::vector<std::string> tags;
  const auto metadata = cell.find("metadata");
  if (metadata == cell.end() || !metadata->is_object()) return tags;
  const auto list = metadata->find("tags");
  if (list == metadata->end() || !list->is_array()) return tags;
  for (const auto& t : *list)
    if (t.is_string()) tags.push_back(t.get<std::string>());
  return tags;
}

// nbformat 3 kept cells in worksheets, code in "input", and had heading cells; this is
// the part of nbformat's v3 -> v4 upgrade that running a notebook needs. Old outputs are
// dropped (they are produced again).
nlohmann::json upgraded_from_v3(const nlohmann::json& v3) {
  nlohmann::json cells = nlohmann::json::array();
  const auto worksheets = v3.find("worksheets");
  if (worksheets != v3.end() && worksheets->is_array()) {
    for (const auto& sheet : *worksheets) {
      if (!sheet.is_object() || !sheet.contains("cells") || !sheet["cells"].is_array()) continue;
      for (const auto& old : sheet["cells"]) {
        if (!old.is_object()) continue;
        // Every field read by its type: a damaged file is refused or read, never thrown on.
        const auto type_field = old.find("cell_type");
        const std::string type = type_field != old.end() && type_field->is_string()
                                     ? type_field->get<std::string>()
                                     : "";
        nlohmann::json cell = {{"metadata", old.value("metadata", nlohmann::json::object())}};
        if (!cell["metadata"].is_object()) cell["metadata"] = nlohmann::json::object();
        if (type == "code") {
          cell["cell_type"] = "code";
          cell["source"] = old.value("input", nlohmann::json(""));
          cell["outputs"] = nlohmann::json::array();
          cell["execution_count"] = nullptr;
        } else if (type == "heading") {
          cell["cell_type"] = "markdown";
          const auto level_field = old.find("level");
          const auto level = static_cast<int>(
              std::clamp<std::int64_t>(level_field != old.end() && level_field->is_number_integer()
                                           ? level_field->get<std::int64_t>()
                                           : 1,
                                       1, 6));
          cell["source"] = std::string(static_cast<std::size_t>(level), '#') + " " +
                           joined_text(old.value("source", nlohmann::json("")));
        } else {
          cell["cell_type"] = type == "markdown" ? "markdown" : "raw";
          cell["source"] = old.value("source", nlohmann::json(""));
        }
        cells.push_back(std::move(cell));
      }
    }
  }
  nlohmann::json metadata = v3.value("metadata", nlohmann::json::object());
  if (!metadata.is_object()) metadata = nlohmann::json::object();
  metadata.erase("name");
  return {{"cells", std::move(cells)},
          {"metadata", std::move(metadata)},
          {"nbformat", 4},
          {"nbformat_minor", 4}};
}

}  // namespace

bool CodeCell::tagged(std::string_view tag) const {
  return std::find(tags.begin(), tags.end(), tag) != tags.end();
}

std::string CodeCell::first_line() const {
  std::istringstream lines(source);
  std::string line;
  while (std::getline(lines, line)) {
    const auto start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos) continue;
    line = line.substr(start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
      line.pop_back();
    if (line.size() > 60) line = line.substr(0, 57) + "...";
    return line;
  }
  return "(empty)";
}

std::string joined_text(const nlohmann::json& multiline) {
  if (multiline.is_string()) return multiline.get<std::string>();
  std::string out;
  if (multiline.is_array())
    for (const auto& part : multiline)
      if (part.is_string()) out += part.get_ref<const std::string&>();
  return out;
}

Notebook load_notebook(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, "is a directory, not a notebook");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_notebook(text.str(), path);
}

namespace {

Notebook parse_fields(std::string_view text, const std::filesystem::path& path) {
  Notebook nb;
  nb.path = path;
  try {
    nb.document = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // parse_error, and out_of_range for a number too big for a double ("5e0000000000537").
    // nlohmann's message says where; UTF-8 errors say "ill-formed UTF-8".
    fail(path, std::string("not a notebook: not valid JSON (") + e.what() + ")");
  }
  if (!nb.document.is_object()) fail(path, "not a notebook: the JSON is not an object");
  const auto format = nb.document.find("nbformat");
  if (format == nb.document.end() || !format->is_number_integer())
    fail(path, "not a notebook: no integer 'nbformat' field");
  const int major = format->get<int>();
  if (major == 3) {
    nb.document = upgraded_from_v3(nb.document);
    nb.warnings.push_back("nbformat 3, upgraded to 4 for this run");
  } else if (major != 4) {
    fail(path, "nbformat " + std::to_string(major) + " is not supported (4, or 3 upgraded)");
  }
  if (!nb.document.contains("nbformat_minor") || !nb.document["nbformat_minor"].is_number())
    nb.warnings.push_back("no 'nbformat_minor'");
  auto& cells = nb.document["cells"];
  if (!cells.is_array()) fail(path, "not a notebook: 'cells' is not a list");
  if (cells.empty()) fail(path, "the notebook has no cells");
  if (!nb.document.contains("metadata") || !nb.document["metadata"].is_object()) {
    nb.warnings.push_back("no notebook 'metadata' object");
    nb.document["metadata"] = nlohmann::json::object();
  }

  const auto& metadata = nb.document["metadata"];
  if (const auto spec = metadata.find("kernelspec"); spec != metadata.end() && spec->is_object() &&
                                                     spec->contains("name") &&
                                                     (*spec)["name"].is_string())
    nb.kernel_name = (*spec)["name"].get<std::string>();
  if (const auto exec = metadata.find("execution"); exec != metadata.end() && exec->is_object()) {
    if (exec->contains("timeout") && (*exec)["timeout"].is_number())
      nb.timeout_s = (*exec)["timeout"].get<double>();
    if (exec->contains("allow_errors") && (*exec)["allow_errors"].is_boolean())
      nb.allow_errors = (*exec)["allow_errors"].get<bool>();
  }

  if (const auto ours = metadata.find("kernel_watchdog");
      ours != metadata.end() && ours->is_object() && ours->contains("peak_memory")) {
    const auto& peak = (*ours)["peak_memory"];
    std::optional<std::uint64_t> bytes;
    if (peak.is_number_unsigned()) bytes = peak.get<std::uint64_t>();
    if (peak.is_string()) bytes = util::parse_size(peak.get<std::string>());
    if (bytes && *bytes <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      nb.declared_peak_rss = static_cast<std::int64_t>(*bytes);
    else
      nb.warnings.push_back(
          "metadata.kernel_watchdog.peak_memory is not a size (e.g. \"2G\" or bytes): ignored");
  }

  std::size_t number = 0;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    auto& cell = cells[i];
    if (!cell.is_object()) fail(path, "cell " + std::to_string(i + 1) + " is not an object");
    const auto type = cell.find("cell_type");
    if (type == cell.end() || !type->is_string())
      fail(path, "cell " + std::to_string(i + 1) + " has no 'cell_type'");
    if (*type != "code") continue;
    const auto source = cell.find("source");
    if (source == cell.end() || !(source->is_string() || source->is_array()))
      fail(path, "code cell " + std::to_string(number + 1) +
                     " has no 'source' (a string or a list of strings)");
    if (!cell.contains("outputs")) nb.warnings.push_back("a code cell without 'outputs'");
    CodeCell code;
    code.index = i;
    code.number = ++number;
    code.source = joined_text(*source);
    code.tags = tags_of(cell);
    nb.code_cells.push_back(std::move(code));
  }
  return nb;
}

}  // namespace

Notebook parse_notebook(std::string_view text, const std::filesystem::path& path) {
  try {
    return parse_fields(text, path);
  } catch (const nlohmann::json::exception& e) {
    // A field of a type that no check above expected: the file's fault, and said so.
    fail(path, std::string("not a notebook: ") + e.what());
  }
}

}  // namespace kwd::smoke
