#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "kwd/stacks/linux/libdw_api.hpp"
#include "kwd/stacks/linux/thread_freeze.hpp"
#include "kwd/stacks/stacks.hpp"

namespace kwd::stacks::linux_stacks {

struct UnwoundThread {
  pid_t tid = 0;
  std::vector<NativeFrame> frames;  // most recent first
  bool truncated = false;
  std::string problem;
};

// Unwinds each image with libdwfl (CFI, as eu-stack does) and names every frame from the
// modules `pid` has mapped now. Stack memory comes from the images; anything else is read
// from the live process. After `deadline` frames are no longer given file:line (reading a
// big library's DWARF can take seconds). `done` gets each thread as soon as it is unwound.
// Throws std::runtime_error when libdwfl cannot be set up for the process at all.
void unwind(const Libdw& lib, pid_t pid, const std::vector<ThreadImage>& images,
            std::size_t max_frames, std::chrono::steady_clock::time_point deadline,
            const std::function<void(const UnwoundThread&)>& done);

}  // namespace kwd::stacks::linux_stacks
