#include "kwd/report/report_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "kwd/platform/regular_file.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::report {
namespace {

using nlohmann::json;

// Thrown from the parser callback to stop at the first level too deep, before the parser has
// built (or the caller could render) anything deeper.
struct TooDeep {};

ReportFile refused(const std::string& name, std::string why) {
  return {name, std::nullopt, std::move(why)};
}

ReportFile too_large(const std::string& name) {
  return refused(name, "larger than " + std::to_string(kMaxReportBytes >> 20) + " MiB");
}

}  // namespace

ReportFile parse_report(std::string_view text, const std::string& name) {
  if (text.size() > kMaxReportBytes) return too_large(name);
  const json::parser_callback_t limit_depth = [](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxReportDepth)
      throw TooDeep{};
    return true;
  };
  try {
    json doc = json::parse(text, limit_depth);
    if (!doc.is_object()) return refused(name, "not a JSON object");
    return {name, std::move(doc), {}};
  } catch (const TooDeep&) {
    return refused(name, "nested deeper than " + std::to_string(kMaxReportDepth) + " levels");
  } catch (const json::parse_error& e) {
    return refused(name, "not valid JSON (at byte " + std::to_string(e.byte) + ")");
  } catch (const std::exception& e) {
    return refused(name, e.what());
  }
}

ReportFile read_report_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  // Only a regular file is opened: a FIFO put in place of a report cannot hang the reader.
  auto file = platform::open_regular_file(AT_FDCWD, path.c_str());
  if (file.not_regular) return refused(name, "not a regular file");
  if (!file.fd) return refused(name, std::string("cannot open: ") + std::strerror(file.error));
  const util::UniqueFd fd = std::move(file.fd);
  if (static_cast<std::uintmax_t>(file.st.st_size) > kMaxReportBytes) return too_large(name);
  // Reading stops one byte past the bound: the file may have grown since the fstat.
  const auto text = platform::read_up_to(fd.get(), kMaxReportBytes + 1);
  if (!text) return refused(name, std::string("cannot read: ") + std::strerror(errno));
  return parse_report(*text, name);
}

}  // namespace kwd::report
