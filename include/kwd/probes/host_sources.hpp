#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <typeindex>
#include <utility>

#include "kwd/util/clock.hpp"

namespace kwd::probes {

// Sources that describe the host rather than one kernel (the kernel log, the NVML worker),
// made once per process and shared by every watch: a daemon watching 100 kernels holds one
// /dev/kmsg descriptor and one NVML thread, and each kernel's probes read the same source
// through a cursor of their own. A source is made by the first probe that asks for it and
// kept for the life of this object, so a kernel that comes later does not pay a driver's
// start-up again; one that failed (no driver yet when a service starts at boot, a log it
// could not open) is made again for a kernel that comes a minute or more later. Used from
// the event loop's thread only.
class HostSources {
 public:
  static constexpr std::int64_t kRetryFailedAfterMs = 60'000;

  // The source of this type and key (e.g. the library path it loads), made by `make` if
  // there is none yet, or if `failed(source)` says the one there is of no use and it was
  // made kRetryFailedAfterMs ago or more.
  template <typename Source, typename Make, typename Failed>
  std::shared_ptr<Source> shared(const std::string& key, Make&& make, Failed&& failed) {
    auto& slot = sources_[{std::type_index(typeid(Source)), key}];
    const std::int64_t now = util::steady_ms();
    if (!slot.source || (failed(*std::static_pointer_cast<Source>(slot.source)) &&
                         now - slot.made_at_ms >= kRetryFailedAfterMs)) {
      slot.source = std::shared_ptr<Source>(std::forward<Make>(make)());
      slot.made_at_ms = now;
    }
    return std::static_pointer_cast<Source>(slot.source);
  }

  // The source of this type and key while some probe still holds it, else a new one from
  // `make`: for sources of a place that may go away (a cgroup's files, which pin the cgroup
  // in the kernel while open), so none outlives the last kernel that needed it.
  template <typename Source, typename Make>
  std::shared_ptr<Source> shared_while_used(const std::string& key, Make&& make) {
    auto& slot = used_[{std::type_index(typeid(Source)), key}];
    if (auto source = slot.lock()) return std::static_pointer_cast<Source>(source);
    std::shared_ptr<Source> source(std::forward<Make>(make)());
    slot = source;
    std::erase_if(used_, [](const auto& entry) { return entry.second.expired(); });
    return source;
  }

  [[nodiscard]] std::size_t size() const { return sources_.size(); }

 private:
  struct Slot {
    std::shared_ptr<void> source;
    std::int64_t made_at_ms = 0;
  };
  std::map<std::pair<std::type_index, std::string>, Slot> sources_;
  std::map<std::pair<std::type_index, std::string>, std::weak_ptr<void>> used_;
};

// The one place a probe gets a host-wide source: from `host` when the process shares them
// (the daemon), else a source of its own (run and smoke watch one kernel each).
template <typename Source, typename Make, typename Failed>
std::shared_ptr<Source> host_source(const std::shared_ptr<HostSources>& host,
                                    const std::string& key, Make&& make, Failed&& failed) {
  if (host)
    return host->shared<Source>(key, std::forward<Make>(make), std::forward<Failed>(failed));
  return std::shared_ptr<Source>(std::forward<Make>(make)());
}

template <typename Source, typename Make>
std::shared_ptr<Source> host_source_while_used(const std::shared_ptr<HostSources>& host,
                                               const std::string& key, Make&& make) {
  if (host) return host->shared_while_used<Source>(key, std::forward<Make>(make));
  return std::shared_ptr<Source>(std::forward<Make>(make)());
}

}  // namespace kwd::probes
