#include "kwd/fingerprint/linux/fingerprint_probe.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <mutex>
#include <regex>
#include <set>

#include "kwd/fingerprint/compatibility.hpp"
#include "kwd/fingerprint/environment_filter.hpp"
#include "kwd/fingerprint/framework_build.hpp"
#include "kwd/fingerprint/library_catalog.hpp"
#include "kwd/fingerprint/loaded_files.hpp"
#include "kwd/fingerprint/make_fingerprint_probe.hpp"
#include "kwd/fingerprint/package_metadata.hpp"
#include "kwd/fingerprint/r_runtime.hpp"
#include "kwd/platform/linux/procfs.hpp"
#include "kwd/util/clock.hpp"
#include "kwd/util/errno_text.hpp"

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

// Ours, not the kernel's: under --memory-limit our own binary puts the kernel into its cgroup
// and then execs it, and until then /proc shows the watchdog.
bool is_own_executable(const fs::path& exe) {
  static const fs::path own = [] {
    std::error_code ec;
    return fs::read_symlink("/proc/self/exe", ec);
  }();
  return !own.empty() && exe == own;
}

}  // namespace

// The worker's side: touched by the worker's thread only, but for the result it hands over.
struct FingerprintProbe::Lookups {
  // What the worker is asked for: the files seen so far, and what the loop knows of the kernel.
  struct Request {
    std::vector<std::string> files;
    std::optional<platform::RootView> root;
    std::string executable;
    nlohmann::json environment;
    bool assemble = false;  // the fingerprint made too, not only the files looked up
  };

  pid_t pid = 0;
  std::int64_t interval_ms = 0;
  PackageIndex& packages = PackageIndex::shared();
  std::string executable;  // what python and the caches below are of
  nlohmann::json python;
  std::vector<std::string> looked_up;  // sorted: the files whose owners were looked up
  // The distribution of each mapped file in a site directory, looked up while the kernel
  // lives: the fingerprint at its death only assembles, whatever the shared index forgot.
  std::map<std::string, std::optional<Distribution>> owners;
  // libR.so and the R packages whose native code is loaded, looked up as they appear.
  std::optional<RRuntime> r;

  std::mutex result_mutex;
  nlohmann::json result;         // the newest fingerprint (under result_mutex)
  std::uint64_t generation = 0;  // of result (under result_mutex)
  int rebuilds = 0;              // (under result_mutex)

  void run(const Request& request);

 private:
  const std::optional<Distribution>& owner_of(const platform::RootView& root,
                                              const std::string& file);
  [[nodiscard]] nlohmann::json assemble(const platform::RootView& root,
                                        const std::vector<std::string>& files,
                                        const nlohmann::json& environment);
};

void FingerprintProbe::Lookups::run(const Lookups::Request& request) {
  const platform::RootView& root = request.root ? *request.root : platform::RootView::host();
  if (request.executable != executable) {
    // Another program: what was mapped before that exec (a script's shell) is not the kernel's.
    executable = request.executable;
    python = nullptr;
    looked_up.clear();
    owners.clear();
    r.reset();
  }
  if (python.is_null() && !executable.empty()) {
    python = {{"executable", executable}};
    // A virtual environment records the exact version beside its interpreter.
    const fs::path exe(executable);
    if (auto cfg =
            root.read((exe.parent_path().parent_path() / "pyvenv.cfg").string(), 64 * 1024)) {
      static const std::regex version(R"((^|\n)version(_info)?\s*=\s*([0-9][0-9.]*))");
      std::smatch m;
      if (std::regex_search(*cfg, m, version)) python["version"] = m[3].str();
      python["virtual_environment"] = exe.parent_path().parent_path().string();
    }
  }
  std::vector<std::string> added;
  std::set_difference(request.files.begin(), request.files.end(), looked_up.begin(),
                      looked_up.end(), std::back_inserter(added));
  bool r_files_added = false;
  for (const auto& file : added) {
    if (PackageIndex::split_site(file)) owner_of(root, file);
    r_files_added = r_files_added || file.ends_with("/libR.so") || r_package_dir(file);
  }
  if (r_files_added) r = find_r_runtime(root, request.files);
  looked_up = request.files;
  if (!request.assemble) return;
  auto fingerprint = assemble(root, request.files, request.environment);
  const std::lock_guard lock(result_mutex);
  result = std::move(fingerprint);
  ++generation;
  ++rebuilds;
}

