// Rotary position embeddings: the table of cosines and sines, and the rotation of Q or K rows.
#include "attnbatch/kernels/rope.hpp"
#include "attnbatch/kernels/threads.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>


namespace attnbatch::kernels {
namespace {

// theta^(-2i/d) as Hugging Face writes it: 1 / theta^(2i/d), here in double.
double inverse_frequency(double theta, int dim, int i) {
    return 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(dim));
}

void check_dim(int dim) {
    if (dim <= 0 || dim % 2 != 0) {
        throw std::invalid_argument("rotary embeddings need an even, positive head width, got " + std::to_string(dim));
    }
}

}  // namespace

void rope_table(double theta, int dim, std::int64_t first_position, int rows, float* cos_table, float* sin_table) {
    check_dim(dim);
    if (!(theta > 0) || !std::isfinite(theta)) throw std::invalid_argument("rope_table: theta must be a positive number");
    const int half = dim / 2;
    for (int r = 0; r < rows; ++r) {
        const double position = static_cast<double>(first_position + r);
        for (int i = 0; i < half; ++i) {
            const double angle = position * inverse_frequency(theta, dim, i);
            cos_table[static_cast<std::size_t>(r) * half + i] = static_cast<float>(std::cos(angle));
            sin_table[static_cast<std::size_t>(r) * half + i] = static_cast<float>(std::sin(angle));
        }
    }
}

void apply_rope(const RopeParams& p, int threads) {
    check_dim(p.dim);
    if (!p.in || !p.out || !p.cos_table || !p.sin_table) throw std::invalid_argument("apply_rope: null pointer");
    if (p.row_offset < 0) throw std::invalid_argument("apply_rope: negative row_offset");
    const int half = p.dim / 2;
    const std::int64_t tasks = static_cast<std::int64_t>(p.batch) * p.heads;
    (void)threads;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) num_threads(resolved_threads(threads)) if (tasks > 1)
#endif
    for (std::int64_t task = 0; task < tasks; ++task) {
        const std::int64_t b = task / p.heads, h = task % p.heads;
        const int valid = p.lengths ? std::min(p.rows, std::max(0, static_cast<int>(p.lengths[b]) - p.row_offset)) : p.rows;
        for (int r = 0; r < p.rows; ++r) {
            const float* x = p.in + b * p.in_strides.seq + h * p.in_strides.head + r * p.in_strides.row;
            float* y = p.out + b * p.out_strides.seq + h * p.out_strides.head + r * p.out_strides.row;
            if (r >= valid) {
                if (x != y) for (int c = 0; c < p.dim; ++c) y[c] = x[c];
                continue;
            }
            const float* cs = p.cos_table + static_cast<std::size_t>(p.row_offset + r) * half;
            const float* sn = p.sin_table + static_cast<std::size_t>(p.row_offset + r) * half;
            // Both halves are read before either is written, so in place is safe.
#pragma omp simd
            for (int i = 0; i < half; ++i) {
                const float a = x[i], c = x[i + half];
                y[i] = a * cs[i] - c * sn[i];
                y[i + half] = c * cs[i] + a * sn[i];
            }
        }
    }
}

void apply_rope_f64(double theta, int dim, std::int64_t position, double* row) {
    check_dim(dim);
    const int half = dim / 2;
    for (int i = 0; i < half; ++i) {
        const double angle = static_cast<double>(position) * inverse_frequency(theta, dim, i);
        const double c = std::cos(angle), s = std::sin(angle);
        const double a = row[i], b = row[i + half];
        row[i] = a * c - b * s;
        row[i + half] = b * c + a * s;
    }
}

}  // namespace attnbatch::kernels
