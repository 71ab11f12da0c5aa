// Failed cells explained from the facts: the errors and stderr lines here are the ones real
// frameworks printed in tests/integration/test_frameworks.py (tensorflow-cpu 2.21.0, jax
// 0.10.2, Debian's torch 1.13, NumPy 2.4.6 with numexpr 2.8.4 built for NumPy 1.x).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kwd/diagnosis/cell_failure.hpp"

using kwd::diagnosis::CellFailureFacts;
using kwd::diagnosis::explain_cell_failure;
using nlohmann::json;

namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

bool has_remedy(const kwd::diagnosis::CellFailureFinding& f, const std::string& id) {
  for (const auto& r : f.remedies)
    if (r.id == id) return true;
  return false;
}

// torch 1.13's DataLoader, a worker dead of a bus error: the chained exceptions of its
// traceback (IPython's format), and what the worker printed on its way down.
CellFailureFacts dataloader_bus_error() {
  CellFailureFacts facts;
  facts.ename = "RuntimeError";
  facts.evalue = "DataLoader worker (pid(s) 28245) exited unexpectedly";
  facts.traceback =
      "RuntimeError                              Traceback (most recent call last)\n"
      "File /usr/lib/python3/dist-packages/torch/utils/data/_utils/signal_handling.py:66, in "
      "handler(signum, frame)\n"
      "RuntimeError: DataLoader worker (pid 28245) is killed by signal: Bus error. It is "
      "possible that dataloader's workers are out of shared memory. Please try to raise your "
      "shared memory limit.\n"
      "RuntimeError: DataLoader worker (pid(s) 28245) exited unexpectedly\n";
  facts.stderr_text =
      "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
      "shared memory (shm).\n";
  return facts;
}

}  // namespace

TEST_CASE("TensorFlow's CPU allocation larger than the machine", "[cell_failure]") {
  CellFailureFacts facts;
  facts.ename = "ResourceExhaustedError";
  facts.evalue =
      "{{function_node __wrapped__Fill_device_/job:localhost/replica:0/task:0/device:CPU:0}} OOM "
      "when allocating tensor with shape[1099511627776] and type float on "
      "/job:localhost/replica:0/task:0/device:CPU:0 by allocator mklcpu [Op:Fill] name: ";
  facts.stderr_text =
      "W0000 00:00:1795816042.745382    9186 bfc_allocator.cc:502] Allocator (mklcpu) ran out "
      "of memory trying to allocate 4.00TiB (rounded to 4398046511104)requested by op Fill\n";
  facts.watch = {{"system_memory", {{"mem_total", 24 * 1024 * kMiB}}}};
  const auto f = explain_cell_failure(facts);
  REQUIRE(f);
  CHECK(f->cause == "framework_out_of_memory");
  CHECK_THAT(f->headline, Catch::StartsWith("TensorFlow could not allocate 4.0 TiB on the CPU"));
  CHECK_THAT(f->headline, Catch::Contains("shape [1099511627776] (float)"));
  CHECK_THAT(f->headline, Catch::Contains("the machine has 24.0 GiB"));
  REQUIRE(has_remedy(*f, "framework_oom.smaller_allocation"));
  CHECK_THAT(f->remedies.front().text, Catch::Contains("more than all the memory there is"));
}

TEST_CASE("JAX's CPU allocation larger than the machine", "[cell_failure]") {
  CellFailureFacts facts;
  facts.ename = "JaxRuntimeError";
  facts.evalue = "RESOURCE_EXHAUSTED: Out of memory allocating 4398046511104 bytes.";
  facts.watch = {{"cgroup", {{"limit", 600 * kMiB}}}};
  const auto f = explain_cell_failure(facts);
  REQUIRE(f);
  CHECK(f->cause == "framework_out_of_memory");
  CHECK_THAT(f->headline, Catch::StartsWith("JAX (XLA) could not allocate 4.0 TiB on the CPU"));
  CHECK_THAT(f->headline, Catch::Contains("the kernel's cgroup allows 600.0 MiB"));
}

TEST_CASE("PyTorch's CUDA out of memory, with the device's figures", "[cell_failure]") {
  CellFailureFacts facts;
  facts.ename = "OutOfMemoryError";
  SECTION("PyTorch 2.x, as an H200 beside three other notebooks said it") {
    facts.evalue =
        "CUDA out of memory. Tried to allocate 40.00 GiB. GPU 0 has a total capacity of 139.80 "
        "GiB of which 17.48 GiB is free. Process 967 has 40.60 GiB memory in use. Process 966 "
        "has 40.60 GiB memory in use. Process 968 has 40.60 GiB memory in use. Including "
        "non-PyTorch memory, this process has 518.00 MiB memory in use. Of the allocated memory "
        "0 bytes is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated.";
    // IPython's traceback repeats the message: its processes are counted once.
    facts.traceback = "OutOfMemoryError: " + facts.evalue + "\n";
    const auto f = explain_cell_failure(facts);
    REQUIRE(f);
    CHECK(f->cause == "framework_out_of_memory");
    CHECK(f->gpu_memory);
    CHECK(f->headline ==
          "PyTorch could not allocate 40.0 GiB on GPU 0; 17.5 GiB of its 139.8 GiB was free, "
          "other processes held 121.8 GiB");
    REQUIRE(has_remedy(*f, "framework_oom.smaller_allocation"));
    CHECK_THAT(f->remedies.front().text, Catch::StartsWith("Other processes held 121.8 GiB"));
  }
  SECTION("PyTorch 1.x's form") {
    facts.ename = "RuntimeError";
    facts.evalue =
        "CUDA out of memory. Tried to allocate 1006.00 MiB (GPU 0; 10.91 GiB total capacity; "
        "9.18 GiB already allocated; 569.81 MiB free; 9.49 GiB reserved in total by PyTorch)";
    const auto f = explain_cell_failure(facts);
    REQUIRE(f);
    CHECK(f->gpu_memory);
    CHECK(f->headline ==
          "PyTorch could not allocate 1006.0 MiB on GPU 0; 569.8 MiB of its 10.9 GiB was free");
    CHECK_THAT(f->remedies.front().text, Catch::StartsWith("Make the allocation smaller"));
  }
}