const std::optional<Distribution>& FingerprintProbe::Lookups::owner_of(
    const platform::RootView& root, const std::string& file) {
  const auto known = owners.find(file);
  if (known != owners.end()) return known->second;
  return owners.emplace(file, packages.owner_of(root, file)).first->second;
}

FingerprintProbe::FingerprintProbe(pid_t pid, std::chrono::milliseconds refresh_interval,
                                   std::string proc_root)
    : pid_(pid),
      proc_(std::move(proc_root)),
      interval_ms_(refresh_interval.count()),
      lookups_(std::make_shared<Lookups>()) {
  lookups_->pid = pid;
  lookups_->interval_ms = interval_ms_;
}

FingerprintProbe::~FingerprintProbe() = default;

probes::ProbeStatus FingerprintProbe::status() const {
  return {"fingerprint", reason_.empty(),
          reason_.empty() ? "checks the size of /proc/" + std::to_string(pid_) +
                                "'s address space at every sample and reads its maps again "
                                "when it changed (at most every " +
                                std::to_string(interval_ms_) +
                                " ms), and once more when it dies; the loaded files are "
                                "looked up on a thread of their own"
                          : reason_};
}

void FingerprintProbe::sample(timeline::MemorySample& /*into*/) {
  take_result();
  // Lookups of new files start at once; the fingerprint is made again from them at most every
  // kRebuildGapMs, as imports keep changing the maps of a kernel that starts.
  const auto now = util::steady_ms();
  if (pending_files_) post_lookups(last_rebuild_ms_ < 0 || now - last_rebuild_ms_ >= kRebuildGapMs);
  // An idle kernel maps nothing new: the maps read waits until the size of its address
  // space changes (any mmap/munmap, a loaded library included). That size is read at every
  // tick (microseconds), so a library loaded a moment before a crash is not missed; maps are
  // read again at most every interval_ms_ while it keeps changing (an import).
  if (!statm_fd_)
    statm_fd_.reset(
        ::open((proc_ + "/" + std::to_string(pid_) + "/statm").c_str(), O_RDONLY | O_CLOEXEC));
  std::int64_t vsize = 0;  // in pages
  if (statm_fd_) {
    static thread_local std::string buf;
    const auto text = platform::linux_proc::pread_all(statm_fd_.get(), buf);
    const auto pages = text ? platform::linux_proc::parse_statm_size(*text) : std::nullopt;
    if (pages) vsize = *pages;
    if (pages && *pages == last_vsize_ && refreshes_ > 0 && !before_exec_) return;
  }
  if (last_refresh_ms_ >= 0 && now - last_refresh_ms_ < interval_ms_) return;
  last_refresh_ms_ = now;
  if (vsize != 0) last_vsize_ = vsize;
  read_maps();
  if (pending_files_) post_lookups(false);
}

void FingerprintProbe::post_lookups(bool assemble) {
  if (!pending_files_ || !worker_.idle() || (pending_posted_ && !assemble)) return;
  Lookups::Request request{*pending_files_, root_, executable_, environment_, assemble};
  pending_posted_ = true;
  if (assemble) {
    pending_files_.reset();
    last_rebuild_ms_ = util::steady_ms();
  }
  worker_.post([lookups = lookups_, request = std::move(request)] { lookups->run(request); });
}

void FingerprintProbe::take_result() {
  const std::lock_guard lock(lookups_->result_mutex);
  if (lookups_->generation == generation_) return;
  generation_ = lookups_->generation;
  fingerprint_ = lookups_->result;
  rebuilds_ = lookups_->rebuilds;
}

void FingerprintProbe::finish_lookups(std::chrono::milliseconds wait) {
  if (pending_files_) {
    // Whatever the worker is doing, the last fingerprint is asked for after it.
    Lookups::Request request{*pending_files_, root_, executable_, environment_, true};
    pending_files_.reset();
    worker_.post([lookups = lookups_, request = std::move(request)] { lookups->run(request); });
  }
  stalled_.reset();
  // Lookups that make progress (a site directory read for the first time: milliseconds a file)
  // are waited for up to kAnswerCap; one read that has not answered for `wait` ends the wait:
  // a stalled mount, named in the report.
  const auto start = util::steady_ms();
  while (!worker_.wait_idle(kAnswerStep)) {
    if (const auto blocked = worker_.blocked(wait)) {
      stalled_ = blocked;
      break;
    }
    if (util::steady_ms() - start >= std::max(wait, kAnswerCap).count()) break;
  }
  take_result();
}

