// `attnbatch import-weights`: one attention layer of a safetensors model into a weights file
// (io/models/torch_import.hpp does the reading, checking and writing); options and printing here.
#include <iostream>

#include "attnbatch/error.hpp"
#include "attnbatch/io/models/torch_import.hpp"
#include "command_line.hpp"
#include "commands.hpp"

namespace attnbatch::cli {

int import_weights_command(const std::vector<std::string>& args) {
    const CommandSpec spec{
        "import-weights",
        "Writes the projection weights file `run --weights` reads from one attention layer of a PyTorch or\n"
        "Hugging Face model stored as safetensors: nn.MultiheadAttention (in_proj_weight, out_proj.*),\n"
        "BERT-like (self.query/key/value, output.dense) or Llama-like (q_proj/k_proj/v_proj/o_proj, fewer\n"
        "K/V heads). PyTorch's [out, in] matrices become [in, out]; float16/bfloat16 become float32. Head\n"
        "counts come from --heads/--kv-heads, else from a config.json beside the model (which also gives\n"
        "rope_theta and model_type, recorded), else (K/V heads) from the shapes. The file records heads,\n"
        "kv_heads, the source and the tensors read, so `run --weights W.h5` needs no --heads.",
        "  attnbatch import-weights --input mha.safetensors --output w.h5 --heads 4\n"
        "  attnbatch import-weights --input model.safetensors --output w.h5 --prefix model.layers.0.self_attn\n"
        "  attnbatch import-weights --input bert/model.safetensors --output w.h5 --prefix bert.encoder.layer.3.attention\n"};
    po::options_description options("import-weights options");
    options.add_options()
        ("input", po::value<std::string>()->required(), "the model's .safetensors file")
        ("output", po::value<std::string>()->required(), "the weights file to write (HDF5)")
        ("prefix", po::value<std::string>()->default_value(""), "the layer: the tensor-name prefix of its attention module [the only one]")
        ("heads", po::value<int>()->default_value(0), "query heads H [config.json's num_attention_heads]")
        ("kv-heads", po::value<int>()->default_value(0), "K/V heads G [config.json's num_key_value_heads, else from the shapes]")
        ("force", po::bool_switch(), "replace an existing --output");
    po::variables_map vm;
    if (!parse_command_line(spec, options, args, vm)) return exit_ok;
    io::ImportRequest request;
    request.input = vm["input"].as<std::string>();
    request.output = vm["output"].as<std::string>();
    request.prefix = vm["prefix"].as<std::string>();
    request.heads = vm["heads"].as<int>();
    request.kv_heads = vm["kv-heads"].as<int>();
    request.force = vm["force"].as<bool>();
    request.generator = std::string("attnbatch import-weights ") + ATTNBATCH_VERSION;
    if (request.heads < 0) throw Error(exit_usage, "--heads: " + std::to_string(request.heads) + " is not a positive number of heads");
    if (request.kv_heads < 0) throw Error(exit_usage, "--kv-heads: " + std::to_string(request.kv_heads) + " is not a positive number of heads");

    const io::ImportedWeights w = io::import_weights(request);
    std::cout << "attnbatch import-weights: " << request.input << " layer "
              << (w.layer.prefix.empty() ? std::string("(top level)") : w.layer.prefix) << " (" << w.layer.naming << ") -> "
              << request.output << '\n'
              << "  d=" << w.d << " H=" << w.heads << " G=" << w.kv_heads << " d_k=" << w.d_k << " d_v=" << w.d_v;
    if (w.d_out > 0) std::cout << " d_out=" << w.d_out;
    if (!w.config_path.empty()) {
        std::cout << "; " << w.config_path;
        if (!w.model_type.empty()) std::cout << " (model_type " << w.model_type << ")";
        if (w.rope_theta > 0) std::cout << ", rope_theta " << w.rope_theta;
    }
    std::cout << '\n';
    for (const auto& [dataset, source] : w.datasets) std::cout << "  " << dataset << " <- " << source << '\n';
    for (const std::string& note : w.notes) std::cout << "  note: " << note << '\n';
    if (w.rope_theta > 0) {
        std::cout << "  run it with rotary embeddings: attnbatch run --weights " << request.output << " --rope-theta "
                  << w.rope_theta << " ...\n";
    }
    return exit_ok;
}

}  // namespace attnbatch::cli
