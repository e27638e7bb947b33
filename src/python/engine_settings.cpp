#include "engine_settings.hpp"

#include <cmath>

#include "amx_permission.hpp"
#include "attnbatch/error.hpp"
#include "attnbatch/io/models/weights_spec.hpp"
#include "attnbatch/kernels/threads.hpp"
#include "row_block_variable.hpp"
#include "run_options.hpp"

namespace attnbatch::python {

namespace {

[[noreturn]] void usage(const std::string& message) { throw Error(exit_usage, message); }
[[noreturn]] void invalid(const std::string& message) { throw Error(exit_invalid_input, message); }

std::string str(std::int64_t v) { return std::to_string(v); }

// heads divides `width`, the last axis of `what`.
void expect_heads_divide(std::int64_t heads, std::int64_t width, const std::string& what) {
    if (width % heads != 0) {
        usage("heads=" + str(heads) + " does not divide the last axis of " + what + " (" + str(width) +
              "); expected a width H*d with H = heads");
    }
}

// G from the keys' width when kv_heads is not given: as many K/V heads as the width holds.
std::int64_t kv_heads_of(const AttentionRequest& r, std::int64_t d_k, std::int64_t key_width, const std::string& what) {
    if (r.kv_heads != 0) {
        if (r.kv_heads < 1 || r.heads % r.kv_heads != 0) {
            usage("kv_heads=" + str(r.kv_heads) + " does not divide heads=" + str(r.heads) + "; expected G >= 1 dividing H");
        }
        if (key_width != r.kv_heads * d_k) {
            invalid(what + " has width " + str(key_width) + ", expected G*d_k = " + str(r.kv_heads) + "*" + str(d_k) + " = " +
                    str(r.kv_heads * d_k) + " (kv_heads=" + str(r.kv_heads) + ")");
        }
        return r.kv_heads;
    }
    if (d_k <= 0 || key_width % d_k != 0 || key_width / d_k < 1 || r.heads % (key_width / d_k) != 0) {
        invalid(what + " has width " + str(key_width) + ", expected H*d_k = " + str(r.heads * d_k) +
                ", or G*d_k for G K/V heads dividing H = " + str(r.heads) + " (d_k = " + str(d_k) + ")");
    }
    return key_width / d_k;
}

// A weights file's spec for matrices given as arrays, after the rules of `run --weights` (docs/formats.md)
// on their shapes.
io::WeightsSpec weights_spec_of(const WeightArrays& w, std::int64_t d) {
    io::WeightsSpec spec;
    spec.path = "projections";
    const auto shape = [](const std::vector<std::int64_t>& s) { return "[" + str(s[0]) + ", " + str(s[1]) + "]"; };
    for (const auto& [name, s] : {std::pair<const char*, const std::vector<std::int64_t>*>{"w_q", &w.w_q}, {"w_k", &w.w_k}, {"w_v", &w.w_v}}) {
        if ((*s)[0] != d) {
            invalid(std::string("projections['") + name + "'] has shape " + shape(*s) + ", expected [d, ...] with d = " + str(d) +
                    ", the last axis of x");
        }
    }
    spec.d_in = d;
    spec.qk_width = w.w_q[1];
    spec.k_width = w.w_k[1];
    spec.v_width = w.w_v[1];
    spec.has_w_o = !w.w_o.empty();
    spec.d_out = spec.has_w_o ? w.w_o[1] : 0;
    const auto bias = [](const std::vector<float>& b, std::int64_t width, const char* name) {
        if (!b.empty() && static_cast<std::int64_t>(b.size()) != width) {
            invalid(std::string("projections['") + name + "'] has " + str(static_cast<std::int64_t>(b.size())) +
                    " values, expected " + str(width) + " (the columns of its matrix)");
        }
        return !b.empty();
    };
    spec.has_b_q = bias(w.values.b_q, spec.qk_width, "b_q");
    spec.has_b_k = bias(w.values.b_k, spec.k_width, "b_k");
    spec.has_b_v = bias(w.values.b_v, spec.v_width, "b_v");
    spec.has_b_o = bias(w.values.b_o, spec.d_out, "b_o");
    if (spec.has_b_o && !spec.has_w_o) invalid("projections has 'b_o' without 'w_o'");
    return spec;
}

}  // namespace

EngineSettings engine_settings(const AttentionRequest& r) {
    EngineSettings e;
    io::InputSpec& spec = e.spec;
    // heads 0: not given, the weights file's attribute (only with a weights file).
    if (r.heads < 0 || (r.heads == 0 && r.weights_path.empty())) usage("heads=" + str(r.heads) + " is not a positive number of heads");
    if (r.kv_heads < 0) usage("kv_heads=" + str(r.kv_heads) + " is negative; expected G >= 1");
    if (r.threads < 0 || r.threads > kernels::max_threads) {
        usage("threads=" + str(r.threads) + ": expected None (automatic) or a count from 1 to " + str(kernels::max_threads));
    }
    spec.path = "<arrays>";
    spec.n = r.n;
    spec.len = r.len;
    spec.heads = r.heads;
    spec.dtype = io::DataType::float32;
    if (r.qkv) {
        spec.mode = io::InputMode::qkv;
        spec.layout = io::QkvLayout::packed;
        expect_heads_divide(r.heads, r.q_width, "q");
        spec.d_k = r.q_width / r.heads;
        spec.kv_heads = kv_heads_of(r, spec.d_k, r.k_width, "k");
        if (r.v_width % spec.kv_heads != 0) {
            invalid("v has width " + str(r.v_width) + ", not a multiple of G = " + str(spec.kv_heads) + " K/V heads (the keys')");
        }
        spec.d_v = r.v_width / spec.kv_heads;
    } else {
        spec.mode = io::InputMode::embeddings;
        spec.d = r.x_width;
        if (!r.weight_arrays && r.weights_path.empty()) {
            expect_heads_divide(r.heads, r.x_width, "x");
            if (r.kv_heads != 0 && r.kv_heads != r.heads) {
                usage("kv_heads=" + str(r.kv_heads) + " needs separate keys and values, but without projections Q = K = V = x, "
                      "split into H = " + str(r.heads) + " heads; hint: give projections, or q, k and v");
            }
            spec.d_k = spec.d_v = r.x_width / r.heads;
            spec.kv_heads = r.heads;
        } else if (r.weight_arrays) {
            spec.weights = weights_spec_of(*r.weight_arrays, r.x_width);
            expect_heads_divide(r.heads, spec.weights->qk_width, "projections['w_q']");
            spec.d_k = spec.weights->qk_width / r.heads;
            spec.kv_heads = kv_heads_of(r, spec.d_k, spec.weights->key_width(), "projections['w_k']");
            if (spec.weights->v_width % spec.kv_heads != 0) {
                invalid("projections['w_v'] has " + str(spec.weights->v_width) + " columns, not a multiple of G = " +
                        str(spec.kv_heads) + " K/V heads");
            }
            spec.d_v = spec.weights->v_width / spec.kv_heads;
            if (spec.weights->has_w_o && r.weight_arrays->w_o[0] != r.heads * spec.d_v) {
                invalid("projections['w_o'] has " + str(r.weight_arrays->w_o[0]) + " rows, expected H*d_v = " +
                        str(r.heads * spec.d_v));
            }
            e.weights = r.weight_arrays->values;
        } else {
            // A weights file: the command line's own rules and reader.
            io::WeightsRequest request;
            request.heads = r.heads;
            request.kv_heads = r.kv_heads;
            request.d = r.x_width;
            request.d_source = "the array x";
            const io::DescribedWeights described = io::describe_weights(r.weights_path, request);
            spec.weights = described.spec;
            spec.heads = described.heads;
            spec.kv_heads = described.kv_heads;
            spec.d_k = spec.weights->qk_width / spec.heads;
            spec.d_v = spec.weights->v_width / spec.kv_heads;
            e.weights = io::read_weights(*spec.weights);
        }
    }
    if (r.rope_theta < 0 || !std::isfinite(r.rope_theta)) usage("rope_theta: expected a positive base such as 10000 (None: off)");
    if (r.rope_theta > 0 && spec.d_k % 2 != 0) {
        usage("rope_theta needs an even d_k (rotary embeddings turn pairs of columns), but d_k = " + str(spec.d_k));
    }
    if (r.scale < 0 || !std::isfinite(r.scale)) usage("scale: expected a positive number (None: 1/sqrt(d_k))");

    // As the job resolves them (distributed/job.cpp): the same scale bits, the same backend.
    distributed::AttentionSettings& a = e.attention;
    kernels::AttentionSpec requested;
    requested.causal = r.causal;
    requested.scale = r.scale;  // 0: 1/sqrt(d_k)
    requested.rope_theta = r.rope_theta;
    a.kernel.kind = kernels::KernelKind::blocked;
    a.kernel.isa = kernels::Isa::best;
    requested.precision = cli::parse_precision(r.precision, a.kernel.kind);
    a.spec = requested.resolved(spec.d_k);
    a.kernel.precision = a.spec.precision;
    cli::resolve_isa_for(a.kernel.isa, a.kernel.precision);
    a.kernel.amx_permitted = a.kernel.precision == kernels::Precision::bf16 && cli::amx_permitted();
    cli::apply_row_block_variable();  // ATTNBATCH_AVX512_ROWS, read at each call as the command line reads it
    a.kernel.threads = r.threads;  // 0: the StepComputer takes OpenMP's default, as the job does

    e.layout = io::output_layout_for(spec);
    if (r.maps == "none") e.layout.save_weights = io::SaveWeights::none;
    else if (r.maps == "all") e.layout.save_weights = io::SaveWeights::all;
    else if (r.maps == "mean") e.layout.save_weights = io::SaveWeights::mean;
    else usage("return_maps: '" + r.maps + "' is not one of None, 'all', 'mean'");
    if (r.maps_dtype == "f32") e.layout.weights_dtype = io::WeightsDtype::f32;
    else if (r.maps_dtype == "f16") e.layout.weights_dtype = io::WeightsDtype::f16;
    else usage("maps_dtype: '" + r.maps_dtype + "' is not one of 'f32', 'f16'");
    return e;
}

}  // namespace attnbatch::python
