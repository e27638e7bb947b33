// kernel_ab.sh's program: two builds of the attention kernels in one process (side.cpp, once per
// side), called in alternation on the same inputs, so that both see the same host: the same
// neighbours, clock and cache state from one call to the next. Between processes this host's
// rates drift by 10-40%, so an A/B of separate runs cannot resolve a change of 1-2%; here the
// paired ratio of each round can.
//   kernel_ab ROUNDS THREADS LEN GROUPS   (GROUPS sequence-head pairs of LEN x 64, contiguous)
// Prints per kernel (fp32, and bf16 where both sides run it on this CPU; full and causal) the
// median GFLOP/s of each side and the median of the rounds' new/base ratios (rates, so > 1 is
// faster), and whether the two sides' outputs and lse agree bit for bit (a change meant to move
// no bit shows here if it does; one that does move them says by how much).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <vector>

#include <sys/mman.h>

#include "problem.hpp"

extern "C" {
int base_runs(const AbProblem*, int kernel);
int new_runs(const AbProblem*, int kernel);
std::size_t base_workspace_bytes(const AbProblem*, int kernel, int causal);
void base_forward(const AbProblem*, int kernel, int causal, void* workspace, std::size_t workspace_bytes);
std::size_t new_workspace_bytes(const AbProblem*, int kernel, int causal);
void new_forward(const AbProblem*, int kernel, int causal, void* workspace, std::size_t workspace_bytes);
}

