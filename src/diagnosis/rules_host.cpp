#include <algorithm>

#include "kwd/diagnosis/rule_context.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::diagnosis {
namespace {

using nlohmann::json;

// Where a Python file lies in an installed package: "tensorflow" for
// ".../site-packages/tensorflow/python/platform/self_check.py", "" elsewhere.
std::string package_of(const std::string& file) {
  for (const char* site : {"/site-packages/", "/dist-packages/"}) {
    const auto at = file.rfind(site);
    if (at == std::string::npos) continue;
    const auto start = at + std::string_view(site).size();
    const auto end = file.find('/', start);
    if (end == std::string::npos) return "";  // a module file directly in the site directory
    return file.substr(start, end - start);
  }
  return "";
}

// The deaths of a process's environment rather than of its code: a /dev/shm too small for
// what a framework shares through it, and a build for CPU features this CPU lacks.
class HostRules : public RuleContext {
 public:
  using RuleContext::RuleContext;

  // SIGBUS while writing into a full /dev/shm: tmpfs has no room left for a page the process
  // touches, and the kernel answers the write with a bus error.
  std::optional<Finding> shared_memory() const {
    if (!in_.death.signaled || in_.death.signal_name != "SIGBUS") return std::nullopt;
    const auto size = v_.integer("/shared_memory/size_bytes");
    if (!size || *size <= 0) return std::nullopt;
    const auto peak = v_.integer("/shared_memory/peak_used_bytes").value_or(0);
    const auto sharing_frame = frame_in({"share_memory_", "_share_fd_cpu_", "_share_filename_"});
    const bool filled = static_cast<double>(peak) >= 0.9 * static_cast<double>(*size);
    if (!filled && !sharing_frame) return std::nullopt;
    Finding f;
    f.cause = CauseId::shared_memory_full;
    f.confidence = filled && sharing_frame ? "high" : "medium";
    termination(f);
    const std::string path = v_.text("/shared_memory/path").value_or("/dev/shm");
    const std::string sized = util::format_bytes(static_cast<double>(*size));
    std::string fact = path + " is a tmpfs of " + sized;
    if (peak > 0)
      fact += "; " + util::format_bytes(static_cast<double>(peak)) + " of it was in use at most (" +
              percent(static_cast<double>(peak) / static_cast<double>(*size)) + ")";
    f.evidence.push_back({fact, "/shared_memory"});
    if (sharing_frame)
      f.evidence.push_back(
          {"the crashing thread was putting a tensor into shared memory: " + sharing_frame->first,
           sharing_frame->second});
    traceback(f);
    cell(f);
    f.headline =
        title(f) + ": " + path + " (" + sized + ") had no room for what " +
        (v_.integer("/execution/cell_in_flight/execution_count")
             ? "cell [" + std::to_string(*v_.integer("/execution/cell_in_flight/execution_count")) +
                   "]"
             : std::string("the kernel")) +
        " put there; the kernel then died of SIGBUS";
    return f;
  }

