#include <algorithm>
#include <cctype>
#include <map>

#include "kwd/diagnosis/advisor.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::diagnosis {
namespace {

// Signatures whose remedy says again what a remedy of the cause's own already says. When both
// apply, the signature's public source joins that remedy's reasons instead of a second item in
// other words (the reader would try the same fix twice).
const std::map<std::string_view, std::string_view> kRestatedBy{
    {"pytorch.cuda_out_of_memory", "torch.smaller_batch"},
    {"pytorch.mps_out_of_memory", "mps.batch"},
    {"pytorch.hip_out_of_memory", "torch.smaller_batch"},
    {"hip.error_out_of_memory", "gpu.smaller_model"},
    {"pytorch.xpu_out_of_memory", "xpu.smaller_batch"},
    {"level_zero.out_of_device_memory", "xpu.smaller_batch"},
    {"tensorflow.gpu_tensor_oom", "tensorflow.memory_growth"},
    {"cudnn.handle_internal_error", "tensorflow.memory_growth"},
    {"xla.resource_exhausted", "jax.preallocate"},
    {"xla.bfc_allocator_out_of_memory", "gpu.smaller_model"},
    {"mlx.metal_command_buffer_oom", "mlx.memory_limit"},
    {"cuda.driver_out_of_memory", "gpu.other_processes"},
    {"cublas.alloc_failed", "torch.smaller_batch"},
    {"cuda.illegal_address", "cuda.launch_blocking"},
    {"nvidia.xid", "gpu.xid"},
    {"python.faulthandler_fatal_signal", "native.check_call"},
    {"python.faulthandler_abort", "abort.read_message"},
    {"cxx.terminate_uncaught", "abort.read_message"},
};

}  // namespace

std::string Advisor::bytes(double b) {
  return util::format_bytes(b);
}

std::vector<Remedy> Advisor::run() {
  using enum CauseId;
  const auto c = f_.cause;
  if (c == oom_killed_cgroup || c == oom_killed_system) oom();
  if (c == gpu_out_of_memory) gpu_oom();
  if (c == gpu_driver_fault) gpu_fault();
  if (c == shared_memory_full) shared_memory_advice();
  if (c == cpu_unsupported) cpu_advice();
  if (c == native_crash) native_crash_advice();
  if (c == abort) aborted();
  if (c == killed) killed_advice();
  if (c == exited_with_error || c == exited) exited_advice();
  if (c == hang) hang_advice();
  signatures();
  incompatibilities();
  if (out_.empty() || c == unknown) unknown_advice();
  return std::move(out_);
}

void Advisor::add(const std::string& id, const std::string& text, const std::string& why) {
  if (ids_.insert(id).second) out_.push_back({id, text, why});
}

Remedy* Advisor::given(std::string_view id) {
  const auto it =
      std::find_if(out_.begin(), out_.end(), [&](const Remedy& r) { return r.id == id; });
  return it == out_.end() ? nullptr : &*it;
}

void Advisor::act(std::string_view id, RemedyAction action) {
  if (Remedy* r = given(id); r != nullptr && !r->action) r->action = std::move(action);
}

RemedyAction Advisor::setting_cell(const std::string& name, const std::string& value,
                                   const std::string& framework) {
  return {"insert_cell", "Insert " + name + "=" + value + " as the first cell",
          "import os\n\n# Read when " + framework +
              " starts: this cell must run before it is imported (restart the kernel, then "
              "run it first).\nos.environ[\"" +
              name + "\"] = \"" + value + "\"\n"};
}

bool Advisor::tf_growth_advised() const {
  return tensorflow() && !hit_id("pytorch.mps_out_of_memory") &&
         !env_is("TF_FORCE_GPU_ALLOW_GROWTH", {"true", "1"});
}

bool Advisor::jax_preallocation_advised() const {
  return jax() && !env_is("XLA_PYTHON_CLIENT_PREALLOCATE", {"false", "0"});
}

bool Advisor::setting_already_applied(const std::string& signature_id) const {
  if (signature_id == "cuda.illegal_address") return env_is("CUDA_LAUNCH_BLOCKING", {"1"});
  if (signature_id == "xla.resource_exhausted")
    return env_is("XLA_PYTHON_CLIENT_PREALLOCATE", {"false", "0"});
  if (signature_id == "tensorflow.gpu_tensor_oom" || signature_id == "cudnn.handle_internal_error")
    return env_is("TF_FORCE_GPU_ALLOW_GROWTH", {"true", "1"});
  return false;
}

