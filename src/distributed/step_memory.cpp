#include "attnbatch/distributed/step_memory.hpp"

#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace attnbatch::distributed {

// Huge pages because each 4 KiB page costs twice here: its first touch traps to the hypervisor on
// a virtual machine, and the kernel's prefetches into pages without a cached translation are
// dropped (kernels/prefetch.hpp). A 2 MiB-aligned block gets whole huge pages, where an
// unaligned one would leave its ends on small ones.
void* allocate_step_memory(std::size_t bytes) {
    const std::size_t huge = std::size_t{2} << 20, page = 4096;
    const std::size_t align = bytes >= huge ? huge : (bytes >= page ? page : 64);
    const std::size_t rounded = (bytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded > 0 ? rounded : align);
    if (!p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (align == huge) ::madvise(p, rounded, MADV_HUGEPAGE);  // only a hint: small pages work too
#endif
    return p;
}

}  // namespace attnbatch::distributed