namespace {

struct Config {
    const char* name;
    int kernel;
    int causal;
};

double median(std::vector<double> x) {
    std::sort(x.begin(), x.end());
    const std::size_t n = x.size();
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

// Tensors placed as a run's step buffers and `bench`'s are (2 MiB bounds, huge pages asked for):
// the kernel streams its output rows only when they lie on vector bounds, and a std::vector's
// 16-byte bound would hide that path from this comparison.
struct Tensor {
    float* data = nullptr;
    explicit Tensor(std::size_t n) {
        const std::size_t huge = std::size_t{2} << 20;
        const std::size_t bytes = (n * sizeof(float) + huge - 1) / huge * huge;
        data = static_cast<float*>(std::aligned_alloc(huge, bytes));
        if (!data) throw std::bad_alloc();
        ::madvise(data, bytes, MADV_HUGEPAGE);  // only a hint
        std::fill(data, data + n, 0.0f);
    }
    ~Tensor() { std::free(data); }
    Tensor(const Tensor&) = delete;
    Tensor& operator=(const Tensor&) = delete;
};

// "identical", or how many of the new side's values differ from the base side's, and by how much
// at most (infinity where one of a differing pair is NaN).
std::string compare(const float* base, const float* fresh, std::size_t n) {
    double largest = 0;
    std::size_t differing = 0;
    for (std::size_t i = 0; i < n; ++i) {
        if (std::memcmp(base + i, fresh + i, sizeof(float)) == 0) continue;
        ++differing;
        const double d = std::fabs(static_cast<double>(fresh[i]) - static_cast<double>(base[i]));
        largest = std::isnan(d) ? INFINITY : std::max(largest, d);
    }
    if (differing == 0) return "identical";
    char text[96];
    std::snprintf(text, sizeof text, "%zu of %zu differ, largest by %.3g", differing, n, largest);
    return text;
}

void fill_normal(Tensor& t, std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    for (std::size_t i = 0; i < n; ++i) t.data[i] = normal(rng);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: %s ROUNDS THREADS LEN GROUPS\n", argv[0]);
        return 2;
    }
    const int rounds = std::atoi(argv[1]), threads = std::atoi(argv[2]), len = std::atoi(argv[3]), groups = std::atoi(argv[4]);
    if (rounds < 1 || threads < 1 || len < 1 || groups < 1) {
        std::fprintf(stderr, "kernel_ab: ROUNDS, THREADS, LEN and GROUPS must be positive integers\n");
        return 2;
    }
    const int dim = 64;
    const std::size_t n = static_cast<std::size_t>(groups) * len * dim;
    Tensor q(n), k(n), v(n), out(n), lse(static_cast<std::size_t>(groups) * len);
    fill_normal(q, n, 1);
    fill_normal(k, n, 2);
    fill_normal(v, n, 3);
    const AbProblem problem{q.data, k.data, v.data, out.data, lse.data, groups, 1, len, dim, threads};

    std::vector<Config> configs{{"fp32 full", ab_fp32, 0}, {"fp32 causal", ab_fp32, 1}};
    if (base_runs(&problem, ab_bf16) && new_runs(&problem, ab_bf16)) {
        configs.push_back({"bf16 full", ab_bf16, 0});
        configs.push_back({"bf16 causal", ab_bf16, 1});
    }
    std::size_t bytes = 0;
    for (const Config& c : configs) {
        bytes = std::max({bytes, base_workspace_bytes(&problem, c.kernel, c.causal), new_workspace_bytes(&problem, c.kernel, c.causal)});
    }
    std::vector<unsigned char> workspace(bytes);

    using Forward = void (*)(const AbProblem*, int, int, void*, std::size_t);
    const Forward sides[2] = {base_forward, new_forward};
    const double full_flop = 4.0 * groups * static_cast<double>(len) * len * dim;
    std::vector<std::vector<double>> rate(configs.size() * 2);
    // Round -1 warms both sides up and is not counted; each round runs every configuration on
    // both sides, base first in even rounds and new first in odd ones.
    for (int round = -1; round < rounds; ++round) {
        for (std::size_t c = 0; c < configs.size(); ++c) {
            for (int turn = 0; turn < 2; ++turn) {
                const int side = (round % 2 == 0) ? turn : 1 - turn;
                const auto t0 = std::chrono::steady_clock::now();
                sides[side](&problem, configs[c].kernel, configs[c].causal, workspace.data(), workspace.size());
                const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                // Causal counted with half the FLOPs, as `attnbatch bench` counts it.
                if (round >= 0) rate[c * 2 + side].push_back(full_flop * (configs[c].causal ? 0.5 : 1.0) / s * 1e-9);
            }
        }
    }
    std::printf("%d rounds, %d thread(s), %d sequence-head pairs, L = %d, d = %d\n", rounds, threads, groups, len, dim);
    std::printf("| kernel | base GFLOP/s | new GFLOP/s | new / base (median of rounds) |\n| --- | --- | --- | --- |\n");
    const auto paired = [&](std::size_t a, std::size_t b) {  // median over rounds of rate[a] / rate[b]
        std::vector<double> ratios;
        for (int r = 0; r < rounds; ++r) ratios.push_back(rate[a][r] / rate[b][r]);
        return median(ratios);
    };
    for (std::size_t c = 0; c < configs.size(); ++c) {
        std::printf("| %s | %.1f | %.1f | %.3f |\n", configs[c].name, median(rate[c * 2]), median(rate[c * 2 + 1]),
                    paired(c * 2 + 1, c * 2));
    }
    // Each side once more into outputs of its own, compared bit for bit.
    Tensor out_new(n), lse_new(static_cast<std::size_t>(groups) * len);
    AbProblem problem_new = problem;
    problem_new.out = out_new.data;
    problem_new.lse = lse_new.data;
    for (const Config& c : configs) {
        base_forward(&problem, c.kernel, c.causal, workspace.data(), workspace.size());
        new_forward(&problem_new, c.kernel, c.causal, workspace.data(), workspace.size());
        std::printf("%s, new against base: output %s; lse %s\n", c.name, compare(out.data, out_new.data, n).c_str(),
                    compare(lse.data, lse_new.data, static_cast<std::size_t>(groups) * len).c_str());
    }
    // The ratios within each side (configs: fp32 full, fp32 causal, bf16 full, bf16 causal).
    for (int side = 0; side < 2; ++side) {
        std::printf("%s: causal / full %.3f", side == 0 ? "base" : "new", paired(2 + side, side));
        if (configs.size() == 4) std::printf(", bf16 / fp32 %.3f", paired(4 + side, side));
        std::printf("\n");
    }
    return 0;
}
