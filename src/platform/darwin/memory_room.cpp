// Not built on this project's Linux CI; written from Apple's documented APIs.
#include "kwd/platform/memory_room.hpp"

#include <mach/mach.h>
#include <sys/sysctl.h>

#include <algorithm>

namespace kwd::platform {

// macOS has no per-process memory ceiling to honour: the machine's memory, less what is
// neither free nor reclaimable (inactive and purgeable pages are given back under pressure).
std::optional<MemoryRoom> memory_room(std::string& problem) {
  std::uint64_t total = 0;
  std::size_t size = sizeof(total);
  if (::sysctlbyname("hw.memsize", &total, &size, nullptr, 0) != 0) {
    problem = "sysctl hw.memsize failed";
    return std::nullopt;
  }
  vm_statistics64_data_t vm{};
  mach_msg_type_number_t count = HOST_VM_INFO64_COUNT;
  if (host_statistics64(mach_host_self(), HOST_VM_INFO64, reinterpret_cast<host_info64_t>(&vm),
                        &count) != KERN_SUCCESS) {
    problem = "host_statistics64 failed";
    return std::nullopt;
  }
  const auto page = static_cast<std::int64_t>(vm_kernel_page_size);
  const std::int64_t available =
      (static_cast<std::int64_t>(vm.free_count) + vm.inactive_count + vm.purgeable_count) * page;
  MemoryRoom room;
  room.limit = static_cast<std::int64_t>(total);
  room.in_use = std::max<std::int64_t>(room.limit - available, 0);
  room.source = "the machine's available memory";
  return room;
}

}  // namespace kwd::platform
