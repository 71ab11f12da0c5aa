#include "kwd/platform/resident_pages.hpp"

#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kwd::platform {
namespace {

using Range = std::pair<std::uintptr_t, std::uintptr_t>;  // [first, second)

// The mappings holding a page this process wrote, resident or swapped out, from
// /proc/self/smaps; nothing when it cannot be read whole (each entry must show its
// Anonymous, Swap and VmFlags lines, which end it).
std::optional<std::vector<Range>> written_mappings() {
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) return std::nullopt;
  std::vector<Range> written;
  Range current{};
  bool open = false, anonymous_seen = false, swap_seen = false, dirty = false;
  for (std::string line; std::getline(smaps, line);) {
    const auto colon = line.find(':');
    const auto space = line.find(' ');
    if (colon == std::string::npos || (space != std::string::npos && space < colon)) {
      // A mapping's first line: "start-end perms offset dev inode [path]" (dev has a colon).
      if (open) return std::nullopt;  // the one before ended without its VmFlags
      const auto dash = line.find('-');
      if (dash == std::string::npos || space == std::string::npos || dash > space)
        return std::nullopt;
      current = {std::stoull(line.substr(0, dash), nullptr, 16),
                 std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16)};
      open = true;
      anonymous_seen = swap_seen = dirty = false;
    } else if (line.starts_with("Anonymous:")) {
      anonymous_seen = true;
      dirty = dirty || std::stoul(line.substr(colon + 1)) != 0;
    } else if (line.starts_with("Swap:")) {
      swap_seen = true;
      dirty = dirty || std::stoul(line.substr(colon + 1)) != 0;
    } else if (line.starts_with("VmFlags:")) {
      if (!open || !anonymous_seen || !swap_seen) return std::nullopt;
      if (dirty) written.push_back(current);
      open = false;
    }
  }
  if (open || !smaps.eof()) return std::nullopt;
  return written;
}

struct Walk {
  const std::vector<Range>* written = nullptr;
  std::uintptr_t vdso = 0;
  std::size_t released = 0;
};

bool overlaps(const std::vector<Range>& ranges, Range r) {
  for (const auto& w : ranges)
    if (w.first < r.second && r.first < w.second) return true;
  return false;
}

// Called with the dynamic linker's lock held: no object is loaded or unloaded meanwhile, so
// the segments seen here stay mapped where they are while they are advised.
int release_object(dl_phdr_info* info, std::size_t, void* data) {
  auto& walk = *static_cast<Walk*>(data);
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    const std::uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && start <= walk.vdso && walk.vdso < start + ph.p_memsz)
      return 0;  // the vDSO: the kernel's own pages, not a file's
  }
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    // Code and read-only data: loaded read-only, never written by the loader (a text
    // relocation would have made its pages anonymous, and the mapping is then skipped).
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_W) != 0 || ph.p_memsz == 0) continue;
    const std::uintptr_t start = (info->dlpi_addr + ph.p_vaddr) & ~(page - 1);
    const std::uintptr_t end = (info->dlpi_addr + ph.p_vaddr + ph.p_memsz + page - 1) & ~(page - 1);
    if (overlaps(*walk.written, {start, end})) continue;
    if (::madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED) == 0)
      walk.released += end - start;
  }
  return 0;
}

}  // namespace

std::size_t release_unwritten_file_pages() noexcept {
  try {
    const auto written = written_mappings();
    if (!written) return 0;
    Walk walk;
    walk.written = &*written;
    walk.vdso = static_cast<std::uintptr_t>(::getauxval(AT_SYSINFO_EHDR));
    ::dl_iterate_phdr(release_object, &walk);
    return walk.released;
  } catch (...) {  // smaps not as expected, or no memory to read it: nothing is released
    return 0;
  }
}

}  // namespace kwd::platform
