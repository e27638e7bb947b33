// The creation time an output records.
#include "attnbatch/io/output/provenance.hpp"

#include <cstdlib>
#include <ctime>

namespace attnbatch::io {

std::string creation_time_now() {
    const char* pinned = std::getenv("SOURCE_DATE_EPOCH");
    const std::time_t now = pinned && *pinned ? static_cast<std::time_t>(std::strtoll(pinned, nullptr, 10)) : std::time(nullptr);
    std::tm utc {};
    gmtime_r(&now, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return text;
}

}  // namespace attnbatch::io
