#include "attnbatch/kernels/threads.hpp"

#include <sys/resource.h>
#include <sys/time.h>

#include <algorithm>
#include <ctime>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace attnbatch::kernels {

int resolved_threads(int threads) {
#if defined(_OPENMP)
    return threads > 0 ? threads : omp_get_max_threads();
#else
    (void)threads;
    return 1;
#endif
}

CpuSeconds CpuSeconds::since(const CpuSeconds& start) const noexcept {
    const double spent = std::max(0.0, total - start.total);
    return {spent, std::clamp(system - start.system, 0.0, spent)};
}

CpuSeconds thread_cpu_times() noexcept {
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

CpuSeconds team_cpu_times(int threads) noexcept {
    double total = 0, system = 0;
#if defined(_OPENMP)
#pragma omp parallel num_threads(resolved_threads(threads)) reduction(+ : total, system)
#else
    (void)threads;
#endif
    {
        const CpuSeconds mine = thread_cpu_times();
        total += mine.total;
        system += mine.system;
    }
    return {total, system};
}

}  // namespace attnbatch::kernels
