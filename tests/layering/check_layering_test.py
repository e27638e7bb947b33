#!/usr/bin/python3
"""check_layering.py on two small trees written here: a clean one it must pass, and the same
with files that break each rule (some replacing clean ones), where it must fail with exactly
the expected lines.

usage: check_layering_test.py WORKDIR
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from harness import check, failures  # noqa: E402

CHECKER = os.path.join(HERE, "check_layering.py")

# Everything a layer may do: its own and lower layers' headers, relative private headers,
# HDF5 and MPI where they belong, intrinsics and OpenMP in the kernels, other libraries above
# them, and includes that only a comment mentions. Inside io: every file in a room, a room
# including its own and lower rooms (private headers found from src/io), HDF5 in the wrappers
# and in sources only, HDF5-free public faces for the rooms above h5 and for the layers above io.
CLEAN = {
    "include/attnbatch/error.hpp": "#pragma once\n#include <stdexcept>\n#include <string>\n",
    "include/attnbatch/kernels/attention.hpp": "#pragma once\n#include <cstddef>\n#include <vector>\n",
    "src/kernels/blocked_impl.hpp": ("#pragma once\n#if defined(__x86_64__)\n#include <immintrin.h>\n#else\n"
                                     "#include <arm_neon.h>\n#endif\n#include \"attnbatch/kernels/attention.hpp\"\n"),
    "src/kernels/blocked.cpp": ("#include \"blocked_impl.hpp\"\n#include <omp.h>\n#include <cmath>\n"
                                "#include <stdint.h>\n#  include   <x86intrin.h>\n"),
    "include/attnbatch/io/h5/h5.hpp": ("#pragma once\n#include <hdf5.h>\n#include \"attnbatch/error.hpp\"\n"
                                       "#include \"attnbatch/kernels/attention.hpp\"\n"),
    "include/attnbatch/io/h5/dims.hpp": "#pragma once\n#include <vector>\n",
    "include/attnbatch/io/h5/file_access.hpp": "#pragma once\n#include <memory>\n#include \"dims.hpp\"\n",
    "src/io/h5/check.hpp": "#pragma once\n#include <hdf5.h>\n",
    "src/io/h5/labels.cpp": ("#include <H5DSpublic.h>\n#include <mpi.h>\n#include <xxhash.h>\n"
                             "#include \"check.hpp\"\n#include <attnbatch/io/h5/h5.hpp>\n"),
    "include/attnbatch/io/output/output_file.hpp": "#pragma once\n#include \"attnbatch/io/h5/file_access.hpp\"\n",
    "src/io/output/output_file.cpp": ("#include \"attnbatch/io/output/output_file.hpp\"\n#include \"h5/check.hpp\"\n"
                                      "#include \"attnbatch/io/h5/h5.hpp\"\n"),
    "include/attnbatch/io/models/weights.hpp": "#pragma once\n#include \"attnbatch/io/output/output_file.hpp\"\n",
    "include/attnbatch/io/input/input_spec.hpp": ("#pragma once\n#include \"attnbatch/io/models/weights.hpp\"\n"
                                                  "#include \"attnbatch/io/h5/dims.hpp\"\n"),
    "src/io/input/input_spec.cpp": ("#include \"attnbatch/io/input/input_spec.hpp\"\n#include \"h5/check.hpp\"\n"
                                    "#include \"output/output_handles.hpp\"\n"),
    "src/io/output/output_handles.hpp": "#pragma once\n#include \"attnbatch/io/h5/h5.hpp\"\n",
    "include/attnbatch/distributed/mpi_comm.hpp": ("#pragma once\n#include <mpi.h>\n"
                                                   "#include \"attnbatch/io/input/input_spec.hpp\"\n"),
    "src/distributed/wall_clock.hpp": "#pragma once\n#include <chrono>\n",
    "src/distributed/plan.cpp": ("#include \"attnbatch/distributed/mpi_comm.hpp\"\n#include \"wall_clock.hpp\"\n"
                                 "#include <unistd.h>\n"),
    "src/cli/commands.hpp": "#pragma once\n#include <string>\n",
    "src/cli/main.cpp": ("#include \"attnbatch/distributed/mpi_comm.hpp\"\n#include \"commands.hpp\"\n"
                         "#include <boost/program_options.hpp>\n"
                         "// #include <mpi.h> is left to distributed\n"
                         "/* not here either:\n#include <hdf5.h>\n*/\n"
                         "int x; /* #include <mpi.h> */ // #include <hdf5.h>\n"),
}

# One file per rule broken, and the line the checker must print for each.
BROKEN = {
    "src/io/input/input_spec.cpp": "#include <string>\n#include \"attnbatch/distributed/plan.hpp\"\n",
    "src/io/h5/paths.cpp": "#include \"../../cli/commands.hpp\"\n",
    "include/attnbatch/kernels/half.hpp": "#pragma once\n#include \"attnbatch/io/h5/h5.hpp\"\n",
    "src/cli/run_command.cpp": "#include \"commands.hpp\"\n#include <mpi.h>\n#include <hdf5.h>\n#include <hdf5_hl.h>\n",
    "src/distributed/parallel_io.cpp": "#include <hdf5.h>\n#include <H5FDmpio.h>\n#include <mpi.h>\n",
    "src/kernels/dispatch.cpp": ("#include <cstring>\n#include <unistd.h>\n#include \"attnbatch/error.hpp\"\n"
                                 "#include <boost/align.hpp>\n#include \"../io/h5/check.hpp\"\n#include <mpi.h>\n"
                                 "#include KERNEL_HEADER\n"),
    "src/util/strings.cpp": "#include <string>\n",
    # Inside io: a file outside the rooms, and includes up the rooms (public and private).
    "src/io/scan.cpp": "#include <vector>\n",
    "include/attnbatch/io/h5/file_kind.hpp": "#pragma once\n#include \"attnbatch/io/output/output_file.hpp\"\n",
    "src/io/output/output_spans.cpp": "#include \"input/value_scan.hpp\"\n",
    "src/io/input/value_scan.hpp": "#pragma once\n",
    # HDF5 leaking upwards through project headers: a public face of a room above h5 that pulls
    # in a wrapper reaches distributed's header, hence distributed's and cli's sources.
    "include/attnbatch/io/models/weights.hpp": ("#pragma once\n#include \"attnbatch/io/output/output_file.hpp\"\n"
                                                "#include \"attnbatch/io/h5/h5.hpp\"\n"),
}
UPWARD_IO = "upward include: io must not include %s (io may include only kernels, include/attnbatch/error.hpp, io)"
LEAK = "HDF5 stays inside io, but this reaches <hdf5.h> through "
EXPECTED = [
    "src/io/input/input_spec.cpp:2: #include \"attnbatch/distributed/plan.hpp\": " + UPWARD_IO % "distributed",
    "src/io/h5/paths.cpp:1: #include \"../../cli/commands.hpp\": " + UPWARD_IO % "cli",
    "include/attnbatch/kernels/half.hpp:2: #include \"attnbatch/io/h5/h5.hpp\": upward include: kernels must not "
    "include io (kernels may include only kernels)",
    "src/cli/run_command.cpp:2: #include <mpi.h>: MPI headers belong to distributed (the MPI Comm) and io "
    "(MPI-IO file access) only (found in cli)",
    "src/cli/run_command.cpp:3: #include <hdf5.h>: HDF5 headers belong to io only (found in cli)",
    "src/cli/run_command.cpp:4: #include <hdf5_hl.h>: HDF5 headers belong to io only (found in cli)",
    "src/distributed/parallel_io.cpp:1: #include <hdf5.h>: HDF5 headers belong to io only (found in distributed)",
    "src/distributed/parallel_io.cpp:2: #include <H5FDmpio.h>: HDF5 headers belong to io only (found in distributed)",
    "src/distributed/parallel_io.cpp:3: #include <mpi.h>: MPI headers belong to distributed (the MPI Comm) and io "
    "(MPI-IO file access) only (found in distributed outside src/distributed/mpi_*)",
    "src/kernels/dispatch.cpp:2: #include <unistd.h>: kernels include only the C/C++ standard library, "
    "intrinsics headers, <omp.h> and kernel files",
    "src/kernels/dispatch.cpp:3: #include \"attnbatch/error.hpp\": kernels must not include "
    "include/attnbatch/error.hpp (shared by io, distributed and cli only)",
    "src/kernels/dispatch.cpp:4: #include <boost/align.hpp>: kernels include only the C/C++ standard library, "
    "intrinsics headers, <omp.h> and kernel files",
    "src/kernels/dispatch.cpp:5: #include \"../io/h5/check.hpp\": upward include: kernels must not include io "
    "(kernels may include only kernels)",
    "src/kernels/dispatch.cpp:6: #include <mpi.h>: MPI headers belong to distributed (the MPI Comm) and io "
    "(MPI-IO file access) only (found in kernels)",
    "src/kernels/dispatch.cpp:7: #include KERNEL_HEADER: a computed include cannot be checked; name the header",
    "src/util/strings.cpp:1: (file): in no layer; put it under src/<layer>/ or include/attnbatch/<layer>/ "
    "(layers: kernels, io, distributed, cli, python)",
    "src/io/scan.cpp:1: (file): in no io room; put it under src/io/<room>/ or include/attnbatch/io/<room>/ "
    "(rooms: h5, output, models, input)",
    "include/attnbatch/io/h5/file_kind.hpp:2: #include \"attnbatch/io/output/output_file.hpp\": upward include "
    "inside io: h5 must not include output (h5 may include only h5)",
    "src/io/output/output_spans.cpp:1: #include \"input/value_scan.hpp\": upward include inside io: output must not "
    "include input (output may include only h5, output)",
    "include/attnbatch/io/models/weights.hpp:3: #include \"attnbatch/io/h5/h5.hpp\": " + LEAK +
    "include/attnbatch/io/h5/h5.hpp",
    "include/attnbatch/io/input/input_spec.hpp:2: #include \"attnbatch/io/models/weights.hpp\": " + LEAK +
    "include/attnbatch/io/models/weights.hpp -> include/attnbatch/io/h5/h5.hpp",
    "include/attnbatch/distributed/mpi_comm.hpp:3: #include \"attnbatch/io/input/input_spec.hpp\": " + LEAK +
    "include/attnbatch/io/input/input_spec.hpp -> include/attnbatch/io/models/weights.hpp -> "
    "include/attnbatch/io/h5/h5.hpp",
    "src/distributed/plan.cpp:1: #include \"attnbatch/distributed/mpi_comm.hpp\": " + LEAK +
    "include/attnbatch/distributed/mpi_comm.hpp -> include/attnbatch/io/input/input_spec.hpp -> "
    "include/attnbatch/io/models/weights.hpp -> include/attnbatch/io/h5/h5.hpp",
    "src/cli/main.cpp:1: #include \"attnbatch/distributed/mpi_comm.hpp\": " + LEAK +
    "include/attnbatch/distributed/mpi_comm.hpp -> include/attnbatch/io/input/input_spec.hpp -> "
    "include/attnbatch/io/models/weights.hpp -> include/attnbatch/io/h5/h5.hpp",
]

def write_tree(root, files):
    shutil.rmtree(root, ignore_errors=True)
    for relative, text in files.items():
        path = os.path.join(root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def run_checker(root):
    result = subprocess.run([sys.executable, CHECKER, root], capture_output=True, text=True, timeout=60)
    print("--- check_layering.py %s: exit %d\n%s%s" % (root, result.returncode, result.stdout, result.stderr), flush=True)
    return result


def main(work):
    clean_root, broken_root = os.path.join(work, "clean"), os.path.join(work, "broken")
    write_tree(clean_root, CLEAN)
    write_tree(broken_root, dict(CLEAN, **BROKEN))
    broken_files = len(set(CLEAN) | set(BROKEN))

    clean = run_checker(clean_root)
    check(clean.returncode == 0, "clean tree: exit %d, expected 0" % clean.returncode)
    check("%d files checked, no violations" % len(CLEAN) in clean.stdout, "clean tree: no summary line")

    broken = run_checker(broken_root)
    check(broken.returncode == 1, "broken tree: exit %d, expected 1" % broken.returncode)
    reported = broken.stdout.splitlines()
    for line in EXPECTED:
        check(line in reported, "broken tree: missing line: " + line)
    summary = "layering: %d violation(s) in %d files checked" % (len(EXPECTED), broken_files)
    for line in reported:
        check(line in EXPECTED or line == summary, "broken tree: unexpected line: " + line)
    check(summary in reported, "broken tree: no summary line %r" % summary)

    missing_root = run_checker(os.path.join(work, "nowhere"))
    check(missing_root.returncode == 2, "a root without src/: exit %d, expected 2" % missing_root.returncode)

    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(os.path.abspath(sys.argv[1])))
