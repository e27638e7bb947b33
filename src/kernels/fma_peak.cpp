// Single-precision FMA peak of one core. Twelve independent accumulator chains in inline
// assembly: enough to cover the FMA latency times the number of FMA pipes on current x86
// cores, and opaque to the compiler, which could otherwise merge chains and report a peak
// that is double the truth.
#include <chrono>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "attnbatch/kernels/fma_peak.hpp"

namespace attnbatch::kernels {

namespace {

#if defined(__x86_64__)
#define ATTNBATCH_FMA12(reg)                                                                     \
    "vfmadd231ps %%" reg "15, %%" reg "14, %%" reg "0\n\t"                                       \
    "vfmadd231ps %%" reg "15, %%" reg "14, %%" reg "1\n\t"                                       \
    "vfmadd231ps %%" reg "15, %%" reg "14, %%" reg "2\n\t"                                       \
    "vfmadd231ps %%" reg "15, %%" reg "14, %%" reg "3\n\t"                                       \
    "vfmadd231ps %%" reg "15, %%" reg "14, %%" reg "4\n\t"                                       \
    "vfmadd231ps %%" reg "15, %%" reg "14, %%" reg "5\n\t"                                       \
    "vfmadd231ps %%" reg "15, %%" reg "14, %%" reg "6\n\t"                                       \
    "vfmadd231ps %%" reg "15, %%" reg "14, %%" reg "7\n\t"                                       \
    "vfmadd231ps %%" reg "15, %%" reg "14, %%" reg "8\n\t"                                       \
    "vfmadd231ps %%" reg "15, %%" reg "14, %%" reg "9\n\t"                                       \
    "vfmadd231ps %%" reg "15, %%" reg "14, %%" reg "10\n\t"                                      \
    "vfmadd231ps %%" reg "15, %%" reg "14, %%" reg "11\n\t"

// The zeroing keeps the accumulators finite; the values are never read.
void fma_burst(int bits, long iterations) {
    if (bits == 512) {
        asm volatile("vxorps %%xmm14, %%xmm14, %%xmm14\n\tvxorps %%xmm15, %%xmm15, %%xmm15" ::: "xmm14", "xmm15");
        for (long i = 0; i < iterations; ++i) {
            asm volatile(ATTNBATCH_FMA12("zmm")::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
                         "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm14", "xmm15");
        }
        asm volatile("vzeroupper" ::: "memory");
    } else if (bits == 256) {
        asm volatile("vxorps %%xmm14, %%xmm14, %%xmm14\n\tvxorps %%xmm15, %%xmm15, %%xmm15" ::: "xmm14", "xmm15");
        for (long i = 0; i < iterations; ++i) {
            asm volatile(ATTNBATCH_FMA12("ymm")::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
                         "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm14", "xmm15");
        }
        asm volatile("vzeroupper" ::: "memory");
    } else {
        asm volatile("vxorps %%xmm14, %%xmm14, %%xmm14\n\tvxorps %%xmm15, %%xmm15, %%xmm15" ::: "xmm14", "xmm15");
        for (long i = 0; i < iterations; ++i) {
            asm volatile(ATTNBATCH_FMA12("xmm")::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
                         "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm14", "xmm15");
        }
    }
}

int widest_fma_bits() {
    if (__builtin_cpu_supports("avx512f")) return 512;
    if (__builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2")) return 256;
    if (__builtin_cpu_supports("fma")) return 128;
    return 0;
}
#else
// Elsewhere a plain loop of independent multiply-adds; an estimate, not a bound.
void fma_burst(int, long iterations) {
    volatile float sink = 0.0f;
    float acc[12] = {};
    for (long i = 0; i < iterations; ++i)
        for (int c = 0; c < 12; ++c) acc[c] = acc[c] * 0.999f + 0.001f;
    for (float a : acc) sink = sink + a;
}
int widest_fma_bits() { return 32; }
#endif

}  // namespace

FmaPeak measure_fma_peak(double seconds) {
    using clock = std::chrono::steady_clock;
    const int bits = widest_fma_bits();
    FmaPeak peak;
    peak.vector_bits = bits;
    if (bits == 0) return peak;
    const double flops_per_iteration = 12.0 * 2.0 * (bits / 32);
    long iterations = 1 << 16;
    const auto start = clock::now();
    while (true) {  // bursts of about 10 ms; the best burst is the least disturbed one
        const auto t0 = clock::now();
        fma_burst(bits, iterations);
        const double elapsed = std::chrono::duration<double>(clock::now() - t0).count();
        if (elapsed < 0.005) {
            iterations *= 2;
            continue;
        }
        const double gflops = flops_per_iteration * static_cast<double>(iterations) / elapsed * 1e-9;
        if (gflops > peak.gflops_per_core) peak.gflops_per_core = gflops;
        if (std::chrono::duration<double>(clock::now() - start).count() > seconds) break;
    }
    return peak;
}

FmaPeak measure_fma_peak_together(int threads, double seconds) {
    if (threads <= 1) return measure_fma_peak(seconds);
    std::vector<FmaPeak> each(static_cast<std::size_t>(threads));
#if defined(_OPENMP)
#pragma omp parallel num_threads(threads)
    each[static_cast<std::size_t>(omp_get_thread_num())] = measure_fma_peak(seconds);
#else
    for (FmaPeak& p : each) p = measure_fma_peak(seconds);
#endif
    FmaPeak mean = each.front();
    mean.gflops_per_core = 0.0;
    for (const FmaPeak& p : each) mean.gflops_per_core += p.gflops_per_core / threads;
    return mean;
}

}  // namespace attnbatch::kernels
