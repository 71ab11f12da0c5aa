#include "kwd/daemon/service_plan.hpp"

#include <unistd.h>

#include <cstdlib>

#include "kwd/data/embedded_files.hpp"
#include "kwd/platform/host.hpp"

namespace kwd::daemon {

// A launchd agent in ~/Library/LaunchAgents, bootstrapped into the user's GUI domain.
ServicePlan service_plan() {
  ServicePlan plan;
  const char* home = std::getenv("HOME");
  const std::filesystem::path home_dir = home != nullptr ? home : "/";
  const std::string label = "org.kernel-watchdog.daemon";
  const std::string domain = "gui/" + std::to_string(::getuid());
  plan.file = home_dir / "Library" / "LaunchAgents" / (label + ".plist");
  plan.contents =
      fill_template(fill_template(std::string(data::launchd_plist()), "@KWD_EXECUTABLE@",
                                  platform::self_executable().string()),
                    "@KWD_LOG_DIR@", (home_dir / "Library" / "Logs" / "kernel-watchdog").string());
  plan.install = {{"launchctl", "bootstrap", domain, plan.file.string()}};
  plan.uninstall = {{"launchctl", "bootout", domain + "/" + label}};
  plan.status = {{"launchctl", "print", domain + "/" + label}};
  return plan;
}

}  // namespace kwd::daemon
