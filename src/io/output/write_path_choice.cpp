#include "output/write_path_choice.hpp"

namespace attnbatch::io {

namespace {
constexpr int index(WritePath path) { return path == WritePath::direct ? 1 : 0; }
}  // namespace

WritePath WritePathChoice::usual() const noexcept {
    const Cost& cached = costs_[index(WritePath::page_cache)];
    const Cost& direct = costs_[index(WritePath::direct)];
    if (!cached.known() || !direct.known()) return WritePath::direct;
    return cached.per_byte() < direct.per_byte() ? WritePath::page_cache : WritePath::direct;
}

bool WritePathChoice::try_other(std::uint64_t bytes) const noexcept {
    const Cost& cost = costs_[index(other())];
    if (!cost.known()) return true;
    return seconds_since_try_ * kTryShare >= cost.per_byte() * static_cast<double>(bytes);
}

void WritePathChoice::record(WritePath path, std::uint64_t bytes, double seconds, bool while_computing) noexcept {
    const bool tried = path != usual();
    Cost& cost = costs_[index(path)];
    cost.seconds = cost.seconds / 2 + seconds;
    cost.bytes = cost.bytes / 2 + static_cast<double>(bytes);
    if (while_computing) return;
    seconds_since_try_ = tried ? 0 : seconds_since_try_ + seconds;
}

}  // namespace attnbatch::io
