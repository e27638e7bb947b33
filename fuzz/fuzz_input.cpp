// libFuzzer target: input validation and the first reads, on small HDF5 files.
//
// The fuzzer's bytes are the whole file. describe_input() takes paths (it stats the file,
// checks the signature, then opens it), so the image is written to /dev/shm, one file per
// process, rather than opened through the core driver. Each image is tried three ways:
//   embeddings  --input F                        (/embeddings, /lengths when present)
//   qkv         --input F --query /query --key /key --value /value
//   weights     --input F --weights F            (/embeddings with /w_q /w_k /w_v ... beside it)
// --heads is 0 (unset), 1 or 2 by the image size modulo 3. After a successful describe_input,
// the first (up to) two sequences are read with InputReader and the projections with
// read_weights, and what validation promised is checked: positive sizes, lengths in [0, L],
// finite values.
//
// Expected outcomes: success, or Error (Error) with exit code 2, 3 or 4. Anything else
// escaping, a crash, a hang, UB or a leak is a finding.
//
// Work proportional to a huge declared shape is not a finding (a chunked dataset of
// 2^31 x 2^31 x 8 with nothing stored is a few hundred bytes): the finiteness scan runs only
// when every dataset holds at most kMaxScanned elements, and reads only when a sequence
// holds at most kMaxSequence. A dataset of more than 2^60 elements must be refused (the
// contract of describe_input): the scans and buffers count its bytes in size_t.
#include <fcntl.h>
#include <unistd.h>

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "attnbatch/error.hpp"
#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/input/input_reader.hpp"
#include "attnbatch/io/models/weights_reader.hpp"

namespace {

using namespace attnbatch;
using namespace attnbatch::io;

constexpr std::uint64_t kMaxScanned = std::uint64_t{1} << 20;
constexpr std::uint64_t kMaxSequence = std::uint64_t{1} << 18;
constexpr std::size_t kScanBytes = std::size_t{1} << 16;  // small blocks: several per scan

std::string g_path;

[[noreturn]] void finding(const std::string& what) {
    std::fprintf(stderr, "fuzz_input finding: %s\n", what.c_str());
    std::abort();
}

// a * b, or nothing when it does not fit 64 bits.
bool multiply(std::uint64_t& product, std::int64_t factor) {
    if (factor < 0) return false;
    return !__builtin_mul_overflow(product, static_cast<std::uint64_t>(factor), &product);
}

struct Size {
    bool overflow = false;
    std::uint64_t largest = 0;  // elements of the largest dataset
    std::uint64_t sequence = 0;  // elements of one sequence of the largest data dataset
};

Size sizes(const InputSpec& spec) {
    Size size;
    const auto dataset = [&](std::initializer_list<std::int64_t> dims, bool data) {
        std::uint64_t count = 1;
        bool first = true;
        std::uint64_t per_sequence = 1;
        for (const std::int64_t d : dims) {
            if (!multiply(count, d)) size.overflow = true;
            if (!first && !multiply(per_sequence, d)) size.overflow = true;
            first = false;
        }
        size.largest = std::max(size.largest, count);
        if (data) size.sequence = std::max(size.sequence, per_sequence);
    };
    if (spec.mode == InputMode::embeddings) {
        dataset({spec.n, spec.len, spec.d}, true);
    } else {
        dataset({spec.n, spec.len, spec.heads, spec.d_k}, true);
        dataset({spec.n, spec.len, spec.heads, spec.d_v}, true);
    }
    if (spec.weights) {
        const WeightsSpec& w = *spec.weights;
        dataset({w.d_in, w.qk_width}, false);
        dataset({w.d_in, w.v_width}, false);
        if (w.has_w_o) dataset({w.v_width, w.d_out}, false);
    }
    return size;
}

void expect_input_error(const Error& e) {
    const int code = e.exit_code();
    if (code != exit_usage && code != exit_invalid_input && code != exit_io) {
        finding("Error with exit code " + std::to_string(code) + ": " + e.what());
    }
}

void expect_finite(const std::vector<float>& values, const char* what) {
    for (const float v : values) {
        if (!std::isfinite(v)) finding(std::string("validated input read back a non-finite value in ") + what);
    }
}

void check_spec(const InputSpec& spec) {
    if (spec.n < 1 || spec.len < 1 || spec.heads < 1 || spec.d_k < 1 || spec.d_v < 1) {
        finding("describe_input accepted an empty axis: N " + std::to_string(spec.n) + " L " + std::to_string(spec.len) +
                " H " + std::to_string(spec.heads) + " d_k " + std::to_string(spec.d_k) + " d_v " +
                std::to_string(spec.d_v));
    }
}

void try_options(InputOptions options) {
    options.scan_bytes = kScanBytes;
    try {
        options.check_finite = false;
        InputSpec spec = describe_input(options);
        check_spec(spec);
        const Size size = sizes(spec);
        if (size.overflow || size.largest > (std::uint64_t{1} << 60)) {
            finding("describe_input accepted a dataset of more than 2^60 elements");
        }
        if (size.largest > kMaxScanned) return;
        options.check_finite = true;
        spec = describe_input(options);
        check_spec(spec);
        if (size.sequence > kMaxSequence) return;

        InputReader reader(spec);
        InputBlock block;
        const std::int64_t count = std::min<std::int64_t>(spec.n, 2);
        reader.read(0, count, block);
        if (block.first != 0 || block.count != count || block.lengths.size() != static_cast<std::size_t>(count)) {
            finding("InputReader::read returned a block of the wrong extent");
        }
        for (const std::int32_t length : block.lengths) {
            if (length < 0 || length > spec.len) {
                finding("validated lengths read back " + std::to_string(length) + " outside [0, " +
                        std::to_string(spec.len) + "]");
            }
        }
        expect_finite(block.x, "x");
        expect_finite(block.q, "q");
        expect_finite(block.k, "k");
        expect_finite(block.v, "v");
        if (spec.weights) {
            const ProjectionWeights w = read_weights(*spec.weights);
            const auto n = [](std::int64_t a, std::int64_t b) { return static_cast<std::size_t>(a * b); };
            if (w.w_q.size() != n(spec.weights->d_in, spec.weights->qk_width) ||
                w.w_v.size() != n(spec.weights->d_in, spec.weights->v_width)) {
                finding("read_weights returned matrices of the wrong size");
            }
            expect_finite(w.w_q, "w_q");
            expect_finite(w.w_k, "w_k");
            expect_finite(w.w_v, "w_v");
            expect_finite(w.w_o, "w_o");
        }
    } catch (const Error& e) {
        expect_input_error(e);
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    g_path = "/dev/shm/attnbatch-fuzz-input-" + std::to_string(::getpid()) + ".h5";
    std::atexit([] { std::remove(g_path.c_str()); });
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const int fd = ::open(g_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) finding("cannot write " + g_path);
    for (std::size_t done = 0; done < size;) {
        const ssize_t n = ::write(fd, data + done, size - done);
        if (n <= 0) finding("cannot write " + g_path);
        done += static_cast<std::size_t>(n);
    }
    ::close(fd);

    InputOptions options;
    options.input_path = g_path;
    options.heads = static_cast<int>(size % 3);
    try_options(options);

    InputOptions qkv = options;
    qkv.query = "/query";
    qkv.key = "/key";
    qkv.value = "/value";
    try_options(qkv);

    InputOptions weights = options;
    weights.weights_path = g_path;
    try_options(weights);

    // Every file, dataset, type, space and list opened on the way is closed again (RAII).
    const ssize_t open = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (open != 0) finding(std::to_string(open) + " HDF5 objects left open");
    return 0;
}
