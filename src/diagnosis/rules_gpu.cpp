#include <set>

#include "kwd/diagnosis/rule_context.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::diagnosis {
namespace {

using nlohmann::json;

class GpuRules : public RuleContext {
 public:
  using RuleContext::RuleContext;

  std::optional<Finding> gpu_fault() const {
    if (sigkill()) return std::nullopt;
    const auto& xids = in_.xid_events;
    const SignatureHit* h = in_.best_hit(CauseId::gpu_driver_fault);
    if (xids.empty() && h == nullptr) return std::nullopt;
    Finding f;
    f.cause = CauseId::gpu_driver_fault;
    f.confidence =
        !xids.empty() || (h->recent() && h->signature->strength == "strong") ? "high" : "medium";
    std::string what;
    for (const auto& x : xids) {
      f.evidence.push_back({x.fact(), x.pointer()});
      if (what.empty()) what = "NVIDIA Xid " + x.xid_text;
    }
    if (h != nullptr) {
      hit(f, *h);
      if (what.empty()) what = shorten(h->from_match, 90);
    }
    more_hits(f, CauseId::gpu_driver_fault, h);
    termination(f);
    traceback(f);
    cell(f);
    f.headline = title(f) + " (" + what + "); the kernel then " + how_it_died() + cell_phrase();
    if (!v_.has("/gpu"))
      f.missing.push_back("gpu: no GPU probe data (driver state, Xid events) in the report");
    return f;
  }

  // The framework's numbers and who else held the device, as evidence; "; other processes
  // held N of the device's M (pid P: command)" for the headline when they held a real share.
  [[nodiscard]] std::string gpu_neighbours(Finding& f) const {
    if (!in_.gpu_contention) return "";
    const auto& c = *in_.gpu_contention;
    const auto size = [](std::int64_t b) { return util::format_bytes(static_cast<double>(b)); };
    std::vector<std::string> said;
    if (c.requested) said.push_back("it asked for " + size(*c.requested));
    if (c.free && c.capacity)
      said.push_back(size(*c.free) + " of the device's " + size(*c.capacity) + " was free");
    if (c.kernel_held) said.push_back("the kernel held " + size(*c.kernel_held));
    if (!said.empty() && !c.message_pointer.empty()) {
      std::string fact = "the framework's own numbers: ";
      for (std::size_t i = 0; i < said.size(); ++i)
        fact += (i ? ", " : "") + said[i];
      f.evidence.push_back({fact, c.message_pointer, c.message_line});
    }
    constexpr std::size_t kNamed = 3;
    for (std::size_t i = 0; i < c.others.size() && i < kNamed; ++i) {
      const auto& o = c.others[i];
      std::string fact = o.label(80);
      fact += ", not the kernel's, held " + size(o.bytes) + " of GPU memory";
      if (!o.frameworks.empty()) {
        fact += "; it has loaded";
        for (const auto& fw : o.frameworks)
          fact += " " + fw;
      }
      f.evidence.push_back({fact, o.pointer});
    }
    if (!c.significant()) return "";
    std::string out = "; other processes held " + size(c.held);
    if (c.capacity) out += " of the device's " + size(*c.capacity);
    const auto& top = c.others.front();
    out += " (pid " + std::to_string(top.pid);
    if (!top.notebook.empty())
      out += ", the kernel of " + shorten(top.notebook, 50);
    else if (!top.command_line.empty())
      out += ": " + shorten(top.command_line, 50);
    return out + ")";
  }

  std::optional<Finding> gpu_oom() const {
    if (sigkill()) return std::nullopt;
    const SignatureHit* h = in_.best_hit(CauseId::gpu_out_of_memory);
    const auto device = full_device();
    // A full device alone explains an abort (a library that could not allocate and gave
    // up), not a segfault in unrelated code, which is context.
    const bool aborted = in_.death.signaled && in_.death.signal_name == "SIGABRT";
    if (h == nullptr && !(device && aborted)) return std::nullopt;
    Finding f;
    f.cause = CauseId::gpu_out_of_memory;
    if (h != nullptr) {
      const auto& strength = h->signature->strength;
      f.confidence = strength == "strong" && h->recent() ? "high"
                     : strength == "weak" && !device     ? "low"
                                                         : "medium";
      hit(f, *h);
    } else {
      f.confidence = "medium";
    }
    if (device) f.evidence.push_back(*device);
    const std::string others = gpu_neighbours(f);
    more_hits(f, CauseId::gpu_out_of_memory, h);
    termination(f);
    traceback(f);
    cell(f);
    const bool unified =
        h != nullptr && (h->signature->family == "mps" || h->signature->family == "mlx" ||
                         h->signature->family == "metal");
    f.headline = unified ? std::string("GPU (unified) memory exhausted") : title(f);
    if (h != nullptr) f.headline += " (" + shorten(h->from_match, 90) + ")";
    f.headline += others + "; the kernel then " + how_it_died() + cell_phrase();
    if (!v_.has("/gpu") && !v_.has("/drm_gpu") && !unified)
      f.missing.push_back("gpu: no GPU probe data; device memory use at death is unknown");
    return f;
  }
};

}  // namespace

std::optional<Finding> gpu_fault_rule(const DiagnosisInput& input) {
  return GpuRules(input).gpu_fault();
}

std::optional<Finding> gpu_oom_rule(const DiagnosisInput& input) {
  return GpuRules(input).gpu_oom();
}

}  // namespace kwd::diagnosis
