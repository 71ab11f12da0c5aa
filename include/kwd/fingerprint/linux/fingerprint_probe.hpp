#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kwd/platform/read_worker.hpp"
#include "kwd/platform/root_view.hpp"
#include "kwd/probes/probe.hpp"
#include "kwd/util/unique_fd.hpp"

namespace kwd::fingerprint {

// Linux: the kernel's environment fingerprint (report section `fingerprint`): the frameworks and
// native libraries it has loaded, with versions, its interpreter, and allow-listed
// environment variables.
//
// It must be read while the kernel lives (/proc/PID/maps is gone at death), so it rides on
// the sample timer: at every tick it checks the address-space size (microseconds, from
// /proc/PID/statm), re-reads the maps (a fraction of a millisecond) when that changed, at
// most every `refresh_interval`. What the loaded files are (package metadata, framework
// builds, R's runtime, through the kernel's own root) is looked up on the probe's ReadWorker,
// never on the loop: those files may be on a mount that stops answering. New files are looked
// up as they appear, and the fingerprint made again from them at most every 2 s; the loop
// takes the newest at its next tick. When faulthandler starts its dump (on_kernel_dying) it
// reads the maps once more and starts their lookups; at the exit it asks for the last
// fingerprint and waits for it while it makes progress (see kAnswerWait), then reports what
// it has, naming a read that did not answer.
class FingerprintProbe final : public probes::Probe {
 public:
  FingerprintProbe(pid_t pid, std::chrono::milliseconds refresh_interval,
                   std::string proc_root = "/proc");
  ~FingerprintProbe() override;
  FingerprintProbe(const FingerprintProbe&) = delete;
  FingerprintProbe& operator=(const FingerprintProbe&) = delete;

  [[nodiscard]] probes::ProbeStatus status() const override;
  void sample(timeline::MemorySample& into) override;
  void contribute(nlohmann::json& report) const override;
  void on_kernel_dying() override;
  // A front end asks about a live kernel (a failed cell): the maps and their lookups now.
  void catch_up() override { refresh(); }
  void on_kernel_exit(const probes::KernelExit& how) override;

  // Reads the maps now, whatever the interval, and waits up to `wait` for their lookups.
  void refresh(std::chrono::milliseconds wait = kAnswerWait);
  [[nodiscard]] const nlohmann::json& fingerprint() const { return fingerprint_; }
  // How often the loaded files changed and were looked up again (each refresh reads the maps).
  [[nodiscard]] int rebuilds() const { return rebuilds_; }

  // How long the loop waits for the lookups when it needs them now (a death, a front end's
  // question): up to kAnswerCap while they make progress (a site directory read for the first
  // time takes milliseconds), and no longer once one read has not answered for kAnswerWait (a
  // stalled mount takes for ever: the report goes without it, and names it).
  static constexpr std::chrono::milliseconds kAnswerWait{250};
  static constexpr std::chrono::milliseconds kAnswerCap{1000};
  static constexpr std::chrono::milliseconds kAnswerStep{25};
  // A read the worker has been in this long when the report is made is named in it.
  static constexpr std::chrono::milliseconds kStallNamed{1000};

  struct Lookups;  // the worker's side (fingerprint_probe.cpp)

 private:
  void read_once_facts();
  // Reads the maps; a new set of files waits in pending_files_ for its lookups.
  void read_maps();
  // Hands the pending files to the worker when it is free: looked up only, or made into the
  // fingerprint too (`assemble`).
  void post_lookups(bool assemble);
  // The worker's newest fingerprint, if newer than ours.
  void take_result();
  // Asks for the fingerprint of every file seen, and waits up to `wait` for it.
  void finish_lookups(std::chrono::milliseconds wait);

  pid_t pid_;
  std::string proc_;
  std::int64_t interval_ms_;
  std::int64_t last_refresh_ms_ = -1;
  std::vector<std::string> seen_files_;                    // sorted: every file mapped at any read
  std::optional<std::vector<std::string>> pending_files_;  // not yet made into a fingerprint
  bool pending_posted_ = false;                            // ...but handed over for their lookups
  std::int64_t last_rebuild_ms_ = -1;
  static constexpr std::int64_t kRebuildGapMs = 2000;
  util::UniqueFd statm_fd_;
  std::int64_t last_vsize_ = 0;  // pages, from statm
  int refreshes_ = 0;
  int rebuilds_ = 0;
  bool environment_read_ = false;
  bool before_exec_ = false;  // /proc still showed our own binary (see is_own_executable)
  std::string reason_;
  std::string executable_;                  // as /proc/PID/exe reads, " (deleted)" cut
  std::optional<platform::RootView> root_;  // opened after the exec, then held to the end
  nlohmann::json environment_ = nlohmann::json::object();
  nlohmann::json fingerprint_;
  std::uint64_t generation_ = 0;  // of fingerprint_, as the worker counts
  // A lookup that did not answer when the loop waited for it.
  std::optional<platform::ReadWorker::Blocked> stalled_;
  std::shared_ptr<Lookups> lookups_;
  platform::ReadWorker worker_{"kwd-fingerprint"};
};

}  // namespace kwd::fingerprint
