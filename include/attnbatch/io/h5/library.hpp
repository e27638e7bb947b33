// Starting the HDF5 library once per process, before MPI.
#pragma once

namespace attnbatch::io {

// Call first thing in main(), before MPI_Init. HDF5 1.10 cannot survive a failed flush: once
// H5Fflush or H5Fclose of a file open for writing has failed (a full disk, EFBIG), the file's
// id is left pointing at freed memory, and the library's own shutdown (at exit, or from
// MPI_Finalize when HDF5 was first used after MPI_Init) dereferences it and crashes with
// SIGSEGV before the error is reported. Every file is closed explicitly (checked) or by its
// handle's destructor before main returns, so the shutdown has nothing left to do: this
// initializes the library without registering it at exit, and it never runs. It also stops
// HDF5 printing its error stack to stderr: H5Error carries it instead.
void start_hdf5();

}  // namespace attnbatch::io
