#include "kwd/daemon/service_plan.hpp"

#include <cstdlib>

#include "kwd/data/embedded_files.hpp"
#include "kwd/platform/host.hpp"

namespace kwd::daemon {

// A systemd user unit in $XDG_CONFIG_HOME/systemd/user (~/.config/systemd/user).
ServicePlan service_plan() {
  ServicePlan plan;
  const char* home = std::getenv("HOME");
  const char* config = std::getenv("XDG_CONFIG_HOME");
  const std::filesystem::path config_dir =
      config != nullptr && *config == '/'
          ? std::filesystem::path(config)
          : std::filesystem::path(home != nullptr ? home : "/") / ".config";
  plan.file = config_dir / "systemd" / "user" / "kernel-watchdog.service";
  plan.contents = fill_template(std::string(data::systemd_unit()), "@KWD_EXECUTABLE@",
                                platform::self_executable().string());
  plan.install = {{"systemctl", "--user", "daemon-reload"},
                  {"systemctl", "--user", "enable", "--now", "kernel-watchdog.service"}};
  plan.uninstall = {{"systemctl", "--user", "disable", "--now", "kernel-watchdog.service"},
                    {"systemctl", "--user", "daemon-reload"}};
  plan.status = {{"systemctl", "--user", "status", "kernel-watchdog.service"}};
  return plan;
}

}  // namespace kwd::daemon