void FingerprintProbe::on_kernel_dying() {
  // Faulthandler is dumping: the process lives a moment more, and its maps with it. The maps
  // are read now, and their lookups start on the worker while the dump goes on; the loop
  // waits for them only at the exit.
  read_maps();
  post_lookups(false);
}

void FingerprintProbe::on_kernel_exit(const probes::KernelExit& /*how*/) {
  finish_lookups(kAnswerWait);
}

void FingerprintProbe::refresh(std::chrono::milliseconds wait) {
  read_maps();
  finish_lookups(wait);
}

void FingerprintProbe::read_once_facts() {
  const std::string base = proc_ + "/" + std::to_string(pid_);
  std::error_code exe_error;
  const auto exe = fs::read_symlink(base + "/exe", exe_error);
  before_exec_ = !exe_error && is_own_executable(exe);
  if (before_exec_) return;  // nothing here is the kernel's yet
  // Held from now on: the files of a kernel that has died stay readable through it, so the
  // lookups at its death still find them.
  if (!root_) root_ = platform::RootView::of_process(proc_, pid_);
  if (!environment_read_) {
    // The environment the kernel was started with; reading it is allowed for our own child.
    if (auto text = platform::linux_proc::read_small_file(base + "/environ")) {
      environment_ = nlohmann::json::object();
      for (const auto& [name, value] : allowed_environment(*text))
        environment_[name] = value;
      environment_read_ = true;
    }
  }
  // A kernel started through a script (R's /usr/bin/R is one) execs its interpreter after the
  // first look: what was mapped before that exec was the script's shell, not the kernel's.
  // An interpreter upgraded on disk reads "<path> (deleted)": the same program, not an exec.
  if (exe_error) return;
  std::string exe_path = exe.string();
  if (exe_path.ends_with(" (deleted)")) exe_path.resize(exe_path.size() - 10);
  if (!executable_.empty() && executable_ != exe_path) seen_files_.clear();
  executable_ = std::move(exe_path);
}

void FingerprintProbe::read_maps() {
  read_once_facts();
  if (before_exec_) return;
  const auto maps =
      platform::linux_proc::read_small_file(proc_ + "/" + std::to_string(pid_) + "/maps");
  if (!maps || maps->empty()) {
    // Empty: the process has exited (its maps are gone), not an error of the system's.
    if (refreshes_ == 0)
      reason_ =
          util::cannot("read", proc_ + "/" + std::to_string(pid_) + "/maps", maps ? 0 : errno) +
          (maps ? " (empty: the process has exited)" : "");
    return;
  }
  reason_.clear();
  ++refreshes_;
  // Every file the process has had mapped, not only what this read shows: Python never
  // unloads an extension module, and a read that races the process's exit (the one when it
  // dies) can see a part of its mappings, torn down while they are listed.
  const auto now_mapped = mapped_files(*maps);
  std::vector<std::string> files;
  files.reserve(seen_files_.size() + now_mapped.size());
  std::set_union(seen_files_.begin(), seen_files_.end(), now_mapped.begin(), now_mapped.end(),
                 std::back_inserter(files));
  if (files.size() == seen_files_.size() && !seen_files_.empty()) {
    if (!fingerprint_.is_null()) fingerprint_["refreshed_at_ms"] = util::wall_ms();
    return;
  }
  seen_files_ = files;
  pending_files_ = std::move(files);
  pending_posted_ = false;
}

