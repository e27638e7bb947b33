// The .partial a file written in one go is, until it is whole.
#include "attnbatch/io/output/staged_file.hpp"

#include "attnbatch/io/h5/file.hpp"
#include "attnbatch/io/output/output_paths.hpp"

#include <unistd.h>

namespace attnbatch::io {

StagedFile::~StagedFile() {
    if (!published_) ::unlink(partial_path_for(path_).c_str());
}

File StagedFile::create() const { return File::create(partial_path_for(path_)); }

void StagedFile::publish(bool force) {
    publish_output(path_, force);
    published_ = true;
}

}  // namespace attnbatch::io
