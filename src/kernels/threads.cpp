#include "attnbatch/kernels/threads.hpp"

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

double thread_cpu_seconds() {
    timespec t{};
    if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) != 0) return 0.0;
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double team_cpu_seconds(int threads) {
    double seconds = 0.0;
#if defined(_OPENMP)
#pragma omp parallel num_threads(resolved_threads(threads)) reduction(+ : seconds)
#else
    (void)threads;
#endif
    seconds += thread_cpu_seconds();
    return seconds;
}

}  // namespace attnbatch::kernels
