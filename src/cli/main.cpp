// attnbatch: batch scaled dot-product self-attention over HDF5 datasets.
#include <csignal>

#include "attnbatch/io/library.hpp"
#include "commands.hpp"

int main(int argc, char** argv) {
    // Past a file-size limit (ulimit -f, RLIMIT_FSIZE) the kernel sends SIGXFSZ, whose default
    // action kills the process without a word. Ignored, write() fails with EFBIG instead, and
    // the failure is reported like any other I/O error (exit 4, naming the file).
    std::signal(SIGXFSZ, SIG_IGN);
    // Before MPI starts (library.hpp says why).
    attnbatch::io::start_hdf5();
    return attnbatch::cli::run_cli(argc, argv);
}
