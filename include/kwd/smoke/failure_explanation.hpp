#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kwd/smoke/results.hpp"
#include "kwd/watch/watch.hpp"

namespace kwd::smoke {

// A cell failed while its kernel lives: asks the diagnosis why, from the error, what the
// cell wrote on stderr and what the kernel's watch knows now (OOM records of its processes,
// its /dev/shm, its fingerprint), and fills the cell's cause, headline, evidence and
// remedies when the facts say. An error nothing explains keeps only its own words. The
// traceback is the one already in `cell.details` (colours removed), which this extends.
void explain_failure(CellResult& cell, const nlohmann::json& error, const std::string& stderr_text,
                     watch::Watch& watch);

}  // namespace kwd::smoke
