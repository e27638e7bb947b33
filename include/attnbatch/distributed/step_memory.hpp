// Storage for a step's arrays (its outputs, and `bench`'s inputs and outputs, so that bench
// feeds the kernel memory of the kind a run does).
#pragma once

#include <cstddef>

namespace attnbatch::distributed {

// At least `bytes`, uninitialised, released with std::free. From 2 MiB on it is 2 MiB-aligned and
// asks for transparent huge pages before its first touch; from 4 KiB on it starts a page, where
// the output's direct writes need whole chunks to start; smaller, a cache line. Throws
// std::bad_alloc.
void* allocate_step_memory(std::size_t bytes);

}  // namespace attnbatch::distributed
