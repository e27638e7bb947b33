// Where an output may go, in one place. A run's output has three names on its way:
// OUTPUT.partial.new while it is created, OUTPUT.partial while it is written (what --resume
// continues) and OUTPUT once whole; the files written in one go (generate's input and weights,
// import-weights', the maps of `weights`) go from PATH.partial to PATH (staged_file.hpp).
// These are the checks before anything is written, the clean-up of what an interrupted run
// left, and the final, durable rename.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace attnbatch::io {

std::string partial_path_for(const std::string& output_path);  // OUTPUT + ".partial"
std::string staging_path_for(const std::string& output_path);  // OUTPUT.partial + ".new"

// The file a command writes, named by `option` (--output, --to), is neither a directory nor one
// of the files it reads, `inputs`, each {what names it, path} ({"--input", "in.h5"}), compared
// by device and inode so that another spelling or a link counts: files read are never
// overwritten, even with --force. Error exit 2 otherwise; paths that do not exist are fine.
void check_output_is_not_an_input(const std::string& output_path,
                                  const std::vector<std::pair<std::string, std::string>>& inputs,
                                  const std::string& option = "--output");

// The checks and clean-up before creating OUTPUT.partial: Error with exit 2 when
// OUTPUT exists (without force) or a .partial is left from an interrupted run (without force;
// with force it is removed), exit 4 when the directory does not exist or the stale file
// cannot be removed.
void prepare_output_path(const std::string& output_path, bool force);

// The checks of prepare_output_path() without its clean-up, changing nothing, plus that the
// directory is writable (exit 4): what a run asks before it writes anything (its preflight,
// and a dry run). `continuing`: OUTPUT.partial is the one --resume goes on with, so that it
// exists is no error.
void check_output_target(const std::string& output_path, bool force, bool continuing = false);

// The checks before writing a file in one go at `path`, which `option` names in the messages:
// Error exit 2 when it is a directory, exists (without force), a .partial is left over (without
// force; with force it is removed) or `bytes` exceed 2^62; exit 4 when its directory does not
// exist, the left-over .partial cannot be removed, or its file system has less than `bytes` free.
void prepare_new_file(const std::string& option, const std::string& path, bool force, double bytes);

// Removes OUTPUT.partial, closed, of a run that can never complete (its input holds a bad
// value); nothing when it does not exist. Error (exit 4) when it cannot be removed.
void discard_partial_output(const std::string& output_path);

// fsync OUTPUT.partial, rename it to OUTPUT (replacing an existing OUTPUT only with force),
// fsync the directory. Under MPI only one rank calls it, after close_complete(). Without
// `fsync` (run --fsync off) only the rename: OUTPUT is whole as long as the operating system
// lives, but a crash of the node before the kernel wrote its pages can lose it.
void publish_output(const std::string& output_path, bool force, bool fsync = true);

}  // namespace attnbatch::io
