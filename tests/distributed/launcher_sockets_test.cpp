// Nagle's algorithm switched off on the process's TCP sockets before MPI_Finalize
// (launcher_sockets.hpp): a loopback connection such as PMIx's gets TCP_NODELAY, other
// descriptors are left as they were.
#include "attnbatch/distributed/launcher_sockets.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

namespace attnbatch::distributed {
namespace {

int no_delay(int fd) {
    int value = -1;
    socklen_t length = sizeof value;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &value, &length) != 0) return -1;
    return value;
}

// A connected pair on 127.0.0.1, as a rank's socket to its launcher and the launcher's end.
struct LoopbackPair {
    int listener = -1, client = -1, server = -1;
    LoopbackPair() {
        listener = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof address;
        if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
            ::listen(listener, 1) != 0 || ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
            return;
        }
        client = ::socket(AF_INET, SOCK_STREAM, 0);
        if (client < 0 || ::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) return;
        server = ::accept(listener, nullptr, nullptr);
    }
    ~LoopbackPair() {
        for (int fd : {listener, client, server}) {
            if (fd >= 0) ::close(fd);
        }
    }
};

TEST(LauncherSockets, SetsNoDelayOnEveryTcpSocket) {
    LoopbackPair pair;
    ASSERT_GE(pair.server, 0) << "no loopback connection";
    ASSERT_EQ(no_delay(pair.client), 0) << "a new TCP socket starts with Nagle's algorithm on";
    EXPECT_GE(send_launcher_messages_at_once(), 3);  // the listener and both ends
    EXPECT_NE(no_delay(pair.client), 0);
    EXPECT_NE(no_delay(pair.server), 0);
    // Still a working connection.
    const char sent = 'x';
    char received = 0;
    ASSERT_EQ(::write(pair.client, &sent, 1), 1);
    ASSERT_EQ(::read(pair.server, &received, 1), 1);
    EXPECT_EQ(received, sent);
}

TEST(LauncherSockets, LeavesOtherDescriptorsAlone) {
    int local[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, local), 0);
    int pipe_ends[2];
    ASSERT_EQ(::pipe(pipe_ends), 0);
    const int udp = ::socket(AF_INET, SOCK_DGRAM, 0);
    ASSERT_GE(udp, 0);
    EXPECT_EQ(send_launcher_messages_at_once(), 0);  // no TCP socket in this process now
    const char sent = 'y';
    char received = 0;
    ASSERT_EQ(::write(local[0], &sent, 1), 1);
    ASSERT_EQ(::read(local[1], &received, 1), 1);
    EXPECT_EQ(received, sent);
    for (int fd : {local[0], local[1], pipe_ends[0], pipe_ends[1], udp}) ::close(fd);
}

}  // namespace
}  // namespace attnbatch::distributed
