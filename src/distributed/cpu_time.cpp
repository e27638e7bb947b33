#include "attnbatch/distributed/cpu_time.hpp"

#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>

#include <algorithm>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace attnbatch::distributed {

CpuSeconds CpuSeconds::since(const CpuSeconds& start) const noexcept {
    const double spent = std::max(0.0, total - start.total);
    return {spent, std::clamp(system - start.system, 0.0, spent)};
}

CpuSeconds thread_cpu_seconds() noexcept {
    CpuSeconds now;
    timespec clock{};
    if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &clock) == 0) {
        now.total = static_cast<double>(clock.tv_sec) + 1e-9 * static_cast<double>(clock.tv_nsec);
    }
#if defined(RUSAGE_THREAD)
    rusage usage{};
    if (::getrusage(RUSAGE_THREAD, &usage) == 0) {
        now.system = static_cast<double>(usage.ru_stime.tv_sec) + 1e-6 * static_cast<double>(usage.ru_stime.tv_usec);
    }
#endif
    return now;
}

CpuSeconds team_cpu_seconds(int threads) noexcept {
    if (threads <= 1) return thread_cpu_seconds();
    double total = 0, system = 0;
#if defined(_OPENMP)
#pragma omp parallel num_threads(threads) reduction(+ : total, system)
#endif
    {
        const CpuSeconds mine = thread_cpu_seconds();
        total += mine.total;
        system += mine.system;
    }
    return {total, system};
}

}  // namespace attnbatch::distributed