  // SIGILL inside a framework's native code, or the framework's own CPU check: a build that
  // needs instructions (AVX, AVX2, FMA...) this CPU does not have. A Python running under
  // Rosetta 2 on Apple Silicon is such a CPU: it has no AVX at all.
  std::optional<Finding> cpu_unsupported() const {
    const SignatureHit* guard = in_.best_hit(CauseId::cpu_unsupported);
    const bool sigill = in_.death.signaled && in_.death.signal_name == "SIGILL";
    if (guard == nullptr && !sigill) return std::nullopt;
    // The faulting native frame, when the crash handler gave it, says whose instruction it was:
    // an installed package's library (named), or a library of none (a deliberate trap, code the
    // user built: the native crash rule names it).
    std::optional<FrameworkFrame> framework;
    const auto culprit = guard == nullptr ? native_culprit() : std::nullopt;
    if (culprit) {
      const std::string module = v_.text(culprit->second + "/module").value_or("");
      const std::string package = package_of(module);
      if (package.empty()) return std::nullopt;
      framework =
          FrameworkFrame{package, v_.text(culprit->second + "/function").value_or("?"), module,
                         culprit->second, v_.integer(culprit->second + "/line").value_or(0)};
    } else {
      framework = framework_on_stack();
    }
    if (guard == nullptr && !framework) return std::nullopt;
    Finding f;
    f.cause = CauseId::cpu_unsupported;
    f.confidence = guard != nullptr ? "high" : "medium";
    termination(f);
    if (guard != nullptr) hit(f, *guard);
    std::string who = guard != nullptr && guard->signature->family == "tensorflow"
                          ? display_name("tensorflow")
                          : std::string("A framework");
    if (framework) {
      who = display_name(framework->name);
      if (framework->pointer.starts_with("/crash_stack/"))
        f.evidence.push_back({"the illegal instruction is in " + framework->name +
                                  "'s library: " + framework->function + " in " + framework->file,
                              framework->pointer});
      else
        f.evidence.push_back({"the crashing thread was in " + framework->name +
                                  "'s code: " + framework->function + "() in " + framework->file +
                                  ":" + std::to_string(framework->line),
                              framework->pointer});
    }
    if (const auto version = framework_version(framework ? framework->name : "tensorflow");
        !version.empty() && who != "A framework")
      who += " " + version;
    traceback(f);
    native_stack(f);
    cell(f);
    f.headline =
        who + " was built for CPU instructions this CPU lacks: " +
        (guard != nullptr ? shorten(guard->from_match, 90) + "; the kernel then " + how_it_died()
                          : "the kernel died of SIGILL (illegal instruction) in its code") +
        cell_phrase();
    if (!in_.traceback.is_object())
      f.missing.push_back(
          "python_traceback: no faulthandler dump in the stderr tail, so the import that loaded "
          "the build is unknown");
    return f;
  }

 private:
  struct FrameworkFrame {
    std::string name, function, file, pointer;
    std::int64_t line = 0;
  };

  // The innermost frame of the crashing thread inside an installed package.
  [[nodiscard]] std::optional<FrameworkFrame> framework_on_stack() const {
    if (!in_.traceback.is_object()) return std::nullopt;
    const auto& frames = in_.traceback.value("frames", json::array());
    for (std::size_t i = 0; i < frames.size(); ++i) {
      if (!frames[i].is_object()) continue;
      const std::string file = frames[i].value("file", "");
      const std::string package = package_of(file);
      if (package.empty()) continue;
      return FrameworkFrame{package, frames[i].value("function", "?"), file,
                            "/python_traceback/frames/" + std::to_string(i),
                            frames[i].value("line", 0)};
    }
    return std::nullopt;
  }

  // A frame whose function is one of `functions`: ("share_memory_() in torch/storage.py:210",
  // its pointer).
  [[nodiscard]] std::optional<std::pair<std::string, std::string>> frame_in(
      std::initializer_list<std::string_view> functions) const {
    if (!in_.traceback.is_object()) return std::nullopt;
    const auto& frames = in_.traceback.value("frames", json::array());
    for (std::size_t i = 0; i < frames.size(); ++i) {
      if (!frames[i].is_object()) continue;
      const std::string function = frames[i].value("function", "");
      if (std::find(functions.begin(), functions.end(), function) == functions.end()) continue;
      std::string file = frames[i].value("file", "?");
      const std::string package = package_of(file);
      if (const auto at = file.find("/" + package + "/");
          !package.empty() && at != std::string::npos)
        file = file.substr(at + 1);
      return std::make_pair(
          function + "() in " + file + ":" + std::to_string(frames[i].value("line", 0)),
          "/python_traceback/frames/" + std::to_string(i));
    }
    return std::nullopt;
  }

  [[nodiscard]] std::string framework_version(const std::string& name) const {
    for (const auto& fw : v_.array("/fingerprint/frameworks")) {
      const ReportView entry(fw);
      if (entry.text("/name").value_or("") == name) return entry.text("/version").value_or("");
    }
    return "";
  }

  static std::string display_name(const std::string& package) {
    if (package == "tensorflow") return "TensorFlow";
    if (package == "torch") return "PyTorch";
    if (package == "jaxlib" || package == "jax") return "JAX (" + package + ")";
    if (package == "numpy") return "NumPy";
    return package;
  }
};

}  // namespace

std::optional<Finding> shared_memory_rule(const DiagnosisInput& input) {
  return HostRules(input).shared_memory();
}

std::optional<Finding> cpu_unsupported_rule(const DiagnosisInput& input) {
  return HostRules(input).cpu_unsupported();
}

}  // namespace kwd::diagnosis
