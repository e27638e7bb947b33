// attnbatch: batch scaled dot-product self-attention over HDF5 datasets.
#include <hdf5.h>

#include <csignal>

#include "commands.hpp"

int main(int argc, char** argv) {
    // Past a file-size limit (ulimit -f, RLIMIT_FSIZE) the kernel sends SIGXFSZ, whose default
    // action kills the process without a word. Ignored, write() fails with EFBIG instead, and
    // the failure is reported like any other I/O error (exit 4, naming the file).
    std::signal(SIGXFSZ, SIG_IGN);
    // HDF5 1.10 cannot survive a failed flush: once H5Fflush or H5Fclose of a file open for
    // writing has failed (a full disk, EFBIG), the file's id is left pointing at freed memory
    // and the library's own shutdown (at exit, or from MPI_Finalize when HDF5 was first used
    // after MPI_Init) dereferences it and crashes with SIGSEGV before the error is reported.
    // Every file is closed explicitly (checked) or by its handle's destructor before we
    // return, so the shutdown has nothing left to do: initialize the library here, before
    // MPI_Init, without registering it at exit, and it never runs.
    H5dont_atexit();
    H5open();
    return attnbatch::cli::run_cli(argc, argv);
}