nlohmann::json FingerprintProbe::Lookups::assemble(const platform::RootView& root,
                                                   const std::vector<std::string>& files,
                                                   const nlohmann::json& environment) {
  using nlohmann::json;
  std::map<std::string, json> frameworks;       // canonical name -> entry
  std::map<std::string, json> others;           // distribution -> entry
  std::map<std::string, std::string> versions;  // every distribution seen -> version
  auto libraries = json::array();
  std::vector<std::string> library_names;

  for (const auto& file : files) {
    const auto split = PackageIndex::split_site(file);
    std::optional<Distribution> owner;
    if (split) owner = owner_of(root, file);
    if (owner) versions[owner->name] = owner->version;

    if (split) {
      const std::string top = split->second.substr(0, split->second.find('/'));
      if (auto fw = classify_framework(top); fw && !frameworks.contains(fw->name)) {
        if (!owner) owner = packages.find(root, file, fw->name);
        json entry = {{"name", fw->name}, {"path", (split->first / top).string()}};
        entry["distribution"] = owner ? json(owner->name) : json(nullptr);
        entry["version"] = owner ? json(owner->version) : json(nullptr);
        if (owner) versions[owner->name] = owner->version;
        if (auto build = read_framework_build(root, fw->name, split->first / top))
          entry["build"] = build->to_json();
        frameworks[fw->name] = std::move(entry);
        // jax is pure Python: only jaxlib shows in the maps, but both versions matter.
        if (fw->name == "jaxlib" && !frameworks.contains("jax"))
          if (auto jax = packages.find(root, file, "jax")) {
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

  json interpreter = python.is_null() ? json::object() : python;
  if (!interpreter.contains("version")) {
    if (auto v = python_version_from(files); !v.empty()) interpreter["version"] = v;
  }
  interpreter["implementation"] = "CPython";
  const bool is_python = !python_version_from(files).empty() || interpreter.contains("version");
  if (!is_python) interpreter["implementation"] = nullptr;
  // The kernel's language, as its loaded runtime shows it: what the advice is written for.
  // A Python kernel with R embedded in it (rpy2) is still a Python kernel.
  json language = nullptr;
  if (is_python)
    language = "python";
  else if (r)
    language = "R";
  // An R kernel embeds no Python: its executable is R's, said under "r".
  if (r && !is_python) interpreter = nullptr;

  json fw_list = json::array();
  for (auto& [name, entry] : frameworks)
    fw_list.push_back(std::move(entry));
  json other_list = json::array();
  for (auto& [name, entry] : others)
    other_list.push_back(std::move(entry));

  json fingerprint = {
      {"captured_at_ms", util::wall_ms()},
      {"refreshed_at_ms", util::wall_ms()},
      {"source", "/proc/" + std::to_string(pid) + "/maps, read every " +
                     std::to_string(interval_ms) +
                     " ms while the kernel ran; versions from "
                     "the package metadata beside the loaded files"},
      {"mapped_files", files.size()},
      {"language", language},
      {"python", interpreter},
      {"frameworks", std::move(fw_list)},
      {"native_libraries", std::move(libraries)},
      {"other_packages", std::move(other_list)},
      {"environment", environment},
      {"environment_note",
       "allow-listed variables only, as the kernel was started; changes made later through "
       "os.environ are not seen"},
      {"incompatibilities", find_incompatibilities(versions, library_names)},
  };
  if (r) {
    fingerprint["r"] = to_json(*r);
    if (!python.is_null()) fingerprint["r"]["executable"] = python.value("executable", "");
  }
  return fingerprint;
}

void FingerprintProbe::contribute(nlohmann::json& report) const {
  // A lookup that did not answer in time, or has been stuck a while: named, with how long.
  auto stalled = stalled_;
  if (!stalled) stalled = worker_.blocked(kStallNamed);
  auto& out = report["fingerprint"];
  if (fingerprint_.is_null()) {
    std::string reason = reason_;
    if (reason.empty())
      reason = stalled ? "the kernel's files did not answer before the first fingerprint was made"
                       : "the kernel died before the first read";
    out = {{"available", false},
           {"reason", std::move(reason)},
           {"python", executable_.empty() ? nlohmann::json(nullptr)
                                          : nlohmann::json{{"executable", executable_}}},
           {"environment", environment_},
           {"frameworks", nlohmann::json::array()},
           {"native_libraries", nlohmann::json::array()},
           {"incompatibilities", nlohmann::json::array()}};
  } else {
    out = fingerprint_;
    out["available"] = true;
  }
  if (stalled)
    out["stalled"] = {
        {"path", stalled->path.empty() ? nlohmann::json(nullptr) : nlohmann::json(stalled->path)},
        {"waiting_ms", util::steady_ms() - stalled->since_ms},
        {"note",
         "the kernel's files did not answer (a stalled mount?): what the kernel loaded since "
         "the last fingerprint made before is not named"}};
}

std::unique_ptr<probes::Probe> make_fingerprint_probe(pid_t pid) {
  return std::make_unique<FingerprintProbe>(pid, std::chrono::milliseconds(250));
}

}  // namespace kwd::fingerprint
