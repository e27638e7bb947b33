// What we write, h5py reads: half precision as numpy float16, labels, attributes, strings.
#include "support/child_process.hpp"
#include "support/h5_files.hpp"
#include "support/temp_dir.hpp"

#include "attnbatch/kernels/half.hpp"

namespace attnbatch::io {
namespace {

using testing::TempDir;

TEST(H5pyInterop, HalfTypeReadsAsFloat16WithTheRightValues) {
    if (!testing::h5py_available()) GTEST_SKIP() << "no h5py for " ATTNBATCH_H5PY_PYTHON;
    const TempDir dir;
    const std::string path = dir.file("half.h5");
    const std::vector<float> values{0.0f, 1.0f, -2.5f, 0.333251953125f, 65504.0f, 6.103515625e-05f, -0.0f};
    {
        const File file = File::create(path);
        std::vector<std::uint16_t> bits;
        for (const float value : values) bits.push_back(kernels::float_to_half(value));
        testing::put(file, "/h", Datatype::float16(), {bits.size()}, bits);
        // float32 memory written into a float16 dataset: HDF5 converts.
        const Dataset converted = Dataset::create(file, "/c", Datatype::float16(), {2});
        const std::vector<float> small{0.5f, -8.0f};
        write_slab(converted, Slab{}, small.data(), small.size());
    }
    const testing::Outcome result = testing::python(R"(
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], 'r') as f:
    h = f['h']
    assert h.dtype == np.float16, h.dtype
    expected = np.array([0.0, 1.0, -2.5, 0.333251953125, 65504.0, 6.103515625e-05, -0.0], dtype=np.float16)
    assert np.array_equal(h[()], expected), (h[()], expected)
    assert np.signbit(h[6])
    c = f['c']
    assert c.dtype == np.float16 and list(c[()]) == [0.5, -8.0], c[()]
print('ok')
)",
                                                    {path});
    EXPECT_EQ(result.status, 0) << result.out;
    EXPECT_NE(result.out.find("ok"), std::string::npos) << result.out;
}

TEST(H5pyInterop, LabelsAttributesStringsAndGzip) {
    if (!testing::h5py_available()) GTEST_SKIP() << "no h5py for " ATTNBATCH_H5PY_PYTHON;
    const TempDir dir;
    const std::string path = dir.file("meta.h5");
    {
        const File file = File::create(path);
        DatasetCreation creation{{2, 3}, 6, false, 0.0};
        const Dataset dataset = Dataset::create(file, "/x", Datatype::float32(), {4, 3}, creation);
        const std::vector<float> values = testing::ramp(12);
        write_slab(dataset, Slab{}, values.data(), values.size());
        set_dimension_labels(dataset, {"N", "D"});
        set_int_attribute(file, "complete", 1);
        set_real_attribute(file, "scale", 0.5);
        set_text_attribute(file, "version", "0.1.0");
        set_int_array_attribute(dataset, "range", {2, 4});
        write_text_dataset(file, "/config", "heads = 2\n");
    }
    const testing::Outcome result = testing::python(R"(
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], 'r') as f:
    x = f['x']
    assert [d.label for d in x.dims] == ['N', 'D'], [d.label for d in x.dims]
    assert x.compression == 'gzip' and x.shuffle and x.chunks == (2, 3)
    assert np.allclose(x[()].ravel(), [0.25 * (i % 17) - 2 for i in range(12)])
    assert int(f.attrs['complete']) == 1 and float(f.attrs['scale']) == 0.5
    assert f.attrs['version'] == '0.1.0', repr(f.attrs['version'])
    assert list(x.attrs['range']) == [2, 4]
    assert f['config'].asstr()[()] == 'heads = 2\n'
print('ok')
)",
                                                    {path});
    EXPECT_EQ(result.status, 0) << result.out;
}

}  // namespace
}  // namespace attnbatch::io
