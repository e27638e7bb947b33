// Projections Y = X W + b against a double-precision product: every ISA, shapes that leave
// partial row blocks and column panels, strided inputs, rows outside the spans left alone, and
// results independent of the thread count, of how the rows are cut into spans and of the other
// rows in the call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "attnbatch/kernels/projection.hpp"

namespace kn = attnbatch::kernels;

namespace {

struct Case {
    int batch, len, in, out;
    bool bias;
};

struct Result {
    std::vector<float> y;
    int y_row;
};

std::vector<float> random_vector(std::size_t n, std::uint32_t seed, float scale) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = normal(rng);
    return v;
}

// x with a padded row stride (in + 3) so that the kernel must honour strides; sequence s's
// first lengths[s] rows in spans of at most `span_rows` rows, the rest of y left at 12345.
Result run(const Case& c, kn::Isa isa, int threads, const std::vector<float>& x, const std::vector<float>& w,
           const std::vector<float>& b, const std::vector<std::int32_t>& lengths, int x_row, int span_rows = 1 << 30) {
    std::vector<float> packed(kn::projection_packed_floats(c.in, c.out, isa));
    kn::pack_projection_weights(w.data(), c.in, c.out, packed.data(), isa);
    const int y_row = c.out + 5;
    Result r{std::vector<float>(static_cast<std::size_t>(c.batch) * c.len * y_row, 12345.0f), y_row};
    std::vector<kn::ProjectionSpan> spans;
    for (int s = 0; s < c.batch; ++s) {
        for (int r0 = 0; r0 < lengths[s]; r0 += span_rows) {
            const std::size_t row = static_cast<std::size_t>(s) * c.len + r0;
            spans.push_back({x.data() + row * x_row, r.y.data() + row * y_row, std::min(span_rows, lengths[s] - r0)});
        }
    }
    kn::ProjectionParams p;
    p.spans = spans.data();
    p.span_count = spans.size();
    p.x_row_stride = x_row;
    p.y_row_stride = y_row;
    p.in = c.in;
    p.out = c.out;
    p.packed_w = packed.data();
    p.bias = c.bias ? b.data() : nullptr;
    std::vector<unsigned char> workspace(kn::projection_workspace_bytes(c.in, isa, threads));
    kn::project(p, isa, threads, workspace.data(), workspace.size());
    return r;
}

class Projection : public ::testing::TestWithParam<Case> {};

TEST_P(Projection, MatchesDoubleProductOnEveryIsa) {
    const Case c = GetParam();
    const int x_row = c.in + 3;
    const auto x = random_vector(static_cast<std::size_t>(c.batch) * c.len * x_row, 1, 1.0f);
    const auto w = random_vector(static_cast<std::size_t>(c.in) * c.out, 2, 1.0f / std::sqrt(static_cast<float>(c.in)));
    const auto b = random_vector(static_cast<std::size_t>(c.out), 3, 1.0f);
    std::vector<std::int32_t> lengths(c.batch);
    for (int s = 0; s < c.batch; ++s) lengths[s] = s == 0 ? c.len : (s * 7) % (c.len + 1);
    for (kn::Isa isa : kn::built_isas()) {
        if (!kn::isa_available(isa)) continue;
        const Result r = run(c, isa, 2, x, w, b, lengths, x_row);
        for (int s = 0; s < c.batch; ++s) {
            for (int i = 0; i < c.len; ++i) {
                for (int o = 0; o < c.out + 5; ++o) {
                    const float got = r.y[(static_cast<std::size_t>(s) * c.len + i) * r.y_row + o];
                    if (o >= c.out) {  // the gap between rows is never written
                        ASSERT_EQ(got, 12345.0f) << kn::isa_name(isa);
                        continue;
                    }
                    if (i >= lengths[s]) {
                        ASSERT_EQ(got, 12345.0f) << kn::isa_name(isa) << " a row outside the spans was written";
                        continue;
                    }
                    double ref = c.bias ? b[o] : 0.0, magnitude = std::fabs(ref);
                    for (int k = 0; k < c.in; ++k) {
                        const double term = static_cast<double>(x[(static_cast<std::size_t>(s) * c.len + i) * x_row + k]) * w[static_cast<std::size_t>(k) * c.out + o];
                        ref += term;
                        magnitude += std::fabs(term);
                    }
                    // fp32 summation of `in` terms: error <= in * eps * sum|terms| (Higham), with margin.
                    const double bound = 2.0 * c.in * 6e-8 * magnitude + 1e-30;
                    ASSERT_LE(std::fabs(got - ref), bound) << kn::isa_name(isa) << " s=" << s << " i=" << i << " o=" << o;
                }
            }
        }
    }
}

