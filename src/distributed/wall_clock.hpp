#pragma once

#include <chrono>

namespace attnbatch::distributed {

inline double wall_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace attnbatch::distributed
