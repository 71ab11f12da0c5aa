#pragma once

#include <sys/types.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "kwd/probes/drm/fdinfo.hpp"

namespace kwd::probes::drm {

// A DRM client held by one of the processes, seen through descriptor `fd`.
struct HeldClient {
  pid_t pid = 0;
  int fd = -1;
  DrmClient client;
};

struct ClientScan {
  // Each client once: the same drm-client-id on the same device (and driver) seen again,
  // through a dup'ed descriptor, a forked child or one passed over a socket, is the same
  // memory and the same engine time, counted for the first process (in the order given).
  std::vector<HeldClient> clients;
  std::size_t drm_descriptors = 0;    // every descriptor open on /dev/dri, duplicates included
  std::size_t duplicates = 0;         // those that repeat a client already counted
  std::vector<std::string> problems;  // a process whose descriptors could not be listed
};

// The DRM clients of `pids` as <root>/proc/<pid>/fd and fdinfo show them: every descriptor
// whose link names /dev/dri/..., read through its fdinfo. `root` is "/" on a live machine and
// a fixture tree in tests. A process gone meanwhile is skipped; one whose descriptors are not
// ours to read is named in problems.
ClientScan scan_clients(const std::filesystem::path& root, const std::vector<pid_t>& pids);

}  // namespace kwd::probes::drm
