#include "attnbatch/kernels/threads.hpp"

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

}  // namespace attnbatch::kernels
