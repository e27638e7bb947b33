// Projection GEMM benchmark: the project's kernels::project (own register-blocked micro-kernel,
// weights packed once) against OpenBLAS cblas_sgemm plus the bias, on the same inputs.
// Built and run by scripts/bench_projection.sh; see its --help. Not part of the CMake build.
//
//   bench_projection [--repeat N] [--quick] [--variant NAME] | --core-only
//
// Y = X W + b with X (tokens, in) row-major, W (in, out) row-major, b (out): as in
// src/distributed/step_computer.cpp, X is `seqs` whole sequences of `len` tokens (lengths all L), in spans of 96 rows.
// OpenBLAS side: Y is filled with b row by row (with the same thread count), then
// cblas_sgemm with beta = 1 adds X W; OpenBLAS would otherwise spend the same pass on
// zeroing C for beta = 0, so this is sgemm's own cost plus nothing hidden.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attnbatch/kernels/projection.hpp"

namespace k = attnbatch::kernels;

namespace {

struct Shape {
    const char* name;
    int seqs, len, in, out;
    long tokens() const { return static_cast<long>(seqs) * len; }
    double flops() const { return 2.0 * tokens() * in * out; }
};

struct Problem {
    Shape s;
    std::vector<float> x, w, b, packed;
    std::vector<unsigned char> workspace;
};

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// All rows in spans of 96, as the engine's step compute cuts them (step_computer.cpp).
void run_own(Problem& p, int threads, float* y) {
    constexpr int kSpanRows = 96;
    std::vector<k::ProjectionSpan> spans;
    for (long r0 = 0; r0 < p.s.tokens(); r0 += kSpanRows) {
        spans.push_back({p.x.data() + r0 * p.s.in, y + r0 * p.s.out, static_cast<std::int32_t>(std::min<long>(kSpanRows, p.s.tokens() - r0))});
    }
    k::ProjectionParams pp;
    pp.spans = spans.data();
    pp.span_count = spans.size();
    pp.x_row_stride = p.s.in;
    pp.y_row_stride = p.s.out;
    pp.in = p.s.in;
    pp.out = p.s.out;
    pp.packed_w = p.packed.data();
    pp.bias = p.b.data();
    k::project(pp, k::Isa::best, threads, p.workspace.data(), p.workspace.size());
}

void run_blas(Problem& p, int threads, float* y) {
    const long rows = p.s.tokens();
    const int out = p.s.out;
    const float* b = p.b.data();
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long r = 0; r < rows; ++r) std::memcpy(y + r * out, b, sizeof(float) * out);
    openblas_set_num_threads(threads);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), out, p.s.in, 1.0f, p.x.data(),
                p.s.in, p.w.data(), out, 1.0f, y, out);
}

using Runner = void (*)(Problem&, int, float*);

