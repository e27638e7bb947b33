#!/usr/bin/python3
"""check_layering.py on two small trees written here: a clean one it must pass, and the same
with one file per broken rule, where it must fail with exactly the expected lines.

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
# them, and includes that only a comment mentions.
CLEAN = {
    "include/attnbatch/error.hpp": "#pragma once\n#include <stdexcept>\n#include <string>\n",
    "include/attnbatch/kernels/attention.hpp": "#pragma once\n#include <cstddef>\n#include <vector>\n",
    "src/kernels/blocked_impl.hpp": ("#pragma once\n#if defined(__x86_64__)\n#include <immintrin.h>\n#else\n"
                                     "#include <arm_neon.h>\n#endif\n#include \"attnbatch/kernels/attention.hpp\"\n"),
    "src/kernels/blocked.cpp": ("#include \"blocked_impl.hpp\"\n#include <omp.h>\n#include <cmath>\n"
                                "#include <stdint.h>\n#  include   <x86intrin.h>\n"),
    "include/attnbatch/io/h5.hpp": ("#pragma once\n#include <hdf5.h>\n#include \"attnbatch/error.hpp\"\n"
                                    "#include \"attnbatch/kernels/attention.hpp\"\n"),
    "src/io/h5_check.hpp": "#pragma once\n#include <hdf5.h>\n",
    "src/io/h5_labels.cpp": ("#include <H5DSpublic.h>\n#include <mpi.h>\n#include <xxhash.h>\n"
                             "#include \"h5_check.hpp\"\n#include <attnbatch/io/h5.hpp>\n"),
    "include/attnbatch/distributed/mpi_comm.hpp": "#pragma once\n#include <mpi.h>\n#include \"attnbatch/io/h5.hpp\"\n",
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
    "src/io/input.cpp": "#include <string>\n#include \"attnbatch/distributed/plan.hpp\"\n",
    "src/io/paths.cpp": "#include \"../cli/commands.hpp\"\n",
    "include/attnbatch/kernels/half.hpp": "#pragma once\n#include \"attnbatch/io/h5.hpp\"\n",
    "src/cli/run_command.cpp": "#include \"commands.hpp\"\n#include <mpi.h>\n#include <hdf5.h>\n#include <hdf5_hl.h>\n",
    "src/distributed/parallel_io.cpp": "#include <hdf5.h>\n#include <H5FDmpio.h>\n#include <mpi.h>\n",
    "src/kernels/dispatch.cpp": ("#include <cstring>\n#include <unistd.h>\n#include \"attnbatch/error.hpp\"\n"
                                 "#include <boost/align.hpp>\n#include \"../io/h5_check.hpp\"\n#include <mpi.h>\n"
                                 "#include KERNEL_HEADER\n"),
    "src/util/strings.cpp": "#include <string>\n",
}
UPWARD_IO = "upward include: io must not include %s (io may include only kernels, include/attnbatch/error.hpp, io)"
EXPECTED = [
    "src/io/input.cpp:2: #include \"attnbatch/distributed/plan.hpp\": " + UPWARD_IO % "distributed",
    "src/io/paths.cpp:1: #include \"../cli/commands.hpp\": " + UPWARD_IO % "cli",
    "include/attnbatch/kernels/half.hpp:2: #include \"attnbatch/io/h5.hpp\": upward include: kernels must not "
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
    "src/kernels/dispatch.cpp:5: #include \"../io/h5_check.hpp\": upward include: kernels must not include io "
    "(kernels may include only kernels)",
    "src/kernels/dispatch.cpp:6: #include <mpi.h>: MPI headers belong to distributed (the MPI Comm) and io "
    "(MPI-IO file access) only (found in kernels)",
    "src/kernels/dispatch.cpp:7: #include KERNEL_HEADER: a computed include cannot be checked; name the header",
    "src/util/strings.cpp:1: (file): in no layer; put it under src/<layer>/ or include/attnbatch/<layer>/ "
    "(layers: kernels, io, distributed, cli)",
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

    clean = run_checker(clean_root)
    check(clean.returncode == 0, "clean tree: exit %d, expected 0" % clean.returncode)
    check("%d files checked, no violations" % len(CLEAN) in clean.stdout, "clean tree: no summary line")

    broken = run_checker(broken_root)
    check(broken.returncode == 1, "broken tree: exit %d, expected 1" % broken.returncode)
    reported = broken.stdout.splitlines()
    for line in EXPECTED:
        check(line in reported, "broken tree: missing line: " + line)
    summary = "layering: %d violation(s) in %d files checked" % (len(EXPECTED), len(CLEAN) + len(BROKEN))
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
