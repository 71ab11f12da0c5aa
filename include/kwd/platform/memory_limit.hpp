#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kwd::platform {

// `run --memory-limit`: a memory ceiling of the kernel's own (a cgroup on Linux), made
// before the kernel starts and released after it died. One implementation per platform
// folder under src/platform/.
class KernelMemoryLimit {
 public:
  virtual ~KernelMemoryLimit() = default;
  // The command that starts the kernel already inside the limit.
  [[nodiscard]] virtual std::vector<std::string> wrap_argv(
      const std::vector<std::string>& kernel_argv) const = 0;
  // Where the memory probes read it (a cgroup directory); empty where not applicable.
  [[nodiscard]] virtual std::string cgroup_dir() const = 0;
  // After the kernel died; "" on success, else what went wrong.
  virtual std::string release() = 0;
};

// nullptr, with `problem` saying why in words for the user, where no limit can be made.
std::unique_ptr<KernelMemoryLimit> make_memory_limit(std::uint64_t bytes, std::string& problem);

}  // namespace kwd::platform
