#include "attnbatch/distributed/cpu_clocks.hpp"

#include <sys/resource.h>
#include <sys/time.h>

#include <algorithm>

#include "attnbatch/kernels/threads.hpp"

namespace attnbatch::distributed {

namespace {

double thread_system_seconds() {
#if defined(RUSAGE_THREAD)
    rusage usage{};
    if (::getrusage(RUSAGE_THREAD, &usage) == 0) {
        return static_cast<double>(usage.ru_stime.tv_sec) + 1e-6 * static_cast<double>(usage.ru_stime.tv_usec);
    }
#endif
    return 0.0;
}

}  // namespace

CpuSeconds CpuSeconds::since(const CpuSeconds& start) const noexcept {
    const double spent = std::max(0.0, total - start.total);
    return {spent, std::clamp(system - start.system, 0.0, spent)};
}

CpuSeconds thread_cpu_times() { return {kernels::thread_cpu_seconds(), thread_system_seconds()}; }

// Both clocks of each thread in one region, as kernels::team_cpu_seconds reads the total.
CpuSeconds team_cpu_times(int threads) {
    double total = 0.0, system = 0.0;
#if defined(_OPENMP)
#pragma omp parallel num_threads(kernels::resolved_threads(threads)) reduction(+ : total, system)
#else
    (void)threads;
#endif
    {
        total += kernels::thread_cpu_seconds();
        system += thread_system_seconds();
    }
    return {total, system};
}

}  // namespace attnbatch::distributed
