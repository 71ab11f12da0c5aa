#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kwd/diagnosis/findings.hpp"
#include "kwd/diagnosis/signature_table.hpp"

namespace kwd::diagnosis {

// What a front end knows of a cell that failed while its kernel lived on.
struct CellFailureFacts {
  std::string ename;
  std::string evalue;
  std::string traceback;    // the error's traceback, one line each, colours removed
  std::string stderr_text;  // what the cell wrote on stderr (ipykernel forwards fd 2 too)
  // The live kernel's report sections as its watch's probes have them now (oom_evidence,
  // shared_memory, fingerprint, system_memory, cgroup): Watch::live_facts().
  nlohmann::json watch = nlohmann::json::object();
};

// A cause a failed cell can be given while its kernel lived on (smoke's `cause`), defined
// once here as the crash causes are in causes.hpp; docs/causes.md is checked against this
// table.
struct CellFailureCause {
  std::string_view id;    // stable: JUnit files and smoke's JSON carry it
  std::string_view name;  // plain words for people
};
inline constexpr CellFailureCause kNumpyAbiMismatch{
    "numpy_abi_mismatch", "a module built for NumPy 1.x imported under NumPy 2"};
inline constexpr CellFailureCause kWorkerOomKilled{
    "worker_oom_killed", "a DataLoader worker was killed by the OOM killer"};
inline constexpr CellFailureCause kWorkerSharedMemoryFull{
    "shared_memory_full", "a DataLoader worker died of a full /dev/shm"};
inline constexpr CellFailureCause kFrameworkOutOfMemory{"framework_out_of_memory",
                                                        "a framework could not allocate memory"};
// All of them: the order in which explain_cell_failure tries them.
std::span<const CellFailureCause> cell_failure_causes();

// Why the cell failed, when the facts show it.
struct CellFailureFinding {
  // the id of one of cell_failure_causes()
  std::string cause;
  std::string headline;
  std::vector<std::string> evidence;
  std::vector<Remedy> remedies;
  bool gpu_memory = false;  // the memory that ran out was a GPU's
};

// A failed cell whose error a framework raised for a reason the facts confirm: memory it
// could not get, a DataLoader worker that died under it (of a full /dev/shm, or killed by the
// OOM killer: the kernel log names the worker), a module built for another NumPy. Like
// diagnose(), a pure function of the facts; an error it does not recognise is left as the
// cell's own (nullopt), never guessed at.
std::optional<CellFailureFinding> explain_cell_failure(const CellFailureFacts& facts,
                                                       const SignatureTable& table);
inline std::optional<CellFailureFinding> explain_cell_failure(const CellFailureFacts& facts) {
  return explain_cell_failure(facts, SignatureTable::active());
}

}  // namespace kwd::diagnosis
