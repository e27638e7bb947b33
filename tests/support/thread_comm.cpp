#include "support/thread_comm.hpp"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

namespace attnbatch::testing {

namespace {

// Thrown by a rank's wait when another rank failed: not a failure of its own.
class Released : public CommError {
public:
    using CommError::CommError;
};

struct Contribution {
    std::string kind;
    int root = -1;
    std::size_t bytes = 0;      // what the rank declared (checked to agree across ranks)
    std::vector<char> payload;  // what it brought (only the root's, for broadcast)
};

using Clock = std::chrono::steady_clock;

}  // namespace

class ThreadWorld {
public:
    ThreadWorld(int size, const ThreadCommOptions& options)
        : size_(size), options_(options), slots_(static_cast<std::size_t>(size)),
          finished_(static_cast<std::size_t>(size), false) {}

    int size() const { return size_; }

    // One collective: returns every rank's contribution, in rank order.
    std::vector<Contribution> rendezvous(int rank, Contribution mine) {
        std::unique_lock<std::mutex> lock(mutex_);
        throw_if_failed();
        const std::uint64_t generation = generation_;
        const std::string kind = mine.kind;
        slots_[static_cast<std::size_t>(rank)] = std::move(mine);
        contributed_.insert(rank);
        if (static_cast<int>(contributed_.size()) == size_) {
            std::string mismatch;
            const Contribution& first = slots_[0];
            for (int r = 1; r < size_ && mismatch.empty(); ++r) {
                const Contribution& other = slots_[static_cast<std::size_t>(r)];
                if (other.kind != first.kind || other.root != first.root || other.bytes != first.bytes) {
                    mismatch = "collective mismatch: rank 0 called " + describe(first) + ", rank " + std::to_string(r) +
                               " called " + describe(other);
                }
            }
            if (!mismatch.empty()) {
                fail_locked(mismatch);
                throw CommError(mismatch);
            }
            published_ = std::move(slots_);
            slots_.assign(static_cast<std::size_t>(size_), Contribution{});
            contributed_.clear();
            ++generation_;
            changed_.notify_all();
            return published_;
        }
        wait(
            lock, "rank " + std::to_string(rank) + " in " + kind, [&] { return generation_ != generation; },
            [&] {
                for (int r = 0; r < size_; ++r) {
                    if (finished_[static_cast<std::size_t>(r)] && !contributed_.count(r)) {
                        return "rank " + std::to_string(r) + " returned while rank " + std::to_string(rank) + " waits in " + kind;
                    }
                }
                return std::string();
            });
        return published_;  // copied under the lock: the next generation needs this rank too
    }

    void send(int source, int destination, int tag, const void* data, std::size_t bytes) {
        std::unique_lock<std::mutex> lock(mutex_);
        throw_if_failed();
        const std::uint64_t id = next_message_++;
        Message message{id, std::vector<char>(static_cast<const char*>(data), static_cast<const char*>(data) + bytes)};
        mailboxes_[{source, destination, tag}].push_back(std::move(message));
        changed_.notify_all();
        if (!options_.synchronous_sends) return;
        const std::string what = "rank " + std::to_string(source) + " in a synchronous send to rank " +
                                 std::to_string(destination) + " (tag " + std::to_string(tag) + ")";
        wait(
            lock, what, [&] { return delivered_.count(id) > 0; },
            [&] {
                return finished_[static_cast<std::size_t>(destination)]
                           ? "rank " + std::to_string(destination) + " returned without receiving: " + what
                           : std::string();
            });
        delivered_.erase(id);
    }

    void recv(int source, int destination, int tag, void* data, std::size_t bytes) {
        std::unique_lock<std::mutex> lock(mutex_);
        throw_if_failed();
        std::deque<Message>& box = mailboxes_[{source, destination, tag}];
        const std::string what = "rank " + std::to_string(destination) + " receiving from rank " + std::to_string(source) +
                                 " (tag " + std::to_string(tag) + ")";
        wait(
            lock, what, [&] { return !box.empty(); },
            [&] {
                return finished_[static_cast<std::size_t>(source)]
                           ? "rank " + std::to_string(source) + " returned without sending: " + what
                           : std::string();
            });
        Message message = std::move(box.front());
        box.pop_front();
        delivered_.insert(message.id);
        changed_.notify_all();
        if (message.bytes.size() != bytes) {
            fail_locked(what + ": expected " + std::to_string(bytes) + " bytes, the message has " +
                        std::to_string(message.bytes.size()));
            throw CommError(failure_);
        }
        std::memcpy(data, message.bytes.data(), bytes);
    }

