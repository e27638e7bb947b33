#include "progress.hpp"

#include <chrono>
#include <cstdio>
#include <unistd.h>

namespace attnbatch::cli {

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string duration_text(double seconds) {
    char text[32];
    if (!(seconds >= 0) || seconds > 1e7) return "?";
    const long s = static_cast<long>(seconds + 0.5);
    if (s >= 3600) std::snprintf(text, sizeof text, "%ldh%02ldm", s / 3600, (s / 60) % 60);
    else if (s >= 60) std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
    else std::snprintf(text, sizeof text, "%lds", s);
    return text;
}

// The bar is redrawn at most this often; more would only cost terminal time.
constexpr double kBarRefreshSeconds = 0.2;

}  // namespace

ProgressReporter::ProgressReporter(const std::string& mode, double interval_seconds, std::int64_t units,
                                   std::int64_t sequences, double cost, std::string label)
    : interval_(interval_seconds), start_(now()), units_(units), sequences_(sequences), cost_(cost),
      label_(std::move(label)) {
    enabled_ = mode != "never";
    bar_ = mode == "always" || (mode == "auto" && ::isatty(STDERR_FILENO));
}

std::string ProgressReporter::line(const distributed::RoundProgress& p, double elapsed) const {
    // Done and total count the work of earlier attempts (--resume); rates and the ETA only
    // this attempt's, which is what the clock measured.
    const std::int64_t units = before_.units + p.units;
    const double fraction = cost_ > 0 ? (before_.cost + p.cost) / cost_
                                      : (units_ > 0 ? static_cast<double>(units) / static_cast<double>(units_) : 1.0);
    const double before_fraction = cost_ > 0 ? before_.cost / cost_ : 0.0;
    const double now_fraction = fraction - before_fraction;
    const double eta = now_fraction > 0 ? elapsed * (1.0 - fraction) / now_fraction : -1.0;
    char text[256];
    std::snprintf(text, sizeof text, "%s%5.1f%% units %lld/%lld  %.0f seq/s  %.1f GFLOP/s  elapsed %s  ETA %s",
                  label_.empty() ? "" : (label_ + " ").c_str(), 100.0 * fraction, static_cast<long long>(units),
                  static_cast<long long>(units_), elapsed > 0 ? static_cast<double>(p.sequences) / elapsed : 0.0,
                  elapsed > 0 ? p.cost / elapsed * 1e-9 : 0.0, duration_text(elapsed).c_str(), duration_text(eta).c_str());
    return text;
}

void ProgressReporter::update(const distributed::RoundProgress& p) {
    if (!enabled_) return;
    const double t = now(), elapsed = t - start_;
    const bool last = before_.units + p.units >= units_;
    if (bar_) {
        if (!last && t - last_shown_ < kBarRefreshSeconds) return;
        const double fraction =
            units_ > 0 ? static_cast<double>(before_.units + p.units) / static_cast<double>(units_) : 1.0;
        constexpr int width = 24;
        const int filled = static_cast<int>(fraction * width + 0.5);
        std::string bar(static_cast<std::size_t>(filled), '#');
        bar.resize(width, '.');
        std::fprintf(stderr, "\r[%s] %s\033[K", bar.c_str(), line(p, elapsed).c_str());
        std::fflush(stderr);
        drawn_ = true;
    } else {
        if (!last && t - last_shown_ < interval_) return;
        std::printf("progress: %s\n", line(p, elapsed).c_str());
        std::fflush(stdout);
    }
    last_shown_ = t;
}

void ProgressReporter::finish() {
    if (drawn_) std::fputc('\n', stderr);
    drawn_ = false;
}

}  // namespace attnbatch::cli
