// A new file written as PATH.partial and renamed to PATH only once whole (publish_output, the
// same durable rename a run's output gets), so a file under the name the user asked for is
// never a truncated one. For the files that are written in one go (`generate`'s input and
// weights, `weights`' maps); a run's output, which can be resumed, is OutputFile's.
#pragma once

#include <string>

namespace attnbatch::io {

class File;  // h5/file.hpp

// The checks before writing `path`, which `option` names in the messages: Error exit 2 when
// it is a directory, exists (without force), a .partial is left over (without force; with
// force it is removed) or `bytes` exceed 2^62; exit 4 when its directory does not exist, the
// left-over .partial cannot be removed, or its file system has less than `bytes` free.
void prepare_new_file(const std::string& option, const std::string& path, bool force, double bytes);

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
