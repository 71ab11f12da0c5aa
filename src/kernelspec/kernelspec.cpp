#include "kwd/kernelspec/kernelspec.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "kwd/platform/host.hpp"
#include "kwd/platform/regular_file.hpp"
#include "kwd/platform/run_program.hpp"
#include "kwd/util/private_files.hpp"
#include "kwd/util/self_exe.hpp"
#include "kwd/util/shell_word.hpp"

namespace kwd::kernelspec {
namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::optional<nlohmann::json> read_spec(const fs::path& file) {
  // Only a regular file, and a small one: a FIFO named kernel.json must not hang the search.
  constexpr std::size_t kMaxSpecBytes = 1 << 20;
  const auto opened = platform::open_regular_file(AT_FDCWD, file.c_str());
  if (!opened.fd) return std::nullopt;
  const auto text = platform::read_up_to(opened.fd.get(), kMaxSpecBytes + 1);
  if (!text || text->size() > kMaxSpecBytes) return std::nullopt;
  auto spec = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (spec.is_discarded() || !spec.is_object() || !spec.contains("argv") ||
      !spec["argv"].is_array())
    return std::nullopt;
  return spec;
}

bool is_bare_python(const std::string& arg0) {
  if (arg0.find('/') != std::string::npos) return false;
  return arg0 == "python" || arg0.starts_with("python3");
}

// The module a Python kernelspec runs ("-m ipykernel_launcher"); empty when it runs none.
std::string module_run_by(const std::vector<std::string>& argv) {
  for (std::size_t i = 1; i + 1 < argv.size(); ++i)
    if (argv[i] == "-m") return argv[i + 1];
  return "";
}

bool can_import(const fs::path& python, const std::string& module) {
  // find_spec, not import: importing ipykernel_launcher would not start a kernel, but another
  // kernel's module might do anything at import.
  const auto end = platform::run_program(
      {python.string(), "-c",
       "import importlib.util, sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)",
       module},
      {.quiet = true, .limit = std::chrono::seconds(20)});
  return end.exit_status == 0;
}

// jupyter_client swaps a bare "python"/"python3" for its *own* interpreter, which is not
// ours to know. The interpreter that owns the kernelspec's prefix is the best guess, then
// those on PATH; of them, the first that has the kernel's module (a python3 early on PATH
// without ipykernel would make a kernel that cannot start), else the first.
fs::path resolve_python(const std::string& arg0, const fs::path& spec_dir,
                        const std::string& module) {
  // <prefix>/share/jupyter/kernels/<name>
  const fs::path prefix = spec_dir.parent_path().parent_path().parent_path().parent_path();
  std::vector<fs::path> candidates;
  for (const std::string& name : {arg0, std::string("python3")}) {
    const fs::path beside = prefix / "bin" / name;
    std::error_code ec;
    if (fs::exists(beside, ec)) candidates.push_back(beside);
  }
  for (const std::string& name : {arg0, std::string("python3")})
    for (auto& found : util::find_all_on_path(name))
      if (std::find(candidates.begin(), candidates.end(), found) == candidates.end())
        candidates.push_back(std::move(found));
  if (candidates.empty())
    throw KernelspecError("the kernelspec runs '" + arg0 +
                          "', and no such interpreter was found (not beside " + prefix.string() +
                          ", not on PATH)");
  if (!module.empty())
    for (const auto& python : candidates)
      if (can_import(python, module)) return python;
  return candidates.front();
}

fs::path kernels_dir(const WrapRequest& r, const fs::path& python) {
  switch (r.destination) {
    case Destination::kUser:
      return user_data_dir() / "kernels";
    case Destination::kPrefix:
      return r.prefix / "share" / "jupyter" / "kernels";
    case Destination::kSysPrefix: {
      std::string p = env("VIRTUAL_ENV");
      if (p.empty()) p = env("CONDA_PREFIX");
      if (p.empty() && !python.empty()) p = python.parent_path().parent_path().string();
      if (p.empty())
        throw KernelspecError(
            "--sys-prefix: no active environment and no interpreter to take it from");
      return fs::path(p) / "share" / "jupyter" / "kernels";
    }
  }
  return {};
}

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return false;
  return name != "." && name != "..";
}

}  // namespace

