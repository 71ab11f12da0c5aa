// macOS: not built yet. The Linux probe reads /proc/PID/maps, which macOS does not have; the
// way there is proc_pidinfo(PROC_PIDREGIONPATHINFO) over the kernel's regions. Until then
// the report says so instead of leaving the section out. Never compiled on this project's
// Linux machines: keep it this small.
#include <nlohmann/json.hpp>

#include "kwd/fingerprint/make_fingerprint_probe.hpp"

namespace kwd::fingerprint {
namespace {

constexpr const char* kReason = "not implemented on macOS yet (it reads /proc/PID/maps on Linux)";

class UnavailableFingerprint final : public probes::Probe {
 public:
  [[nodiscard]] probes::ProbeStatus status() const override {
    return {"fingerprint", false, kReason};
  }
  void sample(timeline::MemorySample& /*into*/) override {}
  void contribute(nlohmann::json& report) const override {
    report["fingerprint"] = {{"available", false},
                             {"reason", kReason},
                             {"python", nullptr},
                             {"environment", nlohmann::json::object()},
                             {"frameworks", nlohmann::json::array()},
                             {"native_libraries", nlohmann::json::array()},
                             {"incompatibilities", nlohmann::json::array()}};
  }
};

}  // namespace

std::unique_ptr<probes::Probe> make_fingerprint_probe(pid_t /*pid*/) {
  return std::make_unique<UnavailableFingerprint>();
}

}  // namespace kwd::fingerprint
