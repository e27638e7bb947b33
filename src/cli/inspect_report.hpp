// What `inspect` found about one file, and its two renderings: text for people (the schema
// as a table, then one verdict line) and one JSON object for scripts (--json).
#pragma once

#include "attnbatch/io/h5/file_kind.hpp"
#include "attnbatch/io/h5/file_schema.hpp"
#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/output/output_check.hpp"
#include "attnbatch/io/models/weights_spec.hpp"
#include "command_line.hpp"

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace attnbatch::cli {

struct InspectReport {
    std::string path;
    std::optional<io::FileSchema> schema;  // absent when the file could not be read
    io::FileKind kind = io::FileKind::unknown;
    int code = exit_ok;
    std::string verdict;  // one line: "valid input: ...", "INCOMPLETE ...", or the error
    std::vector<std::string> notes;
    std::optional<io::InputSpec> input;      // a valid input
    std::optional<io::OutputCheck> output;    // any output that was checked
    std::optional<io::WeightsCheck> weights;  // any weights file that was checked
    bool in_progress = false;                // an output named *.partial
    // The verdict is the state of a well-formed file (valid, incomplete, in progress), which
    // the report shows; otherwise it is the error, said once, on stderr.
    bool verdict_is_state = false;
};

// The schema (when read), warnings, the problems when more than one, notes, the verdict.
void print_text(std::ostream& out, const InspectReport& report);
// One line: {"file", "kind", "valid", "exit_code", "message", "in_progress", "notes", "schema",
// "input", "output", "weights"}; absent parts are null.
void print_json(std::ostream& out, const InspectReport& report);

}  // namespace attnbatch::cli
