#include "kwd/diagnosis/cell_failure.hpp"

#include <algorithm>
#include <array>
#include <regex>

#include "kwd/diagnosis/report_view.hpp"
#include "kwd/diagnosis/shared_memory_remedies.hpp"
#include "kwd/diagnosis/signature_scan.hpp"
#include "kwd/diagnosis/worker_oom.hpp"
#include "kwd/util/size_parse.hpp"

namespace kwd::diagnosis {
namespace {

std::string bytes(std::int64_t b) {
  return util::format_bytes(static_cast<double>(b));
}

// Bytes of one element of a TensorFlow dtype as its messages name it ("float", "int64").
std::int64_t dtype_size(const std::string& type) {
  if (type == "double" || type == "int64" || type == "uint64" || type == "complex64") return 8;
  if (type == "complex128") return 16;
  if (type == "half" || type == "bfloat16" || type == "int16" || type == "uint16") return 2;
  if (type == "int8" || type == "uint8" || type == "bool" || type == "qint8") return 1;
  return 4;  // float, int32, uint32
}

std::string device_words(const std::string& device) {
  if (device.find("device:CPU") != std::string::npos || device.empty()) return "the CPU";
  if (const auto at = device.find("device:"); at != std::string::npos) return device.substr(at + 7);
  return device;
}

class CellExplainer {
 public:
  CellExplainer(const CellFailureFacts& facts, const SignatureTable& table)
      : facts_(facts), watch_(facts.watch) {
    std::vector<TextSource> sources{{"/evalue", "error", facts.evalue},
                                    {"/traceback", "traceback", facts.traceback},
                                    {"/stderr", "cell stderr", facts.stderr_text}};
    hits_ = scan(table, sources);
  }

  std::optional<CellFailureFinding> run() {
    if (auto f = numpy_abi()) return f;
    if (auto f = dataloader_worker()) return f;
    if (auto f = framework_oom()) return f;
    return std::nullopt;
  }

 private:
  const CellFailureFacts& facts_;
  ReportView watch_;
  std::vector<SignatureHit> hits_;

  [[nodiscard]] const SignatureHit* hit(std::string_view id) const {
    const auto it = std::find_if(hits_.begin(), hits_.end(),
                                 [&](const SignatureHit& h) { return h.signature->id == id; });
    return it == hits_.end() ? nullptr : &*it;
  }

  static std::string quoted(const SignatureHit& h) {
    return h.label + ": " + h.excerpt + "  [" + h.signature->id + "]";
  }

  [[nodiscard]] std::string all_text() const {
    return facts_.evalue + "\n" + facts_.traceback + "\n" + facts_.stderr_text;
  }

  [[nodiscard]] std::string loaded_version(const std::string& name) const {
    for (const char* list : {"/fingerprint/frameworks", "/fingerprint/other_packages"})
      for (const auto& entry : watch_.array(list)) {
        const ReportView e(entry);
        if (e.text("/name").value_or("") == name) return e.text("/version").value_or("");
      }
    return "";
  }

  // The most memory the kernel may have, and how to say it: its cgroup's limit, else the
  // machine's memory.
  struct MemoryThereIs {
    std::int64_t bytes = 0;
    std::string words;
  };
  [[nodiscard]] std::optional<MemoryThereIs> memory_there_is() const {
    if (auto limit = watch_.integer("/cgroup/limit"); limit && *limit > 0)
      return MemoryThereIs{*limit, "the kernel's cgroup allows " + bytes(*limit)};
    if (auto total = watch_.integer("/system_memory/mem_total"))
      return MemoryThereIs{*total, "the machine has " + bytes(*total)};
    return std::nullopt;
  }

  // A module built for NumPy 1.x imported under NumPy 2: the cell's import fails (or the
  // module misbehaves later). NumPy's own message says which NumPy is installed; the
  // traceback says which module was being imported.
  std::optional<CellFailureFinding> numpy_abi() const {
    const SignatureHit* h = hit("numpy.abi_mismatch");
    if (h == nullptr) return std::nullopt;
    CellFailureFinding f;
    f.cause = kNumpyAbiMismatch.id;
    f.evidence.push_back(quoted(*h));
    const std::string text = all_text();
    std::smatch m;
    const std::string loaded_numpy = loaded_version("numpy");
    std::string numpy = loaded_numpy;
    static const std::regex installed(R"(cannot be run in\s+NumPy ([0-9]+\.[0-9]+\.[0-9]+))");
    if (std::regex_search(text, m, installed)) {
      numpy = m[1].str();
      f.evidence.push_back("NumPy's message names the NumPy installed: " + numpy);
    }
    if (!loaded_numpy.empty())
      f.evidence.push_back("the kernel has NumPy " + loaded_numpy + " loaded (fingerprint)");
    const std::string module = importing_module();
    std::string module_version;
    if (!module.empty()) {
      module_version = loaded_version(module);
      f.evidence.push_back("the traceback was importing " + module +
                           (module_version.empty() ? "" : " " + module_version));
    }
    const std::string who =
        module.empty() ? "A module" : module + (module_version.empty() ? "" : " " + module_version);
    f.headline = who + " was built for NumPy 1.x and cannot run under NumPy " +
                 (numpy.empty() ? std::string("2") : numpy) + ": the import failed with " +
                 facts_.ename;
    const std::string name = module.empty() ? "the module in the traceback" : module;
    f.remedies.push_back(
        {"numpy.rebuild_or_pin",
         "Upgrade " + name + " to a release built for NumPy 2 (pip install -U " +
             (module.empty() ? std::string("<module>") : module) +
             "), or pin numpy<2 in this environment until it has one. Check that the kernel does "
             "not import it from another environment (PYTHONPATH, sys.path, --user site).",
         "Extension modules compiled against NumPy 1.x cannot use NumPy 2's C API; NumPy "
         "refuses to load them rather than risk a crash."});
    return f;
  }

