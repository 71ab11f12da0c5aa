#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kwd/fingerprint/package_metadata.hpp"
#include "kwd/fingerprint/r_runtime.hpp"
#include "kwd/probes/probe.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::fingerprint {

// Linux: the kernel's environment fingerprint (report section `fingerprint`): the frameworks and
// native libraries it has loaded, with versions, its interpreter, and allow-listed
// environment variables.
//
// It must be read while the kernel lives (/proc/PID/maps is gone at death), so it rides on
// the sample timer: at every tick it checks the address-space size (microseconds, from
// /proc/PID/stat), re-reads the maps (a fraction of a millisecond) when that changed, at
// most every `refresh_interval`, and looks the files up (package metadata on disk) when the
// set of mapped files changed, at most every 2 s. When faulthandler starts its dump
// (on_kernel_dying) it reads the maps once more; the lookups for them wait for the exit.
class FingerprintProbe final : public probes::Probe {
 public:
  FingerprintProbe(pid_t pid, std::chrono::milliseconds refresh_interval,
                   std::string proc_root = "/proc");

  [[nodiscard]] probes::ProbeStatus status() const override;
  void sample(timeline::MemorySample& into) override;
  void contribute(nlohmann::json& report) const override;
  void on_kernel_dying() override;
  // A front end asks about a live kernel (a failed cell): the maps and their lookups now.
  void catch_up() override { refresh(); }
  void on_kernel_exit(const probes::KernelExit& how) override;

  // Reads now, whatever the interval (tests, and the first tick).
  void refresh();
  [[nodiscard]] const nlohmann::json& fingerprint() const { return fingerprint_; }
  // How often the loaded files changed and were looked up again (each refresh reads the maps).
  [[nodiscard]] int rebuilds() const { return rebuilds_; }

 private:
  void read_once_facts();
  // Reads the maps; a new set of files waits in pending_files_ for its lookups.
  void read_maps();
  void rebuild(const std::vector<std::string>& files);
  // The kernel's own file system, where the paths in its maps lead (a container's, for a
  // kernel in one); the host's until the kernel's root could be opened.
  [[nodiscard]] const platform::RootView& kernel_root() const {
    return root_ ? *root_ : platform::RootView::host();
  }

  pid_t pid_;
  std::string proc_;
  std::int64_t interval_ms_;
  std::int64_t last_refresh_ms_ = -1;
  std::vector<std::string> seen_files_;  // sorted: every file mapped at any read
  std::optional<std::vector<std::string>> pending_files_;
  std::int64_t last_rebuild_ms_ = -1;
  static constexpr std::int64_t kRebuildGapMs = 2000;
  util::UniqueFd statm_fd_;
  std::int64_t last_vsize_ = 0;  // pages, from statm
  int refreshes_ = 0;
  int rebuilds_ = 0;
  bool environment_read_ = false;
  bool before_exec_ = false;  // /proc still showed our own binary (see is_own_executable)
  std::string reason_;
  PackageIndex& packages_ = PackageIndex::shared();
  std::optional<platform::RootView> root_;  // opened after the exec, then held to the end
  // The distribution of each mapped file in a site directory, looked up while the kernel
  // lives: the rebuild at its death only assembles, whatever the shared index forgot since.
  std::map<std::string, std::optional<Distribution>> owners_;
  const std::optional<Distribution>& owner_of(const std::string& file);
  nlohmann::json python_;
  // libR.so and the R packages whose native code is loaded, looked up as they appear.
  std::optional<RRuntime> r_;
  nlohmann::json environment_ = nlohmann::json::object();
  nlohmann::json fingerprint_;
};

}  // namespace kwd::fingerprint
