// Input buffers sized for a read that overwrites every element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace attnbatch::io::detail {

// `values` holding `count` floats. When it must grow to several MiB (a step's input: 8 MiB per
// buffer in the N=2048 L=256 case), the new storage asks for transparent huge pages before it
// is first touched: on a virtual machine each 4 KiB page's first touch is a trap to the
// hypervisor, about 10 us here, 40 ms of that case's 0.3 s of rounds per rank; with 2 MiB pages
// there are 512 times fewer. The old contents are not kept (the read replaces them).
inline void size_for_read(std::vector<float>& values, std::size_t count) {
    constexpr std::size_t kHugeBytes = std::size_t{4} << 20;
    if (count > values.capacity() && count * sizeof(float) >= kHugeBytes) {
        std::vector<float>().swap(values);
        values.reserve(count);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        constexpr std::uintptr_t kPage = 4096;
        const auto begin = reinterpret_cast<std::uintptr_t>(values.data());
        const std::uintptr_t first = (begin + kPage - 1) & ~(kPage - 1);
        const std::uintptr_t last = (begin + count * sizeof(float)) & ~(kPage - 1);
        // Only a hint: memory without huge pages is as correct, just slower to touch.
        if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#endif
    }
    values.resize(count);
}

}  // namespace attnbatch::io::detail