  // The innermost traceback frame outside NumPy and IPython: its package name.
  [[nodiscard]] std::string importing_module() const {
    // Python's own frames ('File "/x/y.py", line 3') and IPython's ('File /x/y.py:3').
    static const std::regex frame(R"re(File (?:"([^"]{1,512})", line|([^\s:"]{1,512}):)[0-9]+)re");
    const std::string text = facts_.stderr_text + "\n" + facts_.traceback;
    std::string module;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), frame);
         it != std::sregex_iterator(); ++it) {
      const std::string file = (*it)[1].matched ? (*it)[1].str() : (*it)[2].str();
      if (file.find("/numpy/") != std::string::npos ||
          file.find("/IPython/") != std::string::npos ||
          file.find("ipykernel") != std::string::npos || file.rfind('/') == std::string::npos)
        continue;
      // ".../numexpr/__init__.py" -> "numexpr"; ".../site-packages/foo.py" -> "foo".
      const auto slash = file.rfind('/');
      std::string name = file.substr(slash + 1);
      if (name == "__init__.py" || file.find("/site-packages/") != std::string::npos ||
          file.find("/dist-packages/") != std::string::npos) {
        for (const char* site : {"/site-packages/", "/dist-packages/"})
          if (const auto at = file.rfind(site); at != std::string::npos) {
            const auto start = at + std::string_view(site).size();
            name = file.substr(start, file.find_first_of("/.", start) - start);
          }
        if (name == "__init__.py") {
          const auto parent = file.rfind('/', slash - 1);
          name = file.substr(parent + 1, slash - parent - 1);
        }
      } else {
        continue;  // the notebook's own file
      }
      module = name;
    }
    return module;
  }

  // PyTorch's DataLoader names the worker that died and the signal; what killed it is in
  // the kernel's /dev/shm or in the OOM killer's records.
  std::optional<CellFailureFinding> dataloader_worker() const {
    const SignatureHit* h = hit("pytorch.dataloader_worker_signal");
    if (h == nullptr) h = hit("pytorch.dataloader_worker_exited");
    if (h == nullptr) return std::nullopt;
    static const std::regex pids(R"(DataLoader worker \(pid(?:\(s\))? ([0-9, ]+)\))");
    static const std::regex signal(R"(killed by signal: ([A-Za-z ]+))");
    const std::string text = all_text();
    std::smatch m;
    std::vector<std::int64_t> workers;
    if (std::regex_search(text, m, pids)) {
      const std::string list = m[1].str();
      static const std::regex number("[0-9]+");
      for (auto it = std::sregex_iterator(list.begin(), list.end(), number);
           it != std::sregex_iterator(); ++it)
        workers.push_back(std::stoll((*it)[0].str()));
    }
    const std::string how = std::regex_search(text, m, signal) ? m[1].str() : "";
    const std::string who =
        "A DataLoader worker" +
        (workers.empty() ? std::string() : " (pid " + std::to_string(workers.front()) + ")");
    if (auto oom = oom_record(workers)) {
      CellFailureFinding f;
      f.cause = kWorkerOomKilled.id;
      f.evidence.push_back(quoted(*h));
      f.evidence.push_back("kernel log: " + *oom);
      const auto memory = memory_there_is();
      f.headline = who + " was killed by the OOM killer" +
                   (memory ? " (" + memory->words + ")" : "") + "; PyTorch failed the cell with " +
                   facts_.ename;
      f.remedies.push_back(dataloader_workers_hold_less(
          "The OOM killer picks the largest process of the cgroup or machine: here a worker, so "
          "the kernel lived and the cell failed."));
      if (memory)
        f.remedies.push_back(
            {"oom.more_memory",
             "Or give the kernel more memory (raise --memory-limit, or the "
             "container's or machine's limit).",
             "The worker and the kernel together reached " + bytes(memory->bytes) + "."});
      return f;
    }
    const auto shm = watch_.integer("/shared_memory/size_bytes");
    if (how.find("Bus error") != std::string::npos && shm && *shm > 0) {
      CellFailureFinding f;
      f.cause = kWorkerSharedMemoryFull.id;
      f.evidence.push_back(quoted(*h));
      std::string fact = "/dev/shm is a tmpfs of " + bytes(*shm);
      if (auto peak = watch_.integer("/shared_memory/peak_used_bytes"); peak && *peak > 0)
        fact += "; " + bytes(*peak) + " of it was in use at most";
      f.evidence.push_back(fact);
      f.headline = who + " died of a bus error: /dev/shm (" + bytes(*shm) +
                   ") had no room for the batches it shares with the kernel; PyTorch failed the "
                   "cell with " +
                   facts_.ename;
      f.remedies.push_back(larger_dev_shm(shm));
      f.remedies.push_back(torch_shares_less());
      return f;
    }
    return std::nullopt;  // a worker died, but nothing here says why
  }

  // The OOM killer's line naming one of `pids` ("Killed process 4242 (python3) ...").
  [[nodiscard]] std::optional<std::string> oom_record(const std::vector<std::int64_t>& pids) const {
    for (const auto& victim : oom_victims(watch_))
      if (std::find(pids.begin(), pids.end(), victim.pid) != pids.end())
        return watch_.array("/oom_evidence/kernel_log")[victim.log_line].get<std::string>().substr(
            0, 200);
    return std::nullopt;
  }

  // A framework refused an allocation: the cell failed, the kernel lives.
  std::optional<CellFailureFinding> framework_oom() const {
    const std::string text = all_text();
    std::smatch m;
    std::string framework, device;
    std::optional<std::int64_t> requested;
    std::string detail;
    const SignatureHit* h = nullptr;
    static const std::regex tf(
        R"(OOM when allocating tensor with shape\[([0-9, ]*)\] and type ([a-z0-9]+) on (\S+))");
    static const std::regex xla(
        R"(RESOURCE_EXHAUSTED: Out of memory (?:while trying to )?allocat(?:e|ing) ([0-9]+) bytes)");
    if ((h = hit("tensorflow.host_tensor_oom")) != nullptr ||
        (h = hit("tensorflow.gpu_tensor_oom")) != nullptr) {
      framework = "TensorFlow";
      if (std::regex_search(text, m, tf)) {
        std::int64_t elements = 1;
        const std::string shape = m[1].str();
        static const std::regex number("[0-9]+");
        for (auto it = std::sregex_iterator(shape.begin(), shape.end(), number);
             it != std::sregex_iterator(); ++it) {
          const auto n = std::stoll((*it)[0].str());
          elements = n > 0 && elements > INT64_MAX / n / 16 ? INT64_MAX / 16 : elements * n;
        }
        requested = elements * dtype_size(m[2].str());
        device = m[3].str();
        detail = " for a tensor of shape [" + shape + "] (" + m[2].str() + ")";
      }
    } else if ((h = hit("pytorch.cuda_out_of_memory")) != nullptr) {
      return pytorch_cuda_oom(*h);
    } else if ((h = hit("xla.host_out_of_memory")) != nullptr ||
               (h = hit("xla.resource_exhausted")) != nullptr) {
      framework = "JAX (XLA)";
      if (std::regex_search(text, m, xla)) requested = std::stoll(m[1].str());
      device = h->signature->id == "xla.host_out_of_memory" ? "device:CPU" : "the GPU";
    } else {
      return std::nullopt;
    }
    CellFailureFinding f;
    f.cause = kFrameworkOutOfMemory.id;
    f.gpu_memory = device_words(device) != "the CPU";
    f.evidence.push_back(quoted(*h));
    const auto there_is = device_words(device) == "the CPU" ? memory_there_is() : std::nullopt;
    f.headline = framework + " could not allocate " +
                 (requested ? bytes(*requested) : std::string("the memory it asked for")) + " on " +
                 device_words(device) + detail;
    if (there_is) {
      f.headline += "; " + there_is->words;
      f.evidence.push_back(there_is->words + " (what the watch read)");
    }
    const std::int64_t all = there_is ? there_is->bytes : 0;
    const std::int64_t asked = requested.value_or(0);
    const bool larger_than_all = all > 0 && asked > all;
    f.remedies.push_back(
        {"framework_oom.smaller_allocation",
         larger_than_all
             ? "Check the shape: " + bytes(asked) + " is more than all the memory there is (" +
                   bytes(all) +
                   "), so no setting makes it fit. Look for a dimension multiplied by mistake or "
                   "a whole dataset made one tensor; process it in batches (tf.data, a "
                   "generator) or in a smaller dtype."
             : "Make the allocation smaller: a smaller batch, a smaller dtype (float16/bfloat16), "
               "or the data in batches (tf.data, a generator) rather than one tensor.",
         "The framework refused the allocation and raised it to the cell; the kernel lives on, "
         "and what it held before is still held."});
    return f;
  }

  // PyTorch's caching allocator refused a device block. Its message carries the figures: what
  // was asked, the device's capacity and what was free (2.x: "GPU 0 has a total capacity of
  // 139.80 GiB of which 17.48 GiB is free. Process 967 has 40.60 GiB memory in use."; 1.x:
  // "(GPU 0; 10.91 GiB total capacity; ...; 569.81 MiB free; ...)").
  [[nodiscard]] CellFailureFinding pytorch_cuda_oom(const SignatureHit& h) const {
    // The message is one line; the traceback may repeat it, and each other process is named
    // once in it.
    const std::string all = all_text();
    const auto at = std::min(all.find("CUDA out of memory"), all.size());
    const std::string text = all.substr(at, all.find('\n', at) - at);
    const auto size = [](const std::string& number, const std::string& unit) {
      const auto parsed = util::parse_size(number + unit);
      return parsed ? std::optional<std::int64_t>(static_cast<std::int64_t>(*parsed))
                    : std::nullopt;
    };
    static const std::string kSize = R"(([0-9]+(?:\.[0-9]+)?) ([KMGT]?i?B))";
    static const std::regex asked("Tried to allocate " + kSize);
    static const std::regex capacity_2x("GPU ([0-9]+) has a total capacity of " + kSize +
                                        " of which " + kSize + " is free");
    static const std::regex capacity_1x(R"(\(GPU ([0-9]+); )" + kSize + " total capacity;[^)]*; " +
                                        kSize + " free;");
    static const std::regex other_process("Process [0-9]+ has " + kSize + " memory in use");
    std::smatch m;
    std::optional<std::int64_t> requested, total, free;
    std::string gpu = "the GPU";
    if (std::regex_search(text, m, asked)) requested = size(m[1].str(), m[2].str());
    if (std::regex_search(text, m, capacity_2x) || std::regex_search(text, m, capacity_1x)) {
      gpu = "GPU " + m[1].str();
      total = size(m[2].str(), m[3].str());
      free = size(m[4].str(), m[5].str());
    }
    std::int64_t others = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), other_process);
         it != std::sregex_iterator(); ++it)
      others += size((*it)[1].str(), (*it)[2].str()).value_or(0);