TEST_P(Projection, SameBitsForAnyThreadCountSpansAndNeighbours) {
    const Case c = GetParam();
    const int x_row = c.in + 3;
    const auto x = random_vector(static_cast<std::size_t>(c.batch) * c.len * x_row, 4, 1.0f);
    const auto w = random_vector(static_cast<std::size_t>(c.in) * c.out, 5, 0.1f);
    const auto b = random_vector(static_cast<std::size_t>(c.out), 6, 1.0f);
    const std::vector<std::int32_t> lengths(c.batch, c.len);
    const kn::Isa isa = kn::resolve_isa(kn::Isa::best);
    const Result one = run(c, isa, 1, x, w, b, lengths, x_row);
    for (int threads : {2, 3, 4}) {
        const Result many = run(c, isa, threads, x, w, b, lengths, x_row);
        ASSERT_EQ(0, std::memcmp(one.y.data(), many.y.data(), one.y.size() * sizeof(float))) << threads << " threads";
    }
    // Rows cut into spans of 1, 5 and 13 rows (partial micro-tiles everywhere) give the same bits.
    for (int span_rows : {1, 5, 13}) {
        const Result cut = run(c, isa, 2, x, w, b, lengths, x_row, span_rows);
        ASSERT_EQ(0, std::memcmp(one.y.data(), cut.y.data(), one.y.size() * sizeof(float))) << "spans of " << span_rows;
    }
    // The last sequence alone gives the same bits as inside the batch.
    const Case alone{1, c.len, c.in, c.out, c.bias};
    const std::vector<float> last_x(x.end() - static_cast<std::ptrdiff_t>(c.len) * x_row, x.end());
    const Result single = run(alone, isa, 1, last_x, w, b, {c.len}, x_row);
    ASSERT_EQ(0, std::memcmp(single.y.data(), one.y.data() + (one.y.size() - single.y.size()), single.y.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, Projection,
                         ::testing::Values(Case{3, 1, 1, 1, true}, Case{2, 7, 3, 5, false}, Case{4, 13, 64, 64, true},
                                           Case{3, 37, 80, 96, true}, Case{2, 50, 64, 200, false}, Case{5, 20, 130, 33, true}));

TEST(ProjectionPreconditions, RejectsBadSizesSpansAndSmallWorkspace) {
    const kn::Isa isa = kn::Isa::portable;
    std::vector<float> x(16, 1.0f), y(16, 0.0f), packed(kn::projection_packed_floats(4, 4, isa));
    kn::ProjectionSpan span{x.data(), y.data(), 4};
    kn::ProjectionParams p;
    p.spans = &span;
    p.span_count = 1;
    p.in = 4;
    p.out = 4;
    p.x_row_stride = 4;
    p.y_row_stride = 3;  // shorter than a row
    p.packed_w = packed.data();
    std::vector<unsigned char> workspace(kn::projection_workspace_bytes(4, isa, 1));
    EXPECT_THROW(kn::project(p, isa, 1, workspace.data(), workspace.size()), std::invalid_argument);
    p.y_row_stride = 4;
    EXPECT_THROW(kn::project(p, isa, 1, workspace.data(), 8), std::invalid_argument);
    span.rows = -1;
    EXPECT_THROW(kn::project(p, isa, 1, workspace.data(), workspace.size()), std::invalid_argument);
    span.rows = 4;
    span.y = nullptr;
    EXPECT_THROW(kn::project(p, isa, 1, workspace.data(), workspace.size()), std::invalid_argument);
    span.y = y.data();
    EXPECT_NO_THROW(kn::project(p, isa, 1, workspace.data(), workspace.size()));
    EXPECT_EQ(y[0], 0.0f);  // no bias, zero weights: 0
}

}  // namespace