TEST_CASE("TensorFlow's and JAX's CPU allocations are not the GPU's", "[cell_failure]") {
  CellFailureFacts facts;
  facts.evalue = "RESOURCE_EXHAUSTED: Out of memory allocating 4398046511104 bytes.";
  const auto f = explain_cell_failure(facts);
  REQUIRE(f);
  CHECK_FALSE(f->gpu_memory);
}

TEST_CASE("a DataLoader worker's bus error is a full /dev/shm only when /dev/shm says so",
          "[cell_failure]") {
  auto facts = dataloader_bus_error();
  SECTION("with the kernel's /dev/shm read: shared memory full") {
    facts.watch = {{"shared_memory",
                    {{"path", "/dev/shm"}, {"size_bytes", 64 * kMiB}, {"peak_used_bytes", 0}}}};
    const auto f = explain_cell_failure(facts);
    REQUIRE(f);
    CHECK(f->cause == "shared_memory_full");
    CHECK_THAT(f->headline, Catch::Contains("A DataLoader worker (pid 28245) died of a bus error"));
    CHECK_THAT(f->headline, Catch::Contains("/dev/shm (64.0 MiB)"));
    CHECK(has_remedy(*f, "shm.larger_dev_shm"));
    CHECK(has_remedy(*f, "torch.file_system_sharing"));
  }
  SECTION("without: no cause is guessed") {
    CHECK_FALSE(explain_cell_failure(facts));
  }
}

TEST_CASE("a DataLoader worker the OOM killer named", "[cell_failure]") {
  CellFailureFacts facts;
  facts.ename = "RuntimeError";
  facts.evalue = "DataLoader worker (pid(s) 28473) exited unexpectedly";
  facts.watch = {
      {"cgroup", {{"limit", 700 * kMiB}}},
      {"oom_evidence",
       {{"kernel_log",
         {"Memory cgroup out of memory: Killed process 28473 (python3) total-vm:2291456kB, "
          "anon-rss:561152kB, file-rss:98304kB, shmem-rss:0kB, UID:0 pgtables:1900kB "
          "oom_score_adj:0"}}}}};
  const auto f = explain_cell_failure(facts);
  REQUIRE(f);
  CHECK(f->cause == "worker_oom_killed");
  CHECK_THAT(f->headline, Catch::StartsWith("A DataLoader worker (pid 28473) was killed by the OOM "
                                            "killer (the kernel's cgroup allows 700.0 MiB)"));
  CHECK(has_remedy(*f, "torch.dataloader_worker_memory"));
  // Another pid's kill is not this worker's.
  facts.watch["oom_evidence"]["kernel_log"][0] =
      "Memory cgroup out of memory: Killed process 2847 (python3) total-vm:2291456kB";
  CHECK_FALSE(explain_cell_failure(facts));
}

TEST_CASE("a module built for NumPy 1.x under NumPy 2", "[cell_failure]") {
  CellFailureFacts facts;
  facts.ename = "ImportError";
  facts.evalue = "numpy.core.multiarray failed to import";
  facts.stderr_text =
      "\nA module that was compiled using NumPy 1.x cannot be run in\n"
      "NumPy 2.4.6 as it may crash. To support both 1.x and 2.x\n"
      "versions of NumPy, modules must be compiled with NumPy 2.0.\n";
  facts.traceback =
      "ImportError                               Traceback (most recent call last)\n"
      "Cell In[2], line 1\n----> 1 import numexpr\n\n"
      "File /venv/numpy1/site-packages/numexpr/__init__.py:24\n"
      "---> 24 from numexpr.interpreter import MAX_THREADS, use_vml, __BLOCK_SIZE1__\n"
      "ImportError: numpy.core.multiarray failed to import\n";
  facts.watch = {{"fingerprint",
                  {{"frameworks", {{{"name", "numpy"}, {"version", "2.4.6"}}}},
                   {"other_packages", {{{"name", "numexpr"}, {"version", "2.8.4"}}}}}}};
  const auto f = explain_cell_failure(facts);
  REQUIRE(f);
  CHECK(f->cause == "numpy_abi_mismatch");
  CHECK(f->headline ==
        "numexpr 2.8.4 was built for NumPy 1.x and cannot run under NumPy 2.4.6: the import "
        "failed with ImportError");
  REQUIRE(has_remedy(*f, "numpy.rebuild_or_pin"));
  CHECK_THAT(f->remedies.front().text, Catch::Contains("pip install -U numexpr"));
}

TEST_CASE("an error no rule knows keeps its own words", "[cell_failure]") {
  CellFailureFacts facts;
  facts.ename = "ZeroDivisionError";
  facts.evalue = "division by zero";
  facts.watch = {{"shared_memory", {{"size_bytes", 64 * kMiB}}}, {"garbage", {1, 2, 3}}};
  CHECK_FALSE(explain_cell_failure(facts));
  // Facts of the wrong shape are no facts, and never an exception.
  facts = dataloader_bus_error();
  facts.watch = {{"shared_memory", "not an object"}, {"oom_evidence", {{"kernel_log", 7}}}};
  CHECK_FALSE(explain_cell_failure(facts));
}
