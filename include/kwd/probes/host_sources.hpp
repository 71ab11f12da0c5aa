#pragma once

#include <map>
#include <memory>
#include <string>
#include <typeindex>
#include <utility>

namespace kwd::probes {

// Sources that describe the host rather than one kernel (the kernel log, the NVML worker),
// made once per process and shared by every watch: a daemon watching 100 kernels holds one
// /dev/kmsg descriptor and one NVML thread, and each kernel's probes read the same source
// through a cursor of their own. A source is made by the first probe that asks for it and
// kept for the life of this object, so a kernel that comes later does not pay a driver's
// start-up again. Used from the event loop's thread only.
class HostSources {
 public:
  // The source of this type and key (e.g. the library path it loads), made by `make` if
  // there is none yet.
  template <typename Source, typename Make>
  std::shared_ptr<Source> shared(const std::string& key, Make&& make) {
    auto& slot = sources_[{std::type_index(typeid(Source)), key}];
    if (!slot) slot = std::shared_ptr<Source>(std::forward<Make>(make)());
    return std::static_pointer_cast<Source>(slot);
  }

  [[nodiscard]] std::size_t size() const { return sources_.size(); }

 private:
  std::map<std::pair<std::type_index, std::string>, std::shared_ptr<void>> sources_;
};

// The one place a probe gets a host-wide source: from `host` when the process shares them
// (the daemon), else a source of its own (run and smoke watch one kernel each).
template <typename Source, typename Make>
std::shared_ptr<Source> host_source(const std::shared_ptr<HostSources>& host,
                                    const std::string& key, Make&& make) {
  if (host) return host->shared<Source>(key, std::forward<Make>(make));
  return std::shared_ptr<Source>(std::forward<Make>(make)());
}

}  // namespace kwd::probes
