// attnbatch._core: the compiled half of the Python package (attnbatch/__init__.py holds the
// public functions, their checks of the caller's arrays and their docstrings). Arrays arrive
// float32 and C-contiguous, checked; their data are read in place and the results handed back
// in the buffers the compute wrote, so nothing is copied on either side. The GIL is released
// while the kernels (or the job) run.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <csignal>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "attnbatch/distributed/handle_comm.hpp"
#include "attnbatch/distributed/mpi_session.hpp"
#include "attnbatch/distributed/step_computer.hpp"
#include "attnbatch/distributed/stop_request.hpp"
#include "attnbatch/error.hpp"
#include "attnbatch/io/h5/library.hpp"
#include "amx_permission.hpp"
#include "engine_settings.hpp"
#include "row_block_variable.hpp"
#include "run_on.hpp"

namespace py = pybind11;
namespace dist = attnbatch::distributed;

namespace attnbatch::python {

namespace {

// The caller's array as float32 C-contiguous data; the Python side has converted or refused
// anything else, so this only guards against a copy made behind its back.
const float* float_data(const py::object& object, const char* name) {
    if (object.is_none()) return nullptr;
    const auto array = py::reinterpret_borrow<py::array>(object);
    if (!py::isinstance<py::array_t<float>>(array) || !(array.flags() & py::array::c_style)) {
        throw py::type_error(std::string("attnbatch._core: ") + name + " must be a C-contiguous float32 array");
    }
    return static_cast<const float*>(array.data());
}

std::vector<std::int64_t> shape_of(const py::dict& d, const char* key) {
    const py::object value = d[key];
    const auto a = py::reinterpret_borrow<py::array>(value);
    return std::vector<std::int64_t>(a.shape(), a.shape() + a.ndim());
}

std::vector<float> values_of(const py::dict& d, const char* key) {
    if (!d.contains(key)) return {};
    const py::object value = d[key];
    if (value.is_none()) return {};
    const auto a = py::reinterpret_borrow<py::array>(value);
    const float* p = float_data(a, key);
    return std::vector<float>(p, p + a.size());
}

WeightArrays weight_arrays_of(const py::dict& d) {
    WeightArrays w;
    w.values.w_q = values_of(d, "w_q");
    w.values.w_k = values_of(d, "w_k");
    w.values.w_v = values_of(d, "w_v");
    w.values.w_o = values_of(d, "w_o");
    w.values.b_q = values_of(d, "b_q");
    w.values.b_k = values_of(d, "b_k");
    w.values.b_v = values_of(d, "b_v");
    w.values.b_o = values_of(d, "b_o");
    w.w_q = shape_of(d, "w_q");
    w.w_k = shape_of(d, "w_k");
    w.w_v = shape_of(d, "w_v");
    if (!w.values.w_o.empty()) w.w_o = shape_of(d, "w_o");
    return w;
}

// Results live in the StepOutputs the compute filled; each returned array keeps it alive.
template <class T>
py::array view(const std::shared_ptr<dist::StepOutputs>& owner, const T* data, std::vector<py::ssize_t> shape,
               const py::dtype& dtype) {
    auto* keep = new std::shared_ptr<dist::StepOutputs>(owner);
    py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<dist::StepOutputs>*>(p); });
    return py::array(dtype, std::move(shape), data, base);
}

py::tuple attention(const py::object& x, const py::object& q, const py::object& k, const py::object& v,
                    const py::array_t<std::int32_t, py::array::c_style>& lengths, const py::dict& options,
                    const py::object& projections, const std::string& weights_path, bool return_lse) {
    AttentionRequest request;
    const py::array first = py::reinterpret_borrow<py::array>(x.is_none() ? q : x);
    request.qkv = x.is_none();
    request.n = first.shape(0);
    request.len = first.shape(1);
    if (request.qkv) {
        request.q_width = py::reinterpret_borrow<py::array>(q).shape(2);
        request.k_width = py::reinterpret_borrow<py::array>(k).shape(2);
        request.v_width = py::reinterpret_borrow<py::array>(v).shape(2);
    } else {
        request.x_width = first.shape(2);
    }
    request.heads = options["heads"].cast<int>();
    request.kv_heads = options["kv_heads"].cast<int>();
    request.causal = options["causal"].cast<bool>();
    request.scale = options["scale"].cast<double>();
    request.rope_theta = options["rope_theta"].cast<double>();
    request.precision = options["precision"].cast<std::string>();
    request.threads = options["threads"].cast<int>();
    request.maps = options["maps"].cast<std::string>();
    request.maps_dtype = options["maps_dtype"].cast<std::string>();
    if (!projections.is_none()) request.weight_arrays = weight_arrays_of(projections.cast<py::dict>());
    request.weights_path = weights_path;

    dist::StepData data;
    data.x = float_data(x, "x");
    data.q = float_data(q, "q");
    data.k = float_data(k, "k");
    data.v = float_data(v, "v");
    io::InputBlock in;
    in.first = 0;
    in.count = request.n;
    in.lengths.assign(lengths.data(), lengths.data() + lengths.size());

    auto outputs = std::make_shared<dist::StepOutputs>();
    io::OutputBlock block;
    EngineSettings e;
    {
        py::gil_scoped_release unlocked;
        e = engine_settings(request);
        dist::StepComputer computer(e.spec, e.weights, e.attention, e.layout);
        dist::ComputeTally tally;
        computer.compute(in, data, *outputs, block, tally);
    }
    const py::ssize_t n = request.n, len = request.len;
    py::object lse = py::none(), maps = py::none();
    py::array output = view(outputs, block.output, {n, len, static_cast<py::ssize_t>(e.layout.d_out)}, py::dtype::of<float>());
    if (return_lse) lse = view(outputs, block.lse, {n, static_cast<py::ssize_t>(e.spec.heads), len}, py::dtype::of<float>());
    if (e.layout.save_weights != io::SaveWeights::none) {
        const std::vector<py::ssize_t> shape{n, static_cast<py::ssize_t>(e.layout.weights_heads()), len, len};
        maps = e.layout.weights_dtype == io::WeightsDtype::f16 ? view(outputs, block.attention_f16, shape, py::dtype("float16"))
                                                                : view(outputs, block.attention_f32, shape, py::dtype::of<float>());
    }
    return py::make_tuple(output, lse, maps);
}

