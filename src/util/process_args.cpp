#include "kwd/util/process_args.hpp"

#include <cstring>

namespace kwd::util {

std::vector<std::string> split_nul(std::string_view text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\0', start);
    if (end == std::string_view::npos) end = text.size();
    out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::optional<ProcessArgs> parse_kern_procargs2(std::string_view buffer) {
  int argc = 0;
  if (buffer.size() < sizeof argc) return std::nullopt;
  std::memcpy(&argc, buffer.data(), sizeof argc);
  if (argc <= 0) return std::nullopt;
  std::size_t at = sizeof argc;
  // The executable's path, then the NULs that align what follows.
  at = buffer.find('\0', at);
  if (at == std::string_view::npos) return std::nullopt;
  at = buffer.find_first_not_of('\0', at);
  if (at == std::string_view::npos) return std::nullopt;

  ProcessArgs out;
  while (out.argv.size() < static_cast<std::size_t>(argc)) {
    const auto end = buffer.find('\0', at);
    if (end == std::string_view::npos) return std::nullopt;  // cut short inside argv
    out.argv.emplace_back(buffer.substr(at, end - at));
    at = end + 1;
  }
  while (at < buffer.size()) {
    auto end = buffer.find('\0', at);
    if (end == std::string_view::npos) end = buffer.size();
    if (end == at) break;  // the empty entry after the environment (Apple's own strings follow)
    out.environment.emplace_back(buffer.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

std::optional<std::string> environment_value(const std::vector<std::string>& environment,
                                             std::string_view name) {
  for (const auto& entry : environment) {
    if (entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=')
      return entry.substr(name.size() + 1);
  }
  return std::nullopt;
}

}  // namespace kwd::util