    CellFailureFinding f;
    f.cause = kFrameworkOutOfMemory.id;
    f.gpu_memory = true;
    f.evidence.push_back(quoted(h));
    f.headline = "PyTorch could not allocate " +
                 (requested ? bytes(*requested) : std::string("the memory it asked for")) + " on " +
                 gpu;
    if (total && free) {
      f.headline += "; " + bytes(*free) + " of its " + bytes(*total) + " was free";
      f.evidence.push_back("PyTorch's message: " + bytes(*free) + " of " + gpu + "'s " +
                           bytes(*total) + " was free when it asked");
    }
    if (others > 0) {
      f.headline += ", other processes held " + bytes(others);
      f.evidence.push_back("PyTorch's message: other processes held " + bytes(others) + " of " +
                           gpu);
    }
    f.remedies.push_back(
        {"framework_oom.smaller_allocation",
         others > 0 ? "Other processes held " + bytes(others) +
                          " of the GPU: run the notebook with the GPU to itself (another "
                          "CUDA_VISIBLE_DEVICES, or fewer notebooks at once), or make the "
                          "allocation smaller (a smaller batch, float16/bfloat16)."
                    : "Make the allocation smaller: a smaller batch or a smaller dtype "
                      "(float16/bfloat16); free what earlier cells hold (del the tensors, then "
                      "torch.cuda.empty_cache()).",
         "The framework refused the allocation and raised it to the cell; the kernel lives on, "
         "and what it held before is still held."});
    return f;
  }
};

}  // namespace

std::span<const CellFailureCause> cell_failure_causes() {
  static constexpr std::array<CellFailureCause, 4> kCauses{
      kNumpyAbiMismatch, kWorkerOomKilled, kWorkerSharedMemoryFull, kFrameworkOutOfMemory};
  return kCauses;
}

std::optional<CellFailureFinding> explain_cell_failure(const CellFailureFacts& facts,
                                                       const SignatureTable& table) {
  try {
    return CellExplainer(facts, table).run();
  } catch (const std::exception&) {
    return std::nullopt;  // a fact of an unexpected shape: the cell's own error stands
  }
}

}  // namespace kwd::diagnosis
