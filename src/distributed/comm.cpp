#include "attnbatch/distributed/comm.hpp"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace attnbatch::distributed {

namespace {

class SerialComm final : public Comm {
public:
    int rank() const override { return 0; }
    int size() const override { return 1; }
    void barrier() override {}
    void broadcast(void*, std::size_t, int) override {}
    std::int64_t max(std::int64_t value) override { return value; }
    double max(double value) override { return value; }
    double sum(double value) override { return value; }
    std::vector<double> all_gather(const std::vector<double>& values) override { return values; }
    void send(const void*, std::size_t, int, int) override {
        throw std::logic_error("SerialComm::send: one rank has no one to send to");
    }
    void recv(void*, std::size_t, int, int) override {
        throw std::logic_error("SerialComm::recv: one rank has no one to receive from");
    }
    [[noreturn]] void abort(int code) override { std::_Exit(code); }
};

}  // namespace

std::unique_ptr<Comm> make_serial_comm() { return std::make_unique<SerialComm>(); }

void broadcast_string(Comm& comm, std::string& text, int root) {
    std::vector<char> bytes(text.begin(), text.end());
    broadcast_vector(comm, bytes, root);
    text.assign(bytes.begin(), bytes.end());
}

}  // namespace attnbatch::distributed