// Seconds per call: `calls` back-to-back calls timed together.
double time_calls(Runner f, Problem& p, int threads, float* y, int calls) {
    const double t0 = now();
    for (int i = 0; i < calls; ++i) f(p, threads, y);
    return (now() - t0) / calls;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void reference(const Problem& p, std::vector<double>& ref) {
    const long rows = p.s.tokens();
    const int in = p.s.in, out = p.s.out;
    ref.assign(static_cast<std::size_t>(rows) * out, 0.0);
    std::vector<double> wd(p.w.begin(), p.w.end());
    for (long r = 0; r < rows; ++r) {
        double* yr = ref.data() + r * out;
        for (int c = 0; c < out; ++c) yr[c] = p.b[c];
        for (int i = 0; i < in; ++i) {
            const double xi = p.x[r * in + i];
            const double* wr = wd.data() + static_cast<std::size_t>(i) * out;
            for (int c = 0; c < out; ++c) yr[c] += xi * wr[c];
        }
    }
}

double max_abs_diff(const std::vector<float>& a, const std::vector<double>& ref) {
    double m = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - ref[i]));
    return m;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
    int repeat = 11;
    bool quick = false;
    std::string variant = "?";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--repeat" && i + 1 < argc) {
            repeat = std::atoi(argv[++i]);
        } else if (a == "--quick") {
            quick = true;
        } else if (a == "--core-only") {
            std::printf("%s\n", openblas_get_corename());
            return 0;
        } else if (a == "--variant" && i + 1 < argc) {
            variant = argv[++i];
        } else {
            std::fprintf(stderr, "bench_projection: unknown argument '%s'\n", a.c_str());
            return 2;
        }
    }
    if (repeat < 1) repeat = 1;

    // 4096 tokens = 16 sequences of 256. Q, K, V and w_o are separate calls in the engine;
    // the fused QKV shapes show what one wider call would get.
    std::vector<Shape> shapes = {
        {"d64: QKV fused 64->192", 16, 256, 64, 192},
        {"d64: Q|K|V 64->64", 16, 256, 64, 64},
        {"d512: Q|K|V|w_o 512->512", 16, 256, 512, 512},
        {"d768: Q|K|V|w_o 768->768", 16, 256, 768, 768},
        {"d768: QKV fused 768->2304", 16, 256, 768, 2304},
        {"w_o H4*dv128->128", 16, 256, 512, 128},
    };
    if (quick) shapes = {shapes[0], shapes[2], shapes[3]};
    const double min_sample = quick ? 0.02 : 0.05;  // seconds per timed sample
    const int max_threads = std::min(2, omp_get_num_procs());

    const int par = openblas_get_parallel();
    std::printf("OpenBLAS %s | core %s | threading: %s (variant %s)\n", openblas_get_config(), openblas_get_corename(),
                par == 0 ? "sequential" : par == 1 ? "pthreads" : par == 2 ? "OpenMP" : "?", variant.c_str());
    std::printf("own kernel ISA: %s | repeats %d, interleaved A B / B A, each sample >= %.0f ms\n\n",
                k::isa_name(k::resolve_isa(k::Isa::best)), repeat, min_sample * 1e3);
    std::printf("%-28s %4s %8s %8s %8s %8s %10s %10s\n", "shape (4096 tokens)", "thr", "own", "OpenBLAS", "own/BLAS",
                "paired", "own spread", "BLAS spread");
    std::printf("%-28s %4s %8s %8s %8s %8s %10s %10s\n", "", "", "GFLOP/s", "GFLOP/s", "medians", "ratio", "(min-max)",
                "(min-max)");

    struct Check {
        std::string name;
        bool own_rep, own_thr, blas_rep, blas_thr;
        double own_err, blas_err, own_vs_blas, ref_max;
    };
    std::vector<Check> checks;
    std::mt19937 rng(12345);

    for (const Shape& s : shapes) {
        Problem p;
        p.s = s;
        const std::size_t nx = static_cast<std::size_t>(s.tokens()) * s.in, ny = static_cast<std::size_t>(s.tokens()) * s.out;
        std::uniform_real_distribution<float> ux(-1.0f, 1.0f), uw(-1.0f / std::sqrt(float(s.in)), 1.0f / std::sqrt(float(s.in))),
            ub(-0.1f, 0.1f);
        p.x.resize(nx);
        p.w.resize(static_cast<std::size_t>(s.in) * s.out);
        p.b.resize(s.out);
        for (float& v : p.x) v = ux(rng);
        for (float& v : p.w) v = uw(rng);
        for (float& v : p.b) v = ub(rng);
        // Packing happens once per run in the engine (StepComputer's constructor): not timed.
        p.packed.resize(k::projection_packed_floats(s.in, s.out, k::Isa::best));
        k::pack_projection_weights(p.w.data(), s.in, s.out, p.packed.data(), k::Isa::best);
        p.workspace.resize(k::projection_workspace_bytes(s.in, k::Isa::best, max_threads));
        std::vector<float> y(ny);

        for (int threads = 1; threads <= max_threads; ++threads) {
            // Warm up both (page faults, OpenBLAS thread start), then size samples on the slower.
            run_own(p, threads, y.data());
            run_blas(p, threads, y.data());
            const double one = std::max(time_calls(run_own, p, threads, y.data(), 1), time_calls(run_blas, p, threads, y.data(), 1));
            const int calls = std::max(1, static_cast<int>(std::ceil(min_sample / std::max(one, 1e-7))));
            std::vector<double> own, blas;
            for (int r = 0; r < repeat; ++r) {
                // ABBA order: neither side always runs right after the other.
                if (r % 2 == 0) {
                    own.push_back(s.flops() / time_calls(run_own, p, threads, y.data(), calls) * 1e-9);
                    blas.push_back(s.flops() / time_calls(run_blas, p, threads, y.data(), calls) * 1e-9);
                } else {
                    blas.push_back(s.flops() / time_calls(run_blas, p, threads, y.data(), calls) * 1e-9);
                    own.push_back(s.flops() / time_calls(run_own, p, threads, y.data(), calls) * 1e-9);
                }
            }
            const double mo = median(own), mb = median(blas);
            std::vector<double> paired;  // own/BLAS of the samples taken side by side
            for (int r = 0; r < repeat; ++r) paired.push_back(own[r] / blas[r]);
            char so[32], sb[32];
            std::snprintf(so, sizeof so, "%.0f-%.0f", *std::min_element(own.begin(), own.end()), *std::max_element(own.begin(), own.end()));
            std::snprintf(sb, sizeof sb, "%.0f-%.0f", *std::min_element(blas.begin(), blas.end()), *std::max_element(blas.begin(), blas.end()));
            std::printf("%-28s %4d %8.1f %8.1f %8.2f %8.2f %10s %10s\n", s.name, threads, mo, mb, mo / mb, median(paired), so, sb);
            std::fflush(stdout);
        }

        // Determinism: twice with 1 thread, twice with max_threads, bit for bit; accuracy
        // against a double-precision reference.
        Check c;
        c.name = s.name;
        std::vector<float> o1(ny), o2(ny), o3(ny), o4(ny), b1(ny), b2(ny), b3(ny), b4(ny);
        run_own(p, 1, o1.data());
        run_own(p, 1, o2.data());
        run_own(p, max_threads, o3.data());
        run_own(p, max_threads, o4.data());
        run_blas(p, 1, b1.data());
        run_blas(p, 1, b2.data());
        run_blas(p, max_threads, b3.data());
        run_blas(p, max_threads, b4.data());
        c.own_rep = same_bits(o1, o2) && same_bits(o3, o4);
        c.own_thr = same_bits(o1, o3);
        c.blas_rep = same_bits(b1, b2) && same_bits(b3, b4);
        c.blas_thr = same_bits(b1, b3);
        std::vector<double> ref;
        reference(p, ref);
        c.own_err = max_abs_diff(o1, ref);
        c.blas_err = max_abs_diff(b1, ref);
        c.ref_max = 0.0;
        for (double v : ref) c.ref_max = std::max(c.ref_max, std::fabs(v));
        c.own_vs_blas = 0.0;
        for (std::size_t i = 0; i < ny; ++i) c.own_vs_blas = std::max(c.own_vs_blas, double(std::fabs(o1[i] - b1[i])));
        checks.push_back(c);
    }

    std::printf("\nDeterminism (bit-identical) and accuracy (max |y - y_f64|; max |y_f64| for scale), %d vs 1 thread(s):\n",
                max_threads);
    std::printf("%-28s %9s %9s %9s %9s %10s %10s %10s %9s\n", "shape", "own rep", "own 1v2", "BLAS rep", "BLAS 1v2",
                "own err", "BLAS err", "own-BLAS", "max|y|");
    bool all_own = true, all_blas = true;
    for (const Check& c : checks) {
        all_own = all_own && c.own_rep && c.own_thr;
        all_blas = all_blas && c.blas_rep && c.blas_thr;
        std::printf("%-28s %9s %9s %9s %9s %10.2e %10.2e %10.2e %9.2f\n", c.name.c_str(), c.own_rep ? "yes" : "NO",
                    c.own_thr ? "yes" : "NO", c.blas_rep ? "yes" : "NO", c.blas_thr ? "yes" : "NO", c.own_err, c.blas_err,
                    c.own_vs_blas, c.ref_max);
    }
    std::printf("deterministic over repeats and 1 vs %d threads: own %s, OpenBLAS %s\n", max_threads, all_own ? "yes" : "NO",
                all_blas ? "yes" : "NO");
    return 0;
}
