#include "attnbatch/distributed/mpi_session.hpp"

#include <link.h>
#include <mpi.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>
#include <fstream>
#include <string>
#include <vector>

#include "attnbatch/distributed/launcher_sockets.hpp"
#include "attnbatch/distributed/launcher_watchdog.hpp"
#include "attnbatch/io/h5/mpi_io.hpp"
#include "mpi_comm.hpp"

namespace attnbatch::distributed {

namespace {

// One process under MPI: no MPI traffic for collectives, but files opened for --io parallel
// still go through MPI-IO (the parallel write path needs the mpio driver, and its bytes must
// be those of a many-rank run).
class SingleRankComm final : public Comm {
public:
    SingleRankComm() : serial_(make_serial_comm()) {}
    int rank() const override { return 0; }
    int size() const override { return 1; }
    void barrier() override {}
    void broadcast(void* data, std::size_t bytes, int root) override { serial_->broadcast(data, bytes, root); }
    std::int64_t max(std::int64_t value) override { return value; }
    double max(double value) override { return value; }
    double sum(double value) override { return value; }
    std::vector<double> all_gather(const std::vector<double>& values) override { return values; }
    void send(const void* data, std::size_t bytes, int destination, int tag) override {
        serial_->send(data, bytes, destination, tag);
    }
    void recv(void* data, std::size_t bytes, int source, int tag) override { serial_->recv(data, bytes, source, tag); }
    [[noreturn]] void abort(int code) override {
        serial_->abort(code);
        std::_Exit(code);  // not reached; virtual calls do not carry [[noreturn]]
    }
    io::FileAccess collective_file_access() const override { return io::mpi_io_access(MPI_COMM_WORLD); }

private:
    std::unique_ptr<Comm> serial_;
};

// Whether an Open MPI parameter file (the user's or Debian's system one) selects a pml; an
// exclusion ("pml = ^ucx", as Debian ships) selects none.
bool pml_chosen_in_parameter_files() {
    std::vector<std::string> files = {"/etc/openmpi/openmpi-mca-params.conf"};
    if (const char* home = std::getenv("HOME")) files.push_back(std::string(home) + "/.openmpi/mca-params.conf");
    for (const std::string& path : files) {
        std::ifstream file(path);
        std::string line;
        while (std::getline(file, line)) {
            const std::size_t start = line.find_first_not_of(" \t");
            if (start == std::string::npos || line.compare(start, 3, "pml") != 0) continue;
            const std::size_t equals = line.find('=', start + 3);
            if (equals == std::string::npos || line.find_first_not_of(" \t", start + 3) != equals) continue;
            const std::size_t value = line.find_first_not_of(" \t", equals + 1);
            if (value != std::string::npos && line[value] != '^') return true;
        }
    }
    return false;
}

// Whether this process was started alone, not by a launcher (mpirun, srun, another PMI).
bool started_alone() {
    return std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr && std::getenv("PMIX_RANK") == nullptr &&
           std::getenv("PMI_RANK") == nullptr && std::getenv("SLURM_PROCID") == nullptr;
}

// Open MPI's messaging layer for a job whose ranks all share this node: ob1 over shared
// memory, named rather than found by MPI_Init's probe of every layer, which here spent 0.2 s
// of a 0.26-0.45 s MPI_Init loading the PSM and PSM2 libraries to look for their hardware.
// Known before MPI_Init for a job started by Open MPI's mpirun (it says how many ranks the job
// and this node have) and for a process started alone (a singleton). A job whose ranks span
// nodes, or that was started otherwise (srun), keeps Open MPI's choice: across nodes the
// fabric's own layer (cm over PSM2 or OFI, ucx) may be the one to take. Only a default:
// OMPI_MCA_pml (the user's, or mpirun --mca pml) or a pml chosen in a parameter file wins.
// Returns who chose the layer.
std::string prefer_shared_memory_messaging() {
    if (std::getenv("OMPI_MCA_pml") != nullptr) return "OMPI_MCA_pml";
    if (pml_chosen_in_parameter_files()) return "an Open MPI parameter file";
    const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
    const char* on_node = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const bool one_node = size != nullptr && on_node != nullptr && std::string(size) == on_node;
    if (!one_node && !started_alone()) return "Open MPI";
    ::setenv("OMPI_MCA_pml", "ob1", 0);
    return "attnbatch's one-node default";
}

using Components = std::map<std::string, std::vector<std::string>>;  // by framework, sorted

// Notes the component `name` names when it reads <before><framework>_<component><after> for
// one of `frameworks` ("base" is the framework's own, not a component).
void note_component(Components& found, const std::vector<std::string>& frameworks, const std::string& name,
                    const std::string& before, const std::string& after) {
    for (const std::string& framework : frameworks) {
        const std::string prefix = before + framework + "_";
        if (name.size() <= prefix.size() + after.size() || name.compare(0, prefix.size(), prefix) != 0 ||
            name.compare(name.size() - after.size(), after.size(), after) != 0) {
            continue;
        }
        const std::string component = name.substr(prefix.size(), name.size() - prefix.size() - after.size());
        std::vector<std::string>& components = found[framework];
        if (component != "base" && std::find(components.begin(), components.end(), component) == components.end()) {
            components.push_back(component);
        }
    }
}

Components sorted(Components found) {
    for (auto& [framework, components] : found) std::sort(components.begin(), components.end());
    return found;
}

// The components of Open MPI's frameworks ("pml", "btl") still open after MPI_Init:
// Open MPI closes the layers it did not select and the transports that found nothing to do
// (shared memory without a second rank on the node), and a closed component's control
// variables ("btl_tcp_major_version") leave MPI_T's list. Empty for other MPI libraries. One
// MPI_T session for all: each MPI_T_init_thread costs about 0.2-0.3 s here (it loads every
// component), on rank 0 while the other ranks wait at start-up.
Components open_components(const std::vector<std::string>& frameworks) {
    Components found;
    int provided = 0, count = 0;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return found;
    if (MPI_T_cvar_get_num(&count) == MPI_SUCCESS) {
        for (int i = 0; i < count; ++i) {
            char name[256];
            int name_length = sizeof name, description_length = 0, verbosity = 0, binding = 0, scope = 0;
            MPI_Datatype type;
            MPI_T_enum values;
            if (MPI_T_cvar_get_info(i, name, &name_length, &verbosity, &type, &values, nullptr, &description_length, &binding,
                                    &scope) == MPI_SUCCESS) {
                note_component(found, frameworks, name, "", "_major_version");
            }
        }
    }
    MPI_T_finalize();
    return sorted(std::move(found));
}

// The same, found without MPI_T: Open MPI loads each component from a shared object of its own,
// mca_<framework>_<component>.so, and unloads the ones it closes once it has selected, so the
// objects loaded after MPI_Init are the components still open (tests/distributed's
// mpi_messaging_probe checks the two agree). Here this takes microseconds, where
// MPI_T_init_thread took 0.22 s of wall time on rank 0 while the other ranks waited: it loads
// every component of every framework, PSM's and PSM2's among them, whose libraries sleep in
// their constructors while they look for their hardware. Empty when the components were built
// into the library (or for another MPI): then only MPI_T knows.
Components loaded_components(const std::vector<std::string>& frameworks) {
    struct Search {
        const std::vector<std::string>* frameworks;
        Components found;
    } search{&frameworks, {}};
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) {
            auto& s = *static_cast<Search*>(data);
            const char* path = info->dlpi_name ? info->dlpi_name : "";
            const char* slash = std::strrchr(path, '/');
            note_component(s.found, *s.frameworks, slash ? slash + 1 : path, "mca_", ".so");
            return 0;
        },
        &search);
    return sorted(std::move(search.found));
}

