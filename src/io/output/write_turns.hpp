// Ranks writing one output file take turns, each sleeping while another writes.
#pragma once

#include <string>

namespace attnbatch::io {

// A local file system serialises buffered writes to one file (its inode lock), and a writer
// kept waiting there spins while the holder copies: with two ranks on two cores, 5% of the CPU
// samples of a run storing 1 GiB of maps were that spin, taken from the compute threads. A
// lock that sleeps (an open-file-description lock on a byte past any data the file can hold)
// gives the same order of writes and hands the core to compute. Taken only where it can
// help: on a local file system (where every writer of the file is on this node) and for
// independent writes (a collective write waits for every rank: a rank holding the turn would
// wait for one waiting for the turn). Best effort: where the lock cannot be had (another
// system, a file system without such locks) the writes go ahead without turns.
class WriteTurns {
public:
    WriteTurns() noexcept = default;  // no turns
    explicit WriteTurns(const std::string& path) noexcept;
    ~WriteTurns();
    WriteTurns(const WriteTurns&) = delete;
    WriteTurns& operator=(const WriteTurns&) = delete;

    // While a Turn lives no other WriteTurns of the file holds one (none taken from nullptr or
    // from turns that are not active).
    class Turn {
    public:
        explicit Turn(const WriteTurns* turns) noexcept;
        ~Turn();
        Turn(const Turn&) = delete;
        Turn& operator=(const Turn&) = delete;

    private:
        int fd_ = -1;  // held: the turns' descriptor
    };

    bool active() const noexcept { return fd_ >= 0; }

private:
    int fd_ = -1;
};

}  // namespace attnbatch::io
