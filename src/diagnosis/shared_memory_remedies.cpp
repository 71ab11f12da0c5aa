#include "kwd/diagnosis/shared_memory_remedies.hpp"

#include "kwd/util/size_parse.hpp"

namespace kwd::diagnosis {

Remedy larger_dev_shm(std::optional<std::int64_t> size_bytes) {
  const std::string size = size_bytes && *size_bytes > 0
                               ? util::format_bytes(static_cast<double>(*size_bytes))
                               : std::string("small");
  return {"shm.larger_dev_shm",
          "Give the kernel a larger /dev/shm: docker run --shm-size=8g (or --ipc=host, which "
          "shares the host's); on Kubernetes mount an emptyDir with medium: Memory at /dev/shm; "
          "elsewhere remount the tmpfs larger (mount -o remount,size=8G /dev/shm).",
          "/dev/shm is " + size +
              " here (Docker gives a container 64 MiB); a tensor shared between processes is a "
              "file there, and a write past its free space is a bus error."};
}

Remedy torch_shares_less() {
  return {"torch.file_system_sharing",
          "Share less through /dev/shm: a DataLoader with num_workers=0 (or smaller batches) "
          "keeps batches in the kernel's own memory. torch.multiprocessing.set_sharing_strategy("
          "'file_system') names each shared tensor as a file instead of passing descriptors; it "
          "still needs room in /dev/shm, so it helps with the open-files limit, not this one.",
          "PyTorch is loaded in the kernel; its DataLoader workers and share_memory_() put every "
          "tensor they share into /dev/shm."};
}

}  // namespace kwd::diagnosis
