#include "kwd/platform/memory_limit.hpp"

#include "kwd/platform/host.hpp"
#include "kwd/platform/linux/enter_cgroup.hpp"
#include "kwd/platform/linux/kernel_cgroup.hpp"
#include "kwd/util/self_exe.hpp"

namespace kwd::platform {
namespace {

class CgroupMemoryLimit final : public KernelMemoryLimit {
 public:
  CgroupMemoryLimit(linux_cgroup::KernelCgroup cgroup, std::string self_exe)
      : cgroup_(std::move(cgroup)), self_exe_(std::move(self_exe)) {}

  [[nodiscard]] std::vector<std::string> wrap_argv(
      const std::vector<std::string>& kernel_argv) const override {
    return linux_cgroup::enter_cgroup_argv(self_exe_, cgroup_.procs_file(), kernel_argv);
  }
  [[nodiscard]] std::string cgroup_dir() const override { return cgroup_.dir(); }
  std::string release() override { return cgroup_.remove(); }

 private:
  linux_cgroup::KernelCgroup cgroup_;
  std::string self_exe_;
};

}  // namespace

std::unique_ptr<KernelMemoryLimit> make_memory_limit(std::uint64_t bytes, std::string& problem) {
  const auto self = platform::self_executable();
  if (self.empty()) {
    problem = "cannot find our own executable (/proc/self/exe) to start the kernel in its cgroup";
    return nullptr;
  }
  try {
    return std::make_unique<CgroupMemoryLimit>(linux_cgroup::KernelCgroup::create(bytes),
                                               self.string());
  } catch (const linux_cgroup::CgroupError& e) {
    problem = e.what();
    return nullptr;
  }
}

}  // namespace kwd::platform
