#include "attnbatch/distributed/launcher_sockets.hpp"

#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstdlib>

namespace attnbatch::distributed {

int send_launcher_messages_at_once() noexcept {
    // The process's descriptors from /proc rather than a loop up to RLIMIT_NOFILE, which can
    // be a million.
    DIR* descriptors = ::opendir("/proc/self/fd");
    if (descriptors == nullptr) return 0;
    const int own = ::dirfd(descriptors);
    int set = 0;
    while (const dirent* entry = ::readdir(descriptors)) {
        char* end = nullptr;
        const long fd = std::strtol(entry->d_name, &end, 10);
        if (end == entry->d_name || *end != '\0' || fd == own) continue;
        int protocol = 0, type = 0;
        socklen_t length = sizeof protocol;
        if (::getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_PROTOCOL, &protocol, &length) != 0) continue;
        length = sizeof type;
        if (::getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_TYPE, &type, &length) != 0) continue;
        if (protocol != IPPROTO_TCP || type != SOCK_STREAM) continue;
        const int on = 1;
        if (::setsockopt(static_cast<int>(fd), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) == 0) ++set;
    }
    ::closedir(descriptors);
    return set;
}

}  // namespace attnbatch::distributed
