// The value scan as an object: slices of the sequences and the weights, each file opened once,
// the first bad value named as describe_input names it.
#include "support/h5_files.hpp"
#include "support/temp_dir.hpp"

#include "attnbatch/io/input/input_spec.hpp"
#include "attnbatch/io/input/value_scan.hpp"

#include <unistd.h>

#include <cmath>
#include <functional>
#include <limits>

namespace attnbatch::io {
namespace {

using testing::put;
using testing::ramp;

class ValueScan : public ::testing::Test {
protected:
    testing::TempDir dir;
    const std::string input = dir.file("in.h5");
    const std::string weights = dir.file("w.h5");

    // Embeddings [6, 4, 8] with a NaN at (bad_sequence, 2, 3) when bad_sequence >= 0, and
    // projections d = 8 -> 8 with a NaN in /b_v when bad_bias.
    InputSpec make(int bad_sequence, bool bad_bias = false) {
        {
            const File file = File::create(input);
            std::vector<float> x = ramp(6 * 4 * 8);
            if (bad_sequence >= 0) x[static_cast<std::size_t>((bad_sequence * 4 + 2) * 8 + 3)] = std::nanf("");
            put(file, "/embeddings", Datatype::float32(), {6, 4, 8}, x);
        }
        {
            const File file = File::create(weights);
            for (const char* path : {"/w_q", "/w_k", "/w_v"}) put(file, path, Datatype::float32(), {8, 8}, ramp(64));
            std::vector<float> bias = ramp(8);
            if (bad_bias) bias[5] = std::numeric_limits<float>::infinity();
            put(file, "/b_v", Datatype::float32(), {8}, bias);
        }
        InputOptions options;
        options.input_path = input;
        options.weights_path = weights;
        options.check_finite = false;  // the scanner's job here
        return describe_input(options);
    }

    static std::string scan_error(const std::function<void()>& scan) {
        try {
            scan();
        } catch (const Error& error) {
            EXPECT_EQ(error.exit_code(), exit_invalid_input) << error.what();
            return error.what();
        }
        return "";
    }
};

TEST_F(ValueScan, FindsTheBadValueOnlyInTheSliceThatHoldsIt) {
    const InputSpec spec = make(4);
    ValueScanner scanner(spec);
    EXPECT_NO_THROW(scanner.scan_sequences(0, 2));
    EXPECT_NO_THROW(scanner.scan_sequences(2, 4));
    const std::string message = scan_error([&] { scanner.scan_sequences(4, 6); });
    EXPECT_NE(message.find(input + ": dataset /embeddings has a non-finite value (nan) at [4, 2, 3]"), std::string::npos)
        << message;
    EXPECT_NO_THROW(scanner.scan_weights());
}

TEST_F(ValueScan, CountsFromTheSelectedSequences) {
    InputSpec spec = make(4);
    select_sequences(spec, 3, 6);  // sequences 3, 4, 5 of the file are 0, 1, 2 of the selection
    ValueScanner scanner(spec);
    EXPECT_NO_THROW(scanner.scan_sequences(0, 1));
    EXPECT_NE(scan_error([&] { scanner.scan_sequences(1, 2); }).find("at [4, 2, 3]"), std::string::npos);
}

TEST_F(ValueScan, ScansTheWeightsOnRequest) {
    const InputSpec spec = make(-1, true);
    ValueScanner scanner(spec);
    EXPECT_NO_THROW(scanner.scan_sequences(0, 6));
    const std::string message = scan_error([&] { scanner.scan_weights(); });
    EXPECT_NE(message.find(weights + ": dataset /b_v has a non-finite value (inf) at [5]"), std::string::npos) << message;
}

// The input is opened by the first slice and held: removing its name afterwards does not
// stop the later slices (a scanner reopening the file per slice would fail with exit 4).
TEST_F(ValueScan, OpensTheInputOnceForAllSlices) {
    const InputSpec spec = make(5);
    ValueScanner scanner(spec);
    EXPECT_NO_THROW(scanner.scan_sequences(0, 1));
    ASSERT_EQ(::unlink(input.c_str()), 0);
    EXPECT_NO_THROW(scanner.scan_sequences(1, 5));
    EXPECT_NE(scan_error([&] { scanner.scan_sequences(5, 6); }).find("at [5, 2, 3]"), std::string::npos);
}

}  // namespace
}  // namespace attnbatch::io