bool Kernelspec::wrapped() const {
  return spec.contains("metadata") && spec["metadata"].is_object() &&
         spec["metadata"].contains("kernel_watchdog");
}

fs::path user_data_dir() {
  if (auto d = env("JUPYTER_DATA_DIR"); !d.empty()) return d;
  return platform::jupyter_user_data_dir();
}

std::vector<fs::path> jupyter_data_path() {
  std::vector<fs::path> out;
  std::stringstream extra(env("JUPYTER_PATH"));
  std::string entry;
  while (std::getline(extra, entry, ':'))
    if (!entry.empty()) out.emplace_back(entry);
  out.push_back(user_data_dir());
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (auto p = env(var); !p.empty()) out.push_back(fs::path(p) / "share" / "jupyter");
  out.emplace_back("/usr/local/share/jupyter");
  out.emplace_back("/usr/share/jupyter");
  return out;
}

std::vector<Kernelspec> find_all() {
  std::vector<Kernelspec> out;
  std::set<std::string> seen;
  for (const auto& base : jupyter_data_path()) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(base / "kernels", ec)) {
      const std::string name = entry.path().filename().string();
      if (seen.contains(name)) continue;
      if (auto spec = read_spec(entry.path() / "kernel.json")) {
        seen.insert(name);
        out.push_back({name, entry.path(), std::move(*spec)});
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

std::optional<Kernelspec> find(const std::string& name) {
  for (auto& k : find_all())
    if (k.name == name) return k;
  return std::nullopt;
}

namespace {

// The settings in which two wraps of one name differ, as a person reads them.
std::vector<std::string> differences(const Kernelspec& before, const Kernelspec& after) {
  std::vector<std::string> out;
  const auto a = wrap_info(before), b = wrap_info(after);
  auto words = [](const std::vector<std::string>& v) {
    std::string text;
    for (const auto& w : v)
      text += (text.empty() ? "" : " ") + w;
    return text.empty() ? std::string("(none)") : text;
  };
  auto compare = [&](const std::string& what, const std::string& was, const std::string& now) {
    if (was != now) out.push_back(what + ": " + was + " -> " + now);
  };
  compare("wraps", a ? a->wrapped_from : "", b ? b->wrapped_from : "");
  compare("kernel-watchdog", a ? a->watchdog : "", b ? b->watchdog : "");
  compare("run options", words(a ? a->run_options : std::vector<std::string>{}),
          words(b ? b->run_options : std::vector<std::string>{}));
  compare("kernel command", words(a ? a->kernel_argv : std::vector<std::string>{}),
          words(b ? b->kernel_argv : std::vector<std::string>{}));
  compare("display name", before.spec.value("display_name", ""),
          after.spec.value("display_name", ""));
  // The rest of kernel.json (env, interrupt_mode, language, the source's own metadata): the
  // wrap copies it from the source, which may have changed since.
  auto shown = [](const nlohmann::json* v) {
    if (v == nullptr) return std::string("(none)");
    std::string text = v->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (text.size() <= 60) return text;
    std::size_t cut = 59;  // before a whole UTF-8 character, never inside one
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
      --cut;
    return text.substr(0, cut) + "…";
  };
  auto rest = [](const nlohmann::json& spec) {
    nlohmann::json r = spec.is_object() ? spec : nlohmann::json::object();
    r.erase("argv");
    r.erase("display_name");
    if (r.contains("metadata") && r["metadata"].is_object()) {
      r["metadata"].erase("kernel_watchdog");
      if (r["metadata"].empty()) r.erase("metadata");
    }
    return r;
  };
  const auto was = rest(before.spec), now = rest(after.spec);
  std::set<std::string> keys;
  for (const auto& [key, value] : was.items())
    keys.insert(key);
  for (const auto& [key, value] : now.items())
    keys.insert(key);
  for (const auto& key : keys) {
    const nlohmann::json* a_value = was.contains(key) ? &was[key] : nullptr;
    const nlohmann::json* b_value = now.contains(key) ? &now[key] : nullptr;
    if (a_value == nullptr || b_value == nullptr || *a_value != *b_value)
      out.push_back("kernel.json " + key + ": " + shown(a_value) + " -> " + shown(b_value));
  }
  return out;
}

}  // namespace

WrapOutcome wrap(const WrapRequest& r) {
  const auto source = find(r.source_name);
  if (!source) {
    throw KernelspecError("no kernelspec named '" + r.source_name +
                          "' on the Jupyter path (see `kernel-watchdog kernelspec list`)");
  }
  if (source->wrapped())
    throw KernelspecError("'" + r.source_name + "' is already wrapped by kernel-watchdog");
  const std::string new_name = r.new_name.empty() ? r.source_name + "-watchdog" : r.new_name;
  if (!valid_name(new_name))
    throw KernelspecError("'" + new_name +
                          "' is not a valid kernelspec name (letters, digits, - _ .)");

  nlohmann::json spec = source->spec;
  std::vector<std::string> kernel_argv;
  for (const auto& a : spec["argv"]) {
    if (!a.is_string()) throw KernelspecError("kernel.json argv holds a non-string");
    kernel_argv.push_back(a.get<std::string>());
  }
  if (kernel_argv.empty()) throw KernelspecError("kernel.json argv is empty");
  fs::path python;
  if (is_bare_python(kernel_argv[0])) {
    python = resolve_python(kernel_argv[0], source->dir, module_run_by(kernel_argv));
    kernel_argv[0] = python.string();
  } else if (kernel_argv[0].find('/') != std::string::npos) {
    python = kernel_argv[0];
  }

  std::vector<std::string> argv{r.watchdog_path.string(), "run"};
  argv.insert(argv.end(), r.extra_run_options.begin(), r.extra_run_options.end());
  argv.push_back("--");
  argv.insert(argv.end(), kernel_argv.begin(), kernel_argv.end());
  spec["argv"] = argv;
  spec["display_name"] = r.display_name.empty()
                             ? spec.value("display_name", r.source_name) + " (watchdog)"
                             : r.display_name;
  if (!spec.contains("metadata") || !spec["metadata"].is_object())
    spec["metadata"] = nlohmann::json::object();
  spec["metadata"]["kernel_watchdog"] = {{"wrapped_from", r.source_name},
                                         {"source_dir", source->dir.string()},
                                         {"original_argv", source->spec["argv"]}};

  const fs::path target = kernels_dir(r, python) / new_name;
  WrapOutcome outcome{target, WrapOutcome::What::kCreated, spec["display_name"].get<std::string>()};
  std::error_code ec;
  if (fs::exists(target / "kernel.json", ec)) {
    const auto existing = read_spec(target / "kernel.json");
    const Kernelspec before{new_name, target, existing.value_or(nlohmann::json::object())};
    if (!existing || !before.wrapped())
      throw KernelspecError(target.string() + " already holds a kernelspec that is not ours");
    auto changes = differences(before, Kernelspec{new_name, target, spec});
    // Unchanged only when the whole kernel.json is (metadata's source_dir and original argv
    // too, which no line above names).
    if (changes.empty() && *existing == spec) {
      outcome.what = WrapOutcome::What::kUnchanged;
      return outcome;
    }
    if (changes.empty())
      changes.push_back("the kernelspec it was wrapped from (its directory or command)");
    if (!r.force) {
      std::string text =
          "'" + new_name + "' is already a wrap (" + target.string() + ") with other settings:";
      for (const auto& change : changes)
        text += "\n  " + change;
      throw KernelspecError(text + "\nadd --force to replace it with the new ones");
    }
    outcome.what = WrapOutcome::What::kReplaced;
  }
  fs::create_directories(target, ec);
  if (ec) throw KernelspecError("cannot create " + target.string() + ": " + ec.message());
  // Logos and kernel.js come along so front ends show the kernel as before.
  for (const auto& entry : fs::directory_iterator(source->dir, ec)) {
    if (entry.path().filename() == "kernel.json" || !entry.is_regular_file()) continue;
    fs::copy_file(entry.path(), target / entry.path().filename(),
                  fs::copy_options::overwrite_existing, ec);
  }
  try {
    util::write_file_atomically(target, "kernel.json", spec.dump(1) + "\n", 0644);
  } catch (const util::FileError& e) {
    throw KernelspecError(e.what());
  }
  return outcome;
}

std::optional<WrapInfo> wrap_info(const Kernelspec& k) {
  if (!k.wrapped()) return std::nullopt;
  WrapInfo info;
  const auto& meta = k.spec["metadata"]["kernel_watchdog"];
  if (meta.is_object() && meta.contains("wrapped_from") && meta["wrapped_from"].is_string())
    info.wrapped_from = meta["wrapped_from"].get<std::string>();
  std::vector<std::string> argv;
  if (k.spec.contains("argv") && k.spec["argv"].is_array())
    for (const auto& a : k.spec["argv"])
      if (a.is_string()) argv.push_back(a.get<std::string>());
  const auto dashes = std::find(argv.begin(), argv.end(), "--");
  if (argv.size() < 3 || argv[1] != "run" || dashes == argv.end() || dashes + 1 == argv.end()) {
    info.problem = "its argv is not `kernel-watchdog run [options] -- KERNEL_ARGV`";
    return info;
  }
  info.watchdog = argv[0];
  info.run_options.assign(argv.begin() + 2, dashes);
  info.kernel_argv.assign(dashes + 1, argv.end());
  // What exec would fail on: the watchdog moved or removed, the interpreter gone (a deleted
  // virtualenv). A bare name is looked up on PATH when the kernel starts; it is not judged.
  if (info.watchdog.find('/') != std::string::npos && ::access(info.watchdog.c_str(), X_OK) != 0)
    info.problem =
        "kernel-watchdog is no longer at " + info.watchdog + " (" + std::strerror(errno) + ")";
  else if (const auto& program = info.kernel_argv.front();
           program.find('/') != std::string::npos && ::access(program.c_str(), X_OK) != 0)
    info.problem = "the kernel's program " + program + " is gone (" + std::strerror(errno) + ")";
  return info;
}

std::string WrapInfo::repair_command(const Kernelspec& wrap) const {
  std::string command =
      "kernel-watchdog kernelspec wrap " +
      (wrapped_from.empty() ? std::string("SOURCE") : util::shell_word(wrapped_from)) + " --name " +
      util::shell_word(wrap.name);
  // A display name of the user's own (not the "<source's> (watchdog)" wrap gives) is kept.
  const std::string display = wrap.spec.is_object() ? wrap.spec.value("display_name", "") : "";
  if (!display.empty() && !display.ends_with(" (watchdog)"))
    command += " --display-name " + util::shell_word(display);
  for (const auto& option : run_options)
    command += " " + util::shell_word("--run-option=" + option);
  // Where it lives: DATA/kernels/NAME. The user's data dir is wrap's default; a prefix's
  // share/jupyter is --prefix (what --sys-prefix writes to, too). Any other place on
  // JUPYTER_PATH cannot be written to by wrap: the broken one is removed there and the new one
  // made in the user's data dir, where Jupyter then finds it.
  const fs::path data = wrap.dir.parent_path().parent_path();
  std::error_code ec;
  if (fs::equivalent(data, user_data_dir(), ec)) return command + " --force";
  if (data.filename() == "jupyter" && data.parent_path().filename() == "share")
    return command + " --prefix " + util::shell_word(data.parent_path().parent_path().string()) +
           " --force";
  return "kernel-watchdog kernelspec unwrap " + util::shell_word(wrap.name) + " && " + command;
}

fs::path unwrap(const std::string& name) {
  const auto spec = find(name);
  if (!spec) throw KernelspecError("no kernelspec named '" + name + "' on the Jupyter path");
  if (!spec->wrapped())
    throw KernelspecError(
        "'" + name + "' was not created by `kernel-watchdog kernelspec wrap`; not removing it");
  std::error_code ec;
  fs::remove_all(spec->dir, ec);
  if (ec) throw KernelspecError("cannot remove " + spec->dir.string() + ": " + ec.message());
  return spec->dir;
}

}  // namespace kwd::kernelspec
