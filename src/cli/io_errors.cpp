#include "io_errors.hpp"

#include "attnbatch/io/errors.hpp"
#include "attnbatch/io/h5_error.hpp"

namespace attnbatch::cli {

// The io codes equal ours by contract (io/errors.hpp), not by include; these pin it.
static_assert(static_cast<int>(io::exit_usage) == exit_usage);
static_assert(static_cast<int>(io::exit_invalid_input) == exit_invalid_input);
static_assert(static_cast<int>(io::exit_io) == exit_io);

void rethrow_as_user_error() {
    try {
        throw;
    } catch (const io::Error& error) {
        throw UserError(error.exit_code(), error.what());
    } catch (const io::H5Error& error) {
        throw UserError(exit_io, error.what());
    }
}

}  // namespace attnbatch::cli
