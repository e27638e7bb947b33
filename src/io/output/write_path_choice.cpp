#include "output/write_path_choice.hpp"

namespace attnbatch::io {

WritePath WritePathChoice::cheaper() const noexcept {
    const Cost& cached = costs_[static_cast<int>(WritePath::page_cache)];
    const Cost& direct = costs_[static_cast<int>(WritePath::direct)];
    return direct.per_byte() < cached.per_byte() ? WritePath::direct : WritePath::page_cache;
}

WritePath WritePathChoice::next() const noexcept {
    if (!costs_[static_cast<int>(WritePath::page_cache)].known()) return WritePath::page_cache;
    if (!costs_[static_cast<int>(WritePath::direct)].known()) return WritePath::direct;
    const WritePath cheap = cheaper();
    const WritePath dear = cheap == WritePath::direct ? WritePath::page_cache : WritePath::direct;
    const bool probe = seconds_since_probe_ * kProbeShare >= costs_[static_cast<int>(dear)].per_byte() * last_bytes_;
    return probe ? dear : cheap;
}

void WritePathChoice::record(WritePath path, std::uint64_t bytes, double seconds) noexcept {
    const bool probe = costs_[0].known() && costs_[1].known() && path != cheaper();
    Cost& cost = costs_[static_cast<int>(path)];
    cost.seconds = cost.seconds / 2 + seconds;
    cost.bytes = cost.bytes / 2 + static_cast<double>(bytes);
    last_bytes_ = static_cast<double>(bytes);
    seconds_since_probe_ = probe ? 0 : seconds_since_probe_ + seconds;
}

}  // namespace attnbatch::io