// Private session directories are named attnbatch-mpi-<PID namespace>-<PID>-XXXXXX, so that
// any process of the same namespace can tell whether a directory's owner is alive (a
// container sharing /tmp with the host has other PIDs). This is the name up to the PID.
std::string session_namespace_prefix() {
    std::error_code error;
    const std::string ns = std::filesystem::read_symlink("/proc/self/ns/pid", error).string();  // "pid:[4026531836]"
    const auto open = ns.find('['), close = ns.find(']');
    const std::string id = open != std::string::npos && close > open ? ns.substr(open + 1, close - open - 1) : "0";
    return "attnbatch-mpi-" + id + "-";
}

// Removes the private session directories in `tmp` that processes killed by SIGKILL left (a
// job's time limit, the OOM killer): those of this PID namespace and user whose process is
// gone. A directory whose PID was reused by a live process stays until that one ends.
void remove_stale_session_directories(const std::string& tmp, const std::string& namespace_prefix) {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(tmp, error)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(namespace_prefix, 0) != 0) continue;
        char* end = nullptr;
        const long pid = std::strtol(name.c_str() + namespace_prefix.size(), &end, 10);
        if (pid <= 0 || end == nullptr || *end != '-') continue;
        struct stat info {};
        if (::lstat(entry.path().c_str(), &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != ::getuid()) continue;
        if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
        std::error_code ignored;
        std::filesystem::remove_all(entry.path(), ignored);
    }
}

