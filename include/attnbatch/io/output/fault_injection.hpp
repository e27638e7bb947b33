// Fault injection for the resume and failure tests, compiled into every build:
//
//   ATTNBATCH_FAULT=RANK:SITE[:K]:ACTION
//
// RANK is an MPI rank or `*`; SITE is where the fault strikes, the K-th time it is reached
// (K defaults to 1), except `after_unit:K`, which strikes once K units are done:
//   after_unit      a round boundary, once the run has computed K units (all ranks' count)
//   before_flush    before a checkpoint's flush of written data
//   after_flush     after that flush, before the journal records the units as done
//   before_rename   before OUTPUT.partial becomes OUTPUT
//   validation, lengths, resume_verification, planning, value_scan, output_creation, rounds,
//   final_flush, publish
//                   on entering that phase of a run (distributed/stop_request.hpp)
// ACTION is `throw` (an exception, as from a bug), `exit` (_exit(1), as from a crash that
// still returns a code), `kill` (SIGKILL to itself) or `signal` (SIGTERM to itself: the clean,
// resumable stop).
// Unset, every fault point costs one load of a flag.
#pragma once

#include <cstdint>
#include <string>

namespace attnbatch::io {

// Reads ATTNBATCH_FAULT for this process's `rank`; a malformed value is a usage error
// (Error, exit 2) so that a test can never believe a fault was armed when it was not.
void arm_fault_from_environment(int rank);

// Strikes if the armed fault's site is `site` and this is its moment. `count` is the value
// compared with K for after_unit; other sites count their own visits.
void fault_point(const char* site, std::int64_t count = -1);

}  // namespace attnbatch::io
