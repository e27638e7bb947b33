#include "attnbatch/distributed/agreement.hpp"

#include <cstdint>
#include <cstdlib>
#include <iostream>

namespace attnbatch::distributed {

AgreedError agree(Comm& comm, int code, const std::string& message) {
    // The lowest failing rank wins: with contiguous shares that is the lowest sequence index.
    const std::int64_t size = comm.size();
    const std::int64_t failing = comm.max(code != 0 ? size - comm.rank() : std::int64_t{0});
    if (failing == 0) return {};
    const int root = static_cast<int>(size - failing);
    AgreedError agreed{code, message};
    std::int64_t agreed_code = code;
    comm.broadcast(&agreed_code, sizeof agreed_code, root);
    agreed.code = static_cast<int>(agreed_code);
    broadcast_string(comm, agreed.message, root);
    return agreed;
}

void agree_or_throw(Comm& comm, int code, const std::string& message) {
    const AgreedError agreed = agree(comm, code, message);
    if (agreed.code != 0) throw AgreedFailure(agreed.code, agreed.message);
}

void abort_job(Comm& comm, int code, const std::string& message) {
    std::cerr << "attnbatch run: error: rank " << comm.rank() << ": " << message << '\n';
    std::cerr.flush();
    comm.abort(code);
    std::_Exit(code);  // not reached; virtual calls do not carry [[noreturn]]
}

}  // namespace attnbatch::distributed
