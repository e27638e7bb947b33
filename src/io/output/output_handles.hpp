// The HDF5 objects an OutputFile holds, shared by the sources that write, journal and read
// them back (output_file.cpp, output_journal.cpp, output_spans.cpp).
#pragma once

#include "attnbatch/io/h5/dataset.hpp"
#include "attnbatch/io/h5/file.hpp"
#include "attnbatch/io/output/output_file.hpp"

#include <optional>

namespace attnbatch::io {

struct OutputFile::Handles {
    File file;
    std::optional<Dataset> output, attention, lse, lengths, offsets;
    std::optional<Dataset> journal_progress;
};

}  // namespace attnbatch::io