// A directory of this process's own for Open MPI's session files, set as its top session
// directory; empty when the user chose one. Every isolated singleton names its session
// directory the same, <tmp>/ompi.<host>.<uid>/jf.0/1/0: two started at once (ctest -j2, a
// job array's single-process runs on one node) raced, the first to finish removing jf.0 while
// the other created jf.0/1, and the second's MPI_Init failed ("A call to mkdir was unable to
// create the desired directory"). Without session directories at all, MPI-IO's shared file
// pointer component prints an error for every file it opens.
std::string make_private_session_directory() {
    if (std::getenv("OMPI_MCA_orte_top_session_dir") != nullptr) return {};
    const char* tmp_variable = std::getenv("TMPDIR");
    const std::string tmp = tmp_variable && *tmp_variable ? tmp_variable : "/tmp";
    const std::string namespace_prefix = session_namespace_prefix();
    remove_stale_session_directories(tmp, namespace_prefix);
    std::string pattern = tmp + "/" + namespace_prefix + std::to_string(::getpid()) + "-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) return {};  // Open MPI's default then, as before
    ::setenv("OMPI_MCA_orte_top_session_dir", pattern.c_str(), 1);
    return pattern;
}

bool shared_memory_transport(const std::string& btl) { return btl == "vader" || btl == "sm" || btl == "smcuda"; }

}  // namespace

MpiSession::MpiSession() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
        // Before MPI_Init, whose PMIx handshake is where a killed rank can leave mpirun stuck
        // (launcher_watchdog.hpp), and before any of MPI's descriptors exist.
        const LauncherWatch launcher = open_mpi_launcher_watch();
        if (launcher.launcher != 0) watchdog_ = start_launcher_watchdog(launcher);
        // The main thread waits in MPI while the compute thread works: waiting must yield the
        // core rather than spin on it. Only a default; the user's setting wins.
        ::setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
        pml_chosen_by_ = prefer_shared_memory_messaging();
        // A process started alone is an MPI job of one (a singleton). By default Open MPI 4.1
        // forks a daemon for it, which MPI_Comm_spawn alone needs, attnbatch never. Measured
        // here: the daemon made MPI_Init+MPI_Finalize about 0.7 s slower, and about one exit in
        // 30-260 died of SIGSEGV in Open MPI's progress thread during MPI_Finalize (an event of
        // an already unloaded component), after the run had ended. Isolated: 0 in 200.
        if (started_alone()) {
            ::setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
            private_session_directory_ = make_private_session_directory();
        }
        int provided = 0;
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
        owned_ = true;
    }
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
}

MpiSession::~MpiSession() {
    if (owned_) {
        send_launcher_messages_at_once();
        MPI_Finalize();
    }
    release_launcher_watchdog(watchdog_);
    if (!private_session_directory_.empty()) {
        std::error_code ignored;  // what Open MPI left there; nothing else uses the directory
        std::filesystem::remove_all(private_session_directory_, ignored);
    }
}

Messaging MpiSession::messaging(int node_count, int largest_node, bool ask_mpi_t) const {
    Messaging messaging;
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    MPI_Get_library_version(version, &length);
    messaging.library = std::string(version, static_cast<std::size_t>(std::max(0, length)));
    messaging.library = messaging.library.substr(0, messaging.library.find_first_of(",\n"));
    messaging.chosen_by = pml_chosen_by_.empty() ? "the caller of MPI_Init" : pml_chosen_by_;
    Components open;
    if (!ask_mpi_t) open = loaded_components({"pml", "btl"});
    if (open["pml"].empty()) open = open_components({"pml", "btl"});
    // Open MPI 4's btl "sm" is a stub left to tell users who ask for it that vader replaced it:
    // its object stays loaded, but it never carries a message (MPI_T does not list it).
    if (messaging.library.rfind("Open MPI v4.", 0) == 0) {
        std::vector<std::string>& btls = open["btl"];
        btls.erase(std::remove(btls.begin(), btls.end(), "sm"), btls.end());
    }
    // A monitoring layer wraps the real one.
    for (const std::string& layer : open["pml"]) {
        if (layer != "monitoring") messaging.layer = layer;
    }
    if (messaging.layer != "ob1") return messaging;
    for (const std::string& btl : open["btl"]) {
        if (btl == "self") continue;  // a rank's messages to itself
        if (shared_memory_transport(btl) ? largest_node > 1 : node_count > 1) messaging.transports.push_back(btl);
    }
    return messaging;
}

std::unique_ptr<Comm> MpiSession::world() const {
    if (size_ > 1) return make_mpi_comm(MPI_COMM_WORLD);
    return std::make_unique<SingleRankComm>();
}

}  // namespace attnbatch::distributed
