#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kwd/data/embedded_files.hpp"
#include "kwd/faulthandler/python_shim.hpp"
#include "scoped_env.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using kwd::faulthandler::PythonShim;

namespace {

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string value_of(const std::vector<std::string>& env, const std::string& name) {
  for (const auto& entry : env)
    if (entry.starts_with(name + "=")) return entry.substr(name.size() + 1);
  return "(unset)";
}

unsigned mode_of(const fs::path& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("the shim is kept in the private runtime directory, named by its text, and mended") {
  kwd::test::TempDir runtime("kwd-shim");
  ::chmod(runtime.path.c_str(), 0700);
  kwd::test::ScopedEnv xdg("XDG_RUNTIME_DIR", runtime.path.string());
  const fs::path base = runtime.path / "kernel-watchdog";

  fs::path kept;
  {
    auto shim = PythonShim::create();
    kept = shim.dir();
    CHECK(kept.parent_path() == base);
    CHECK(kept.filename().string().starts_with("pycode-"));
    CHECK(mode_of(kept) == 0700);
    CHECK(mode_of(kept / "sitecustomize.py") == 0600);
    CHECK(read_all(kept / "sitecustomize.py") == kwd::data::sitecustomize_py());
  }
  // Kept once the kernel is gone, untouched by the next start (so is its bytecode cache).
  REQUIRE(fs::exists(kept / "sitecustomize.py"));
  struct stat before {};
  REQUIRE(::stat((kept / "sitecustomize.py").c_str(), &before) == 0);
  CHECK(PythonShim::create().dir() == kept);
  struct stat after {};
  REQUIRE(::stat((kept / "sitecustomize.py").c_str(), &after) == 0);
  CHECK(after.st_ino == before.st_ino);
  CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec);
  CHECK(after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);

  // A shim that is not whole (cut short, or edited) is written again.
  { std::ofstream(kept / "sitecustomize.py", std::ios::binary | std::ios::trunc) << "import os\n"; }
  CHECK(PythonShim::create().dir() == kept);
  CHECK(read_all(kept / "sitecustomize.py") == kwd::data::sitecustomize_py());
  // A link in its place is replaced, not followed.
  const fs::path elsewhere = runtime.write("elsewhere.py", "print('not ours')\n");
  fs::remove(kept / "sitecustomize.py");
  fs::create_symlink(elsewhere, kept / "sitecustomize.py");
  CHECK(PythonShim::create().dir() == kept);
  CHECK_FALSE(fs::is_symlink(kept / "sitecustomize.py"));
  CHECK(read_all(kept / "sitecustomize.py") == kwd::data::sitecustomize_py());
  CHECK(read_all(elsewhere) == "print('not ours')\n");
}

TEST_CASE("the shim's environment: its directory first, a notice of this kernel's own") {
  kwd::test::TempDir runtime("kwd-shim");
  ::chmod(runtime.path.c_str(), 0700);
  kwd::test::ScopedEnv xdg("XDG_RUNTIME_DIR", runtime.path.string());
  const fs::path base = runtime.path / "kernel-watchdog";

  auto shim = PythonShim::create();
  // A notice named by the environment the watchdog inherited is not passed on.
  std::vector<std::string> env{"PYTHONPATH=/mine", "KERNEL_WATCHDOG_NOTICE=/etc/passwd"};
  shim.apply(env);
  CHECK(value_of(env, "PYTHONPATH") == shim.dir().string() + ":/mine");
  CHECK(value_of(env, "PYTHONFAULTHANDLER") == "1");
  CHECK(value_of(env, "KERNEL_WATCHDOG_FAULTHANDLER_ADDED") == "1");
  CHECK(value_of(env, "KERNEL_WATCHDOG_NOTICE") == "(unset)");
  CHECK(names_in(base).size() == 1);  // only the kept shim: a start without a notice makes none

  shim.add_notice(R"({"text": "the previous kernel died"})");
  std::vector<std::string> with_notice;
  shim.apply(with_notice);
  CHECK(value_of(with_notice, "PYTHONPATH") == shim.dir().string());
  CHECK(value_of(with_notice, "KERNEL_WATCHDOG_PYTHONPATH_UNSET") == "1");
  const fs::path notice = value_of(with_notice, "KERNEL_WATCHDOG_NOTICE");
  CHECK(notice.filename() == "notice.json");
  CHECK(notice.parent_path().parent_path() == base);
  CHECK(notice.parent_path().filename().string().starts_with("pyshim-" +
                                                             std::to_string(::getpid()) + "-"));
  CHECK(mode_of(notice.parent_path()) == 0700);
  CHECK(mode_of(notice) == 0600);
  CHECK(read_all(notice) == R"({"text": "the previous kernel died"})");

  const std::string kept = shim.dir().filename().string();
  shim.remove();
  CHECK_FALSE(fs::exists(notice.parent_path()));
  CHECK(names_in(base) == std::vector<std::string>{kept});
}
