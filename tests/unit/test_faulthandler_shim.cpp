#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
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
using kwd::test::read_file;

namespace {

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
    CHECK(read_file(kept / "sitecustomize.py") == kwd::data::sitecustomize_py());
  }
  // Kept once the kernel is gone, untouched by the next start (so is its bytecode cache).
  REQUIRE(fs::exists(kept / "sitecustomize.py"));
  struct stat before {};
  REQUIRE(::stat((kept / "sitecustomize.py").c_str(), &before) == 0);
  const auto written_at = fs::last_write_time(kept / "sitecustomize.py");
  CHECK(PythonShim::create().dir() == kept);
  struct stat after {};
  REQUIRE(::stat((kept / "sitecustomize.py").c_str(), &after) == 0);
  CHECK(after.st_ino == before.st_ino);
  CHECK(fs::last_write_time(kept / "sitecustomize.py") == written_at);

  // A shim that is not whole (cut short, or edited to the same size) is written again, and the
  // bytecode cached from what was there is dropped.
  const std::string text(kwd::data::sitecustomize_py());
  { std::ofstream(kept / "sitecustomize.py", std::ios::binary | std::ios::trunc) << "import os\n"; }
  CHECK(PythonShim::create().dir() == kept);
  CHECK(read_file(kept / "sitecustomize.py") == text);
  fs::create_directories(kept / "__pycache__");
  runtime.write("stale.pyc", "stale");
  fs::rename(runtime.path / "stale.pyc", kept / "__pycache__" / "sitecustomize.cpython-311.pyc");
  {
    std::string edited = text;
    edited[edited.size() / 2] = edited[edited.size() / 2] == '#' ? '!' : '#';
    std::ofstream(kept / "sitecustomize.py", std::ios::binary | std::ios::trunc) << edited;
  }
  CHECK(PythonShim::create().dir() == kept);
  CHECK(read_file(kept / "sitecustomize.py") == text);
  CHECK_FALSE(fs::exists(kept / "__pycache__"));
  // A link in its place, even to the very same text, is replaced, not followed.
  const fs::path elsewhere = runtime.write("elsewhere.py", text);
  fs::remove(kept / "sitecustomize.py");
  fs::create_symlink(elsewhere, kept / "sitecustomize.py");
  CHECK(PythonShim::create().dir() == kept);
  CHECK_FALSE(fs::is_symlink(kept / "sitecustomize.py"));
  CHECK(read_file(kept / "sitecustomize.py") == text);
  // So is a directory.
  fs::remove(kept / "sitecustomize.py");
  fs::create_directories(kept / "sitecustomize.py" / "inside");
  CHECK(PythonShim::create().dir() == kept);
  CHECK(read_file(kept / "sitecustomize.py") == text);
}

TEST_CASE("kept shims of other versions are swept once unused for a week; recent ones stay") {
  kwd::test::TempDir runtime("kwd-shim");
  ::chmod(runtime.path.c_str(), 0700);
  kwd::test::ScopedEnv xdg("XDG_RUNTIME_DIR", runtime.path.string());
  const fs::path base = runtime.path / "kernel-watchdog";
  fs::create_directories(base / "pycode-00000000000000aa");  // an upgrade ago
  fs::create_directories(base / "pycode-00000000000000bb");  // another version, used today
  fs::create_directories(base / "unrelated-old");
  runtime.write("sitecustomize.py", "old");
  fs::rename(runtime.path / "sitecustomize.py",
             base / "pycode-00000000000000aa" / "sitecustomize.py");
  const auto weeks_ago = fs::file_time_type::clock::now() - std::chrono::hours(24 * 8);
  for (const char* name : {"pycode-00000000000000aa", "unrelated-old"})
    fs::last_write_time(base / name, weeks_ago);
  const fs::path ours = PythonShim::create().dir();
  CHECK(fs::exists(ours / "sitecustomize.py"));
  CHECK_FALSE(fs::exists(base / "pycode-00000000000000aa"));
  CHECK(fs::exists(base / "pycode-00000000000000bb"));
  CHECK(fs::exists(base / "unrelated-old"));
  // Ours is marked used at every start, however old it was.
  fs::last_write_time(ours, weeks_ago);
  CHECK(PythonShim::create().dir() == ours);
  CHECK(fs::last_write_time(ours) > weeks_ago + std::chrono::hours(24));
}

TEST_CASE("without a private directory the shim and its notice live for one kernel in TMPDIR") {
  if (::geteuid() != 0) return;  // needs a second user to squat the private directory's name
  kwd::test::TempDir shared("kwd-shim-shared");
  ::chmod(shared.path.c_str(), 01777);
  kwd::test::ScopedEnv xdg("XDG_RUNTIME_DIR", std::nullopt);
  kwd::test::ScopedEnv tmpdir("TMPDIR", shared.path.string());
  const fs::path squat = shared.path / ("kernel-watchdog-" + std::to_string(::geteuid()));
  fs::create_directory(squat);
  REQUIRE(::chown(squat.c_str(), 65534, 65534) == 0);

  auto shim = PythonShim::create();
  const fs::path dir = shim.dir();
  CHECK(dir.parent_path() == shared.path);
  CHECK(dir.filename().string().starts_with("kernel-watchdog-shim-" + std::to_string(::getpid())));
  CHECK(read_file(dir / "sitecustomize.py") == kwd::data::sitecustomize_py());
  shim.add_notice(R"({"text": "died"})");
  std::vector<std::string> env;
  shim.apply(env);
  CHECK(fs::path(value_of(env, "KERNEL_WATCHDOG_NOTICE")) == dir / "notice.json");
  CHECK(names_in(squat).empty());  // nothing of ours under the other user's directory
  shim.remove();
  CHECK_FALSE(fs::exists(dir));
}

TEST_CASE("the shim's environment: its directory first, a notice of this kernel's own") {
  kwd::test::TempDir runtime("kwd-shim");
  ::chmod(runtime.path.c_str(), 0700);
  kwd::test::ScopedEnv xdg("XDG_RUNTIME_DIR", runtime.path.string());
  const fs::path base = runtime.path / "kernel-watchdog";

  auto shim = PythonShim::create();
  // A notice named by the environment the watchdog inherited is not passed on.
  std::vector<std::string> env{"PYTHONPATH=/mine", "KERNEL_WATCHDOG_NOTICE=/etc/passwd",
                               "KERNEL_WATCHDOG_NOTICE=/etc/group"};
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
  CHECK(read_file(notice) == R"({"text": "the previous kernel died"})");

  const std::string kept = shim.dir().filename().string();
  shim.remove();
  CHECK_FALSE(fs::exists(notice.parent_path()));
  CHECK(names_in(base) == std::vector<std::string>{kept});
}
