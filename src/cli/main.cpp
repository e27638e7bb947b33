// attnbatch: batch scaled dot-product self-attention over HDF5 datasets.
#include <csignal>
#include <cstring>

#include "attnbatch/distributed/stop_request.hpp"
#include "attnbatch/io/h5/library.hpp"
#include "commands.hpp"

namespace {

// A scheduler's stop signal may come at any moment of a run, start-up included, and until a
// handler exists its default action kills the process. So the handlers of `run` are
// installed before anything else: from the executable's .preinit_array, which the dynamic
// loader runs once every library is loaded and relocated but before any of their
// constructors, and glibc passes it main()'s arguments. From there on a signal is a stop
// request, answered once MPI is up (stop_request.hpp). Other subcommands keep the default:
// they have nothing to checkpoint.
void install_stop_handlers_of_run(int argc, char** argv, char** /*environment*/) {
    if (argc > 1 && std::strcmp(argv[1], "run") == 0) attnbatch::distributed::install_stop_handlers();
}

__attribute__((section(".preinit_array"), used)) void (*const preinit_stop_handlers)(int, char**, char**) =
    install_stop_handlers_of_run;

}  // namespace

int main(int argc, char** argv) {
    install_stop_handlers_of_run(argc, argv, nullptr);  // idempotent; for a loader without preinit
    // Past a file-size limit (ulimit -f, RLIMIT_FSIZE) the kernel sends SIGXFSZ, whose default
    // action kills the process without a word. Ignored, write() fails with EFBIG instead, and
    // the failure is reported like any other I/O error (exit 4, naming the file).
    std::signal(SIGXFSZ, SIG_IGN);
    // A reader of the printed report that goes away (`run ... | head -1`, a closed terminal)
    // must not end the job: by default the next line printed raised SIGPIPE and killed a run
    // mid-way, its output left as .partial. Ignored, the stream just stops taking text (write
    // fails with EPIPE, std::cout's state goes bad) and the job carries on to its file.
    std::signal(SIGPIPE, SIG_IGN);
    // Before MPI starts (io/h5/library.hpp says why).
    attnbatch::io::start_hdf5();
    return attnbatch::cli::run_cli(argc, argv);
}
