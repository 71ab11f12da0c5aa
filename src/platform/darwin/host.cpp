// Not built on this project's Linux CI; written from Apple's documented APIs.
#include "kwd/platform/host.hpp"

#include <mach-o/dyld.h>
#include <mach/mach.h>
#include <sys/sysctl.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace kwd::platform {
namespace fs = std::filesystem;

fs::path self_executable() {
  std::uint32_t size = 0;
  _NSGetExecutablePath(nullptr, &size);
  std::vector<char> buf(size + 1);
  if (_NSGetExecutablePath(buf.data(), &size) == 0) return fs::weakly_canonical(buf.data());
  return {};
}

std::string default_opener() {
  return "open";
}

fs::path jupyter_user_data_dir() {
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr ? home : "") / "Library" / "Jupyter";
}

std::optional<int> run_internal_step(int /*argc*/, char** /*argv*/) {
  return std::nullopt;
}

std::string boot_id() {
  std::array<char, 64> uuid{};
  std::size_t size = uuid.size();
  if (::sysctlbyname("kern.bootsessionuuid", uuid.data(), &size, nullptr, 0) != 0) return {};
  return std::string(uuid.data(), ::strnlen(uuid.data(), uuid.size()));
}

std::int64_t self_resident_bytes() {
  mach_task_basic_info_data_t info{};
  mach_msg_type_number_t count = MACH_TASK_BASIC_INFO_COUNT;
  if (task_info(mach_task_self(), MACH_TASK_BASIC_INFO, reinterpret_cast<task_info_t>(&info),
                &count) != KERN_SUCCESS)
    return -1;
  return static_cast<std::int64_t>(info.resident_size);
}

}  // namespace kwd::platform
