#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
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

// Why the cell failed, when the facts show it.
struct CellFailureFinding {
  // framework_out_of_memory | shared_memory_full | worker_oom_killed | numpy_abi_mismatch
  std::string cause;
  std::string headline;
  std::vector<std::string> evidence;
  std::vector<Remedy> remedies;
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
