#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kwd::daemon {

// How the daemon becomes a service of this user on this platform: the file to write (the
// repo's template with the executable's absolute path filled in) and the commands that
// enable, disable and show it. One implementation per platform folder.
struct ServicePlan {
  std::filesystem::path file;
  std::string contents;
  std::vector<std::vector<std::string>> install, uninstall, status;
};

ServicePlan service_plan();

// `text` with every `key` replaced by `value`.
std::string fill_template(std::string text, const std::string& key, const std::string& value);

}  // namespace kwd::daemon