// The process's MPI when no communicator is given: initialised on the first run (unless
// someone, mpi4py say, already has) and finalised by finalize_mpi() at interpreter exit, so
// that a second run in the same process finds it still up.
std::unique_ptr<dist::MpiSession>& process_mpi() {
    static std::unique_ptr<dist::MpiSession> session;
    return session;
}

// The job's stop handlers for SIGTERM, SIGUSR1 and SIGINT while it runs (a Ctrl-C in a notebook
// stops it at its next checkpoint, resumable), the caller's back afterwards.
class StopHandlers {
public:
    StopHandlers() {
        for (int i = 0; i < 3; ++i) sigaction(kSignals[i], nullptr, &saved_[i]);
        dist::clear_stop_request();
        dist::install_stop_handlers();
    }
    ~StopHandlers() {
        for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &saved_[i], nullptr);
        dist::clear_stop_request();
    }
    StopHandlers(const StopHandlers&) = delete;
    StopHandlers& operator=(const StopHandlers&) = delete;

private:
    static constexpr int kSignals[3] = {SIGTERM, SIGUSR1, SIGINT};
    struct sigaction saved_[3] {};
};

void run(const std::vector<std::string>& args, std::uintptr_t comm_address) {
    py::gil_scoped_release unlocked;
    cli::apply_row_block_variable();  // as `attnbatch run` does
    StopHandlers handlers;
    if (comm_address != 0) {
        const dist::MpiSession mpi;  // MPI is up (mpi4py's): this neither initialises nor finalises it
        const std::unique_ptr<dist::Comm> comm = dist::comm_over_handle(reinterpret_cast<const void*>(comm_address));
        cli::run_on(mpi, *comm, args);
        return;
    }
    if (!process_mpi()) process_mpi() = std::make_unique<dist::MpiSession>();
    const std::unique_ptr<dist::Comm> comm = process_mpi()->world();
    cli::run_on(*process_mpi(), *comm, args);
}

}  // namespace

}  // namespace attnbatch::python

PYBIND11_MODULE(_core, m) {
    m.doc() = "attnbatch's compiled core; use the functions of the attnbatch package";
    // Before MPI, as in main() (io/h5/library.hpp says why).
    attnbatch::io::start_hdf5();
    py::register_exception_translator([](std::exception_ptr failure) {
        const auto error_for = [](int code, const char* message) {
            return py::module_::import("attnbatch._errors").attr("error_for")(code, message);
        };
        try {
            if (failure) std::rethrow_exception(failure);
        } catch (const attnbatch::Error& e) {
            const py::object error = error_for(e.exit_code(), e.what());
            PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
        } catch (const std::bad_alloc&) {
            const py::object error = error_for(static_cast<int>(attnbatch::exit_out_of_memory), attnbatch::out_of_memory_message);
            PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
        }
    });
    m.def("attention", &attnbatch::python::attention, py::arg("x"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("lengths"),
          py::arg("options"), py::arg("projections"), py::arg("weights_path"), py::arg("return_lse"));
    m.def("run", &attnbatch::python::run, py::arg("args"), py::arg("comm_address"));
    m.def("bf16_tiles_refused", [] { return attnbatch::cli::amx_linux_refusal(); },
          "Why bf16 runs without AMX tiles on a CPU that has them, when Linux refused them; \"\" otherwise.");
    m.def("finalize_mpi", [] { attnbatch::python::process_mpi().reset(); },
          "Finalises MPI if a run of this process initialised it (at interpreter exit).");
}
