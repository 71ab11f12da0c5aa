#include "kwd/daemon/kernel_name.hpp"

#include <filesystem>

namespace kwd::daemon {
namespace {

std::string file_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

bool same_program(const std::string& spec, const std::string& process) {
  if (spec == process || file_name(spec) == file_name(process)) return true;
  return (spec == "python" || spec == "python3") && file_name(process).starts_with("python");
}

bool fits(const nlohmann::json& spec_argv, const std::vector<std::string>& argv) {
  if (!spec_argv.is_array() || spec_argv.size() != argv.size() || argv.empty()) return false;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    if (!spec_argv[i].is_string()) return false;
    const auto& want = spec_argv[i].get_ref<const std::string&>();
    if (i == 0 ? !same_program(want, argv[0])
               : want.find('{') == std::string::npos && want != argv[i])
      return false;
  }
  return true;
}

}  // namespace

std::string kernelspec_name_for(const std::vector<std::string>& argv,
                                const std::vector<kernelspec::Kernelspec>& specs) {
  std::string found;
  for (const auto& spec : specs) {
    if (!spec.spec.is_object() || !fits(spec.spec.value("argv", nlohmann::json()), argv)) continue;
    if (!found.empty()) return "";  // two specs run the same command: either could be it
    found = spec.name;
  }
  return found;
}

}  // namespace kwd::daemon
