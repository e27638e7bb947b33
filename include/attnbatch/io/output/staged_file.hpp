// A new file written as PATH.partial and renamed to PATH only once whole (publish_output, the
// same durable rename a run's output gets), so a file under the name the user asked for is
// never a truncated one. For the files that are written in one go (`generate`'s input and
// weights, `weights`' maps); a run's output, which can be resumed, is OutputFile's.
#pragma once

#include "attnbatch/io/output/output_paths.hpp"

#include <string>

namespace attnbatch::io {

class File;  // h5/file.hpp

// Owns PATH.partial from create() on: removed when the StagedFile goes away unpublished.
class StagedFile {
public:
    explicit StagedFile(std::string path) : path_(std::move(path)) {}
    StagedFile(const StagedFile&) = delete;
    StagedFile& operator=(const StagedFile&) = delete;
    ~StagedFile();

    // Creates PATH.partial (H5Error when it exists or cannot be created).
    File create() const;
    // Renames the closed PATH.partial to PATH, replacing an existing PATH only with force.
    void publish(bool force);

private:
    std::string path_;
    bool published_ = false;
};

}  // namespace attnbatch::io
