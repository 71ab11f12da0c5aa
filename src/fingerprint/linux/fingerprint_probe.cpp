#include "kwd/fingerprint/linux/fingerprint_probe.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <functional>
#include <regex>
#include <set>

#include "kwd/fingerprint/compatibility.hpp"
#include "kwd/fingerprint/environment_filter.hpp"
#include "kwd/fingerprint/library_catalog.hpp"
#include "kwd/fingerprint/loaded_files.hpp"
#include "kwd/fingerprint/make_fingerprint_probe.hpp"
#include "kwd/probes/linux/procfs.hpp"
#include "kwd/util/clock.hpp"

namespace kwd::fingerprint {
namespace fs = std::filesystem;
namespace {

// "3.11" from an extension module's ABI tag or the stdlib directory of any mapped file.
std::string python_version_from(const std::vector<std::string>& files) {
  static const std::regex abi(R"(cpython-3([0-9]+))");
  static const std::regex stdlib(R"(/python3\.([0-9]+)/)");
  for (const auto& f : files) {
    std::smatch m;
    if (std::regex_search(f, m, abi)) return "3." + m[1].str();
  }
  for (const auto& f : files) {
    std::smatch m;
    if (std::regex_search(f, m, stdlib)) return "3." + m[1].str();
  }
  return "";
}

}  // namespace

FingerprintProbe::FingerprintProbe(pid_t pid, std::chrono::milliseconds refresh_interval,
                                   std::string proc_root)
    : pid_(pid), proc_(std::move(proc_root)), interval_ms_(refresh_interval.count()) {}

probes::ProbeStatus FingerprintProbe::status() const {
  return {"fingerprint", reason_.empty(),
          reason_.empty() ? "reads /proc/" + std::to_string(pid_) + "/maps every " +
                                std::to_string(interval_ms_) + " ms while the kernel runs"
                          : reason_};
}

void FingerprintProbe::sample(timeline::MemorySample& /*into*/) {
  const auto now = util::steady_ms();
  if (last_refresh_ms_ >= 0 && now - last_refresh_ms_ < interval_ms_) return;
  last_refresh_ms_ = now;
  // An idle kernel maps nothing new: skip the costly maps read while the size of its
  // address space stays the same (any mmap/munmap, a loaded library included, changes it).
  if (!stat_fd_)
    stat_fd_.reset(
        ::open((proc_ + "/" + std::to_string(pid_) + "/stat").c_str(), O_RDONLY | O_CLOEXEC));
  if (stat_fd_) {
    static thread_local std::string buf;
    const auto text = probes::linux_proc::pread_all(stat_fd_.get(), buf);
    const auto st = text ? probes::linux_proc::parse_proc_stat(*text) : std::nullopt;
    if (st && st->vsize == last_vsize_ && refreshes_ > 0) return;
    if (st) last_vsize_ = st->vsize;
  }
  refresh();
}

void FingerprintProbe::read_once_facts() {
  const std::string base = proc_ + "/" + std::to_string(pid_);
  if (!environment_read_) {
    // The environment the kernel was started with; reading it is allowed for our own child.
    if (auto text = probes::linux_proc::read_small_file(base + "/environ")) {
      environment_ = nlohmann::json::object();
      for (const auto& [name, value] : allowed_environment(*text))
        environment_[name] = value;
      environment_read_ = true;
    }
  }
  if (python_.is_null()) {
    std::error_code ec;
    const auto exe = fs::read_symlink(base + "/exe", ec);
    if (!ec) {
      python_ = {{"executable", exe.string()}};
      // A virtual environment records the exact version beside its interpreter.
      if (auto cfg = probes::linux_proc::read_small_file(
              (exe.parent_path().parent_path() / "pyvenv.cfg").string())) {
        static const std::regex version(R"((^|\n)version(_info)?\s*=\s*([0-9][0-9.]*))");
        std::smatch m;
        if (std::regex_search(*cfg, m, version)) python_["version"] = m[3].str();
        python_["virtual_environment"] = exe.parent_path().parent_path().string();
      }
    }
  }
}

void FingerprintProbe::refresh() {
  const auto maps =
      probes::linux_proc::read_small_file(proc_ + "/" + std::to_string(pid_) + "/maps");
  if (!maps || maps->empty()) {
    if (refreshes_ == 0) reason_ = "cannot read /proc/" + std::to_string(pid_) + "/maps";
    return;
  }
  reason_.clear();
  ++refreshes_;
  read_once_facts();
  const auto files = mapped_files(*maps);
  std::size_t hash = files.size();
  for (const auto& f : files)
    hash = hash * 31 + std::hash<std::string>{}(f);
  if (hash == files_hash_ && !fingerprint_.is_null()) {
    fingerprint_["refreshed_at_ms"] = util::wall_ms();
    return;
  }
  files_hash_ = hash;
  rebuild(files);
}

void FingerprintProbe::rebuild(const std::vector<std::string>& files) {
  using nlohmann::json;
  ++rebuilds_;
  std::map<std::string, json> frameworks;       // canonical name -> entry
  std::map<std::string, json> others;           // distribution -> entry
  std::map<std::string, std::string> versions;  // every distribution seen -> version
  auto libraries = json::array();
  std::vector<std::string> library_names;

  for (const auto& file : files) {
    const auto split = PackageIndex::split_site(file);
    std::optional<Distribution> owner;
    if (split) owner = packages_.owner_of(file);
    if (owner) versions[owner->name] = owner->version;

    if (split) {
      const std::string top = split->second.substr(0, split->second.find('/'));
      if (auto fw = classify_framework(top); fw && !frameworks.contains(fw->name)) {
        if (!owner) owner = packages_.find(file, fw->name);
        json entry = {{"name", fw->name}, {"path", (split->first / top).string()}};
        entry["distribution"] = owner ? json(owner->name) : json(nullptr);
        entry["version"] = owner ? json(owner->version) : json(nullptr);
        if (owner) versions[owner->name] = owner->version;
        frameworks[fw->name] = std::move(entry);
        // jax is pure Python: only jaxlib shows in the maps, but both versions matter.
        if (fw->name == "jaxlib" && !frameworks.contains("jax"))
          if (auto jax = packages_.find(file, "jax")) {
            frameworks["jax"] = {{"name", "jax"},
                                 {"distribution", jax->name},
                                 {"version", jax->version},
                                 {"path", (split->first / "jax").string()}};
            versions[jax->name] = jax->version;
          }
      } else if (!fw && owner && !others.contains(owner->name)) {
        others[owner->name] = {{"name", owner->name}, {"version", owner->version}};
      }
    }
    if (auto lib = classify_library(file)) {
      json entry = {{"name", lib->name}, {"path", file}};
      entry["version"] = lib->version.empty() ? json(nullptr) : json(lib->version);
      if (owner) {
        entry["distribution"] = owner->name;
        if (lib->version.empty()) entry["version"] = owner->version;
      }
      library_names.push_back(lib->name);
      libraries.push_back(std::move(entry));
    }
  }

  json python = python_.is_null() ? json::object() : python_;
  if (!python.contains("version")) {
    if (auto v = python_version_from(files); !v.empty()) python["version"] = v;
  }
  python["implementation"] = "CPython";
  if (python_version_from(files).empty() && !python.contains("version"))
    python["implementation"] = nullptr;

  json fw_list = json::array();
  for (auto& [name, entry] : frameworks)
    fw_list.push_back(std::move(entry));
  json other_list = json::array();
  for (auto& [name, entry] : others)
    other_list.push_back(std::move(entry));

  fingerprint_ = {
      {"captured_at_ms", util::wall_ms()},
      {"refreshed_at_ms", util::wall_ms()},
      {"source", "/proc/" + std::to_string(pid_) + "/maps, read every " +
                     std::to_string(interval_ms_) +
                     " ms while the kernel ran; versions from "
                     "the package metadata beside the loaded files"},
      {"mapped_files", files.size()},
      {"python", python},
      {"frameworks", std::move(fw_list)},
      {"native_libraries", std::move(libraries)},
      {"other_packages", std::move(other_list)},
      {"environment", environment_},
      {"environment_note",
       "allow-listed variables only, as the kernel was started; changes made later through "
       "os.environ are not seen"},
      {"incompatibilities", find_incompatibilities(versions, library_names)},
  };
}

void FingerprintProbe::contribute(nlohmann::json& report) const {
  if (fingerprint_.is_null()) {
    report["fingerprint"] = {
        {"available", false},
        {"reason", reason_.empty() ? "the kernel died before the first read" : reason_},
        {"python", python_},
        {"environment", environment_},
        {"frameworks", nlohmann::json::array()},
        {"native_libraries", nlohmann::json::array()},
        {"incompatibilities", nlohmann::json::array()}};
    return;
  }
  report["fingerprint"] = fingerprint_;
  report["fingerprint"]["available"] = true;
}

std::unique_ptr<probes::Probe> make_fingerprint_probe(pid_t pid) {
  return std::make_unique<FingerprintProbe>(pid, std::chrono::milliseconds(2000));
}

}  // namespace kwd::fingerprint