    [[noreturn]] void abort(int rank, int code) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (abort_rank_ < 0 && !failed_) {
            abort_rank_ = rank;
            abort_code_ = code;
            failed_ = true;
            failure_ = "rank " + std::to_string(rank) + " aborted with code " + std::to_string(code);
        }
        changed_.notify_all();
        throw CommAborted(rank, code, false);
    }

    void fail(const std::string& why) {
        std::lock_guard<std::mutex> lock(mutex_);
        fail_locked(why);
    }

    void finish(int rank) {
        std::lock_guard<std::mutex> lock(mutex_);
        finished_[static_cast<std::size_t>(rank)] = true;
        changed_.notify_all();
    }

private:
    struct Message {
        std::uint64_t id = 0;
        std::vector<char> bytes;
    };

    static std::string describe(const Contribution& c) {
        std::string text = c.kind + "(" + std::to_string(c.bytes) + " bytes";
        if (c.root >= 0) text += ", root " + std::to_string(c.root);
        return text + ")";
    }

    void fail_locked(const std::string& why) {
        if (!failed_) {
            failed_ = true;
            failure_ = why;
        }
        changed_.notify_all();
    }

    void throw_if_failed() const {
        if (abort_rank_ >= 0) throw CommAborted(abort_rank_, abort_code_, true);
        if (failed_) throw Released("released from a wait: " + failure_);
    }

    // Waits until ready(); stuck() names why it never can be (a rank that returned), "" if it
    // still can. Another rank's failure is checked first: it explains any rank that returned.
    template <class Ready, class Stuck>
    void wait(std::unique_lock<std::mutex>& lock, const std::string& what, Ready ready, Stuck stuck) {
        const auto deadline =
            Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.deadlock_seconds));
        while (!ready()) {
            throw_if_failed();
            const std::string reason = stuck();
            if (!reason.empty()) {
                fail_locked(reason);
                throw CommError(failure_);
            }
            if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && !ready()) {
                throw_if_failed();
                fail_locked("deadlock: " + what + " for more than " + std::to_string(options_.deadlock_seconds) + " s");
                throw CommError(failure_);
            }
        }
    }

    const int size_;
    const ThreadCommOptions options_;
    std::mutex mutex_;
    std::condition_variable changed_;

    std::uint64_t generation_ = 0;
    std::vector<Contribution> slots_, published_;
    std::set<int> contributed_;

    std::map<std::tuple<int, int, int>, std::deque<Message>> mailboxes_;
    std::uint64_t next_message_ = 0;
    std::set<std::uint64_t> delivered_;

    std::vector<bool> finished_;
    bool failed_ = false;
    std::string failure_;
    int abort_rank_ = -1, abort_code_ = 0;
};

ThreadComm::ThreadComm(std::shared_ptr<ThreadWorld> world, int rank) : world_(std::move(world)), rank_(rank) {}

int ThreadComm::size() const { return world_->size(); }

void ThreadComm::barrier() {
    world_->rendezvous(rank_, Contribution{"barrier", -1, 0, {}});
    ++collectives_;
}

void ThreadComm::broadcast(void* data, std::size_t bytes, int root) {
    if (root < 0 || root >= size()) throw CommError("broadcast: root " + std::to_string(root) + " out of range");
    Contribution mine{"broadcast", root, bytes, {}};
    if (rank_ == root) mine.payload.assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
    const std::vector<Contribution> all = world_->rendezvous(rank_, std::move(mine));
    if (rank_ != root && bytes > 0) std::memcpy(data, all[static_cast<std::size_t>(root)].payload.data(), bytes);
    ++collectives_;
}