bool Advisor::torch_segments_advised() const {
  return pytorch() && !hit_id("pytorch.mps_out_of_memory") && !in_.env("PYTORCH_CUDA_ALLOC_CONF");
}

bool Advisor::env_is(const std::string& name, std::initializer_list<const char*> values) const {
  const auto value = in_.env(name);
  if (!value) return false;
  std::string lower = *value;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return std::any_of(values.begin(), values.end(), [&](const char* v) { return lower == v; });
}

bool Advisor::tensorflow() const {
  return in_.loaded("tensorflow") || hit_family("tensorflow");
}

bool Advisor::jax() const {
  return in_.loaded("jax") || in_.loaded("jaxlib") || hit_family("jax");
}

bool Advisor::hit_family(const std::string& family) const {
  return std::any_of(in_.hits.begin(), in_.hits.end(),
                     [&](const auto& h) { return h.signature->family == family; });
}

bool Advisor::hit_id(const std::string& id) const {
  return std::any_of(in_.hits.begin(), in_.hits.end(),
                     [&](const auto& h) { return h.signature->id == id; });
}

std::string Advisor::growth_note() const {
  const auto slope = v_.number("/memory/trend/rss/slope_60s");
  if (!slope || *slope <= 0) return "";
  return "; RSS was growing by " + bytes(*slope) + "/s over the last minute";
}

void Advisor::signatures() {
  for (const auto& h : in_.hits) {
    if (h.signature->remedy.empty()) continue;
    const bool cited = std::any_of(f_.evidence.begin(), f_.evidence.end(), [&](const auto& e) {
      return e.pointer == h.pointer && e.line == h.line;
    });
    if (!cited && h.signature->supports != cause(f_.cause).id && h.signature->supports != "context")
      continue;
    const std::string matched = h.label + " line " + std::to_string(h.line) + " matched " +
                                h.signature->id + " (seen in public at " + h.signature->source +
                                ").";
    // Its fix is the setting the kernel already ran with: nothing to advise.
    if (setting_already_applied(h.signature->id)) continue;
    // A request larger than the device makes every out-of-memory line's own advice moot.
    Remedy* own = h.signature->supports == cause(CauseId::gpu_out_of_memory).id
                      ? given("gpu.request_exceeds_device")
                      : nullptr;
    if (const auto restated = kRestatedBy.find(h.signature->id);
        own == nullptr && restated != kRestatedBy.end()) {
      own = given(restated->second);
      // "Shrink what lives on the device" is said by the framework's own remedy when there
      // is one (gpu.smaller_model then stays out).
      if (own == nullptr && restated->second == "gpu.smaller_model")
        for (const char* shrink :
             {"torch.smaller_batch", "mps.batch", "mlx.memory_limit", "xpu.smaller_batch"})
          if (own == nullptr) own = given(shrink);
    }
    if (own != nullptr) {
      if (ids_.insert("signature." + h.signature->id).second) {
        std::string sentence = matched;
        sentence[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(sentence[0])));
        own->why += " " + sentence;
      }
      continue;
    }
    add("signature." + h.signature->id, h.signature->remedy, matched);
  }
}

void Advisor::incompatibilities() {
  for (const auto& item : v_.array("/fingerprint/incompatibilities")) {
    if (!item.is_object()) continue;
    const ReportView inc(item);
    const std::string what = inc.text("/what").value_or("?");
    add("compatibility." + inc.text("/id").value_or(what),
        "Resolve the version conflict: " + what + ".",
        inc.text("/why").value_or("") + " (" + inc.text("/source").value_or("") + ")");
  }
}

void Advisor::unknown_advice() {
  add("unknown.more_facts",
      "Run the kernel under the watchdog with its default settings (faulthandler on, memory "
      "probes enabled); the next report will say more. `kernel-watchdog reports show` lists "
      "what this one lacked.",
      "The facts in this report do not point at one cause.");
}

std::vector<Remedy> choose_remedies(const Finding& finding, const DiagnosisInput& input) {
  return Advisor(finding, input).run();
}

}  // namespace kwd::diagnosis
