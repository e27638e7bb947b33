#include "attnbatch/distributed/phase_times.hpp"

#include <algorithm>

namespace attnbatch::distributed {

namespace {

// The fields in one order, for pack(), unpack() and slowest().
template <class Times, class Visit>
void each_field(Times& times, Visit&& visit) {
    visit(times.describe);
    visit(times.lengths);
    visit(times.plan);
    visit(times.preflight);
    visit(times.value_scan);
    visit(times.output_creation);
    visit(times.first_read);
    visit(times.rounds);
    visit(times.last_write);
    visit(times.close);
    visit(times.publish);
}

}  // namespace

std::vector<double> PhaseTimes::pack() const {
    std::vector<double> values;
    values.reserve(fields);
    each_field(*this, [&](double value) { values.push_back(value); });
    return values;
}

PhaseTimes PhaseTimes::unpack(const double* values) {
    PhaseTimes times;
    std::size_t i = 0;
    each_field(times, [&](double& value) { value = values[i++]; });
    return times;
}

PhaseTimes PhaseTimes::slowest(const PhaseTimes& a, const PhaseTimes& b) {
    const std::vector<double> x = a.pack(), y = b.pack();
    std::vector<double> larger(fields);
    for (std::size_t i = 0; i < fields; ++i) larger[i] = std::max(x[i], y[i]);
    return unpack(larger.data());
}

}  // namespace attnbatch::distributed