namespace {

template <class T>
Contribution scalar(const char* kind, T value) {
    Contribution c{kind, -1, sizeof value, std::vector<char>(sizeof value)};
    std::memcpy(c.payload.data(), &value, sizeof value);
    return c;
}

template <class T>
T scalar_of(const Contribution& c) {
    T value{};
    std::memcpy(&value, c.payload.data(), sizeof value);
    return value;
}

}  // namespace

std::int64_t ThreadComm::max(std::int64_t value) {
    const std::vector<Contribution> all = world_->rendezvous(rank_, scalar("max(int64)", value));
    std::int64_t result = scalar_of<std::int64_t>(all[0]);
    for (const Contribution& c : all) result = std::max(result, scalar_of<std::int64_t>(c));
    ++collectives_;
    return result;
}

double ThreadComm::max(double value) {
    const std::vector<Contribution> all = world_->rendezvous(rank_, scalar("max(double)", value));
    double result = scalar_of<double>(all[0]);
    for (const Contribution& c : all) result = std::max(result, scalar_of<double>(c));
    ++collectives_;
    return result;
}

double ThreadComm::sum(double value) {
    const std::vector<Contribution> all = world_->rendezvous(rank_, scalar("sum(double)", value));
    double result = 0;
    for (const Contribution& c : all) result += scalar_of<double>(c);  // rank order: deterministic
    ++collectives_;
    return result;
}

std::vector<double> ThreadComm::all_gather(const std::vector<double>& values) {
    const std::size_t bytes = values.size() * sizeof(double);
    Contribution mine{"all_gather", -1, bytes, std::vector<char>(bytes)};
    if (bytes > 0) std::memcpy(mine.payload.data(), values.data(), bytes);
    const std::vector<Contribution> all = world_->rendezvous(rank_, std::move(mine));
    std::vector<double> result(values.size() * all.size());
    for (std::size_t r = 0; r < all.size(); ++r) {
        if (bytes > 0) std::memcpy(result.data() + r * values.size(), all[r].payload.data(), bytes);
    }
    ++collectives_;
    return result;
}

void ThreadComm::send(const void* data, std::size_t bytes, int destination, int tag) {
    if (destination < 0 || destination >= size() || destination == rank_) {
        throw CommError("send: rank " + std::to_string(rank_) + " to invalid destination " + std::to_string(destination));
    }
    if (bytes == 0) return;
    world_->send(rank_, destination, tag, data, bytes);
}

void ThreadComm::recv(void* data, std::size_t bytes, int source, int tag) {
    if (source < 0 || source >= size() || source == rank_) {
        throw CommError("recv: rank " + std::to_string(rank_) + " from invalid source " + std::to_string(source));
    }
    if (bytes == 0) return;
    world_->recv(source, rank_, tag, data, bytes);
}

void ThreadComm::abort(int code) { world_->abort(rank_, code); }

void run_ranks(int ranks, const std::function<void(distributed::Comm&)>& body, const ThreadCommOptions& options) {
    if (ranks < 1) throw std::invalid_argument("run_ranks: ranks must be at least 1");
    auto world = std::make_shared<ThreadWorld>(ranks, options);
    std::mutex mutex;
    std::exception_ptr first, first_secondary;
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
        threads.emplace_back([&, r] {
            ThreadComm comm(world, r);
            try {
                body(comm);
            } catch (const Released&) {
                std::lock_guard<std::mutex> lock(mutex);
                if (!first_secondary) first_secondary = std::current_exception();
            } catch (const CommAborted& e) {
                std::lock_guard<std::mutex> lock(mutex);
                if (e.secondary()) {
                    if (!first_secondary) first_secondary = std::current_exception();
                } else if (!first) {
                    first = std::current_exception();
                }
            } catch (const std::exception& e) {
                world->fail("rank " + std::to_string(r) + " failed: " + e.what());
                std::lock_guard<std::mutex> lock(mutex);
                if (!first) first = std::current_exception();
            } catch (...) {
                world->fail("rank " + std::to_string(r) + " failed");
                std::lock_guard<std::mutex> lock(mutex);
                if (!first) first = std::current_exception();
            }
            world->finish(r);
        });
    }
    for (std::thread& t : threads) t.join();
    if (first) std::rethrow_exception(first);
    if (first_secondary) std::rethrow_exception(first_secondary);
}

}  // namespace attnbatch::testing
