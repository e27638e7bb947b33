#!/usr/bin/python3
"""Checks the #include lines of src/ and include/ against the layering of attnbatch.

usage: check_layering.py [ROOT]        (ROOT: the repository, by default this script's ../..)

The layers, lowest first: kernels <- io <- distributed <- cli <- python (the Python module's
bindings, which stand on the command line's option parsers and `run`). A file belongs to the layer of
its folder, src/<layer>/ or include/attnbatch/<layer>/; include/attnbatch/error.hpp is shared
by io, distributed and cli, not by the kernels. io is split into rooms, lowest first:
h5 <- output <- models <- input, each file in src/io/<room>/ or include/attnbatch/io/<room>/:

  h5      the checked HDF5 wrappers, MPI-IO access, dataset rules and file schemas;
  output  the output file and its journal, staging, publication and path rules (writing any
          file goes through them);
  models  the projection-weights format (its rules, reader and writer) and model import;
  input   describing, validating, scanning, reading and writing a run's input (an input
          may carry projection weights).

The rules:

  layers        a file includes files of its own layer and of lower layers only;
  rooms         an io file lies in a room, and includes files of its own room and of lower
                rooms only;
  HDF5          <hdf5.h>, <hdf5_hl.h>, <H5*.h> only in io;
  HDF5 inside   no file of distributed or cli, and no public header of io's output, models
                and input rooms, reaches an HDF5 header through the project's headers,
                however indirectly (hid_t stays inside io); python neither;
  MPI           <mpi.h> (and Open MPI's other mpi*.h) only in distributed (the MPI Comm) and
                io (parallel HDF5 opens files through MPI-IO); never in cli, python or
                kernels (python hands mpi4py's communicator to distributed as an address);
  kernels       a kernel file includes only the C and C++ standard libraries, intrinsics
                headers, <omp.h>, and kernel files.

Prints one line per broken rule, "FILE:LINE: #include X: RULE", and exits 1 when any rule is
broken; 0 and one summary line otherwise. The rules but "HDF5 inside" judge direct includes
only: what a header pulls in is checked where that header lives.
"""
import os
import re
import sys

LAYERS = ("kernels", "io", "distributed", "cli", "python")
SHARED_ERROR = "error"  # include/attnbatch/error.hpp: above the kernels, below io
ORDER = {"kernels": 0, SHARED_ERROR: 1, "io": 2, "distributed": 3, "cli": 4, "python": 5}

# io's rooms, lowest first (see the docstring).
IO_ROOMS = ("h5", "output", "models", "input")
ROOM_ORDER = {room: rank for rank, room in enumerate(IO_ROOMS)}
# Who must not reach HDF5 through any chain of project includes: every file of these layers,
# and the public headers of these io rooms.
HDF5_FREE_LAYERS = ("distributed", "cli", "python")
HDF5_FREE_PUBLIC_ROOMS = ("output", "models", "input")

SOURCE_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".ipp", ".inl", ".tpp", ".c", ".cc", ".cpp", ".cxx")

CXX_STANDARD = set("""
    algorithm any array atomic barrier bit bitset cassert ccomplex cctype cerrno cfenv cfloat charconv chrono
    cinttypes ciso646 climits clocale cmath codecvt compare complex concepts condition_variable coroutine csetjmp
    csignal cstdalign cstdarg cstdbool cstddef cstdint cstdio cstdlib cstring ctgmath ctime cuchar cwchar cwctype
    deque exception execution filesystem format forward_list fstream functional future initializer_list iomanip
    ios iosfwd iostream istream iterator latch limits list locale map memory memory_resource mutex new numbers
    numeric optional ostream queue random ranges ratio regex scoped_allocator semaphore set shared_mutex
    source_location span sstream stack stdexcept stop_token streambuf string string_view strstream syncstream
    system_error thread tuple type_traits typeindex typeinfo unordered_map unordered_set utility valarray variant
    vector version
""".split())
C_STANDARD = set("""
    assert.h complex.h ctype.h errno.h fenv.h float.h inttypes.h iso646.h limits.h locale.h math.h setjmp.h
    signal.h stdalign.h stdarg.h stdatomic.h stdbool.h stddef.h stdint.h stdio.h stdlib.h stdnoreturn.h string.h
    tgmath.h threads.h time.h uchar.h wchar.h wctype.h
""".split())
# Compiler-provided headers for vector instructions and CPU feature queries.
INTRINSICS = re.compile(r"^([a-z0-9_]*intrin\.h|arm_(neon|sve|fp16|bf16|acle)\.h|cpuid\.h)$")
OPENMP = {"omp.h"}

HDF5 = re.compile(r"^(hdf5(_hl)?\.h|H5\w*\.h)$")
MPI = re.compile(r"^(mpi|mpio|mpi-ext|mpi_portable_platform|mpif)\.h$")
# Third-party headers that only some layers may include: (pattern, layers, rule).
RESTRICTED = [
    (HDF5, {"io"}, "HDF5 headers belong to io only"),
    (MPI, {"io", "distributed"}, "MPI headers belong to distributed (the MPI Comm) and io (MPI-IO file access) only"),
]
# Inside distributed only the MPI Comm and MPI's lifetime talk MPI (src/distributed/mpi_*);
# everything else goes through the Comm seam, so that it runs on one process without MPI.
MPI_FILES_IN_DISTRIBUTED = re.compile(r"^mpi_")
KERNEL_RULE = "kernels include only the C/C++ standard library, intrinsics headers, <omp.h> and kernel files"

INCLUDE = re.compile(r'^\s*#\s*include\s*(?:([<"])([^>"]+)[>"]|(.*))')


def layer_of(relative):
    """The layer of a repository-relative path, or None when it lies in no layer."""
    parts = relative.split("/")
    if len(parts) >= 3 and parts[0] == "src" and parts[1] in LAYERS:
        return parts[1]
    if len(parts) >= 3 and parts[:2] == ["include", "attnbatch"]:
        if len(parts) == 3 and parts[2] == "error.hpp":
            return SHARED_ERROR
        if len(parts) >= 4 and parts[2] in LAYERS:
            return parts[2]
    return None


def room_of(relative):
    """The io room of a repository-relative io path, or None when it lies in none."""
    parts = relative.split("/")
    if parts[:2] == ["src", "io"] and len(parts) >= 4 and parts[2] in IO_ROOMS:
        return parts[2]
    if parts[:3] == ["include", "attnbatch", "io"] and len(parts) >= 5 and parts[3] in IO_ROOMS:
        return parts[3]
    return None


def rooms_at_or_below(room):
    return ", ".join(IO_ROOMS[:ROOM_ORDER[room] + 1])


def describe_layer(layer):
    return "include/attnbatch/error.hpp" if layer == SHARED_ERROR else layer


def allowed_below(layer):
    names = [describe_layer(other) for other, rank in sorted(ORDER.items(), key=lambda item: item[1])
             if rank <= ORDER[layer] and not (layer == "kernels" and other == SHARED_ERROR)]
    return ", ".join(names)


def code_lines(text):
    """(line number, line) with comments removed, so that commented-out includes do not count."""
    in_comment = False
    for number, line in enumerate(text.splitlines(), 1):
        kept = ""
        rest = line
        while rest:
            if in_comment:
                end = rest.find("*/")
                if end < 0:
                    rest = ""
                else:
                    in_comment, rest = False, rest[end + 2:]
            else:
                start_block, start_line = rest.find("/*"), rest.find("//")
                if start_line >= 0 and (start_block < 0 or start_line < start_block):
                    kept, rest = kept + rest[:start_line], ""
                elif start_block >= 0:
                    kept, rest, in_comment = kept + rest[:start_block] + " ", rest[start_block + 2:], True
                else:
                    kept, rest = kept + rest, ""
        yield number, kept


def resolve(root, including, name, quoted):
    """The repository-relative path of a project file `name` refers to, or None (a system or
    third-party header). Quoted names are looked up next to the including file first, as the
    compiler does, then in its layer's private folder src/<layer>/ (io's sources include
    "h5/check.hpp" so); both forms then under include/."""
    candidates = []
    if quoted:
        candidates.append(os.path.join(os.path.dirname(os.path.join(root, including)), name))
        layer = layer_of(including)
        if layer in LAYERS:
            candidates.append(os.path.join(root, "src", layer, name))
        if layer == "python":  # the bindings see the command line's private headers
            candidates.append(os.path.join(root, "src", "cli", name))
    candidates.append(os.path.join(root, "include", name))
    for candidate in candidates:
        if os.path.isfile(candidate):
            relative = os.path.relpath(os.path.realpath(candidate), os.path.realpath(root)).replace(os.sep, "/")
            if not relative.startswith("../"):
                return relative
    if name.startswith("attnbatch/"):
        return "include/" + name  # not written yet, or misspelt: judged by where it claims to be
    return None


def check_include(root, relative, layer, delimiter, name):
    """The rule an include breaks, or None."""
    quoted = delimiter == '"'
    target = resolve(root, relative, name, quoted)
    if target is not None:
        target_layer = layer_of(target)
        if target_layer is None:
            return "includes %s, which is in no layer" % target
        if ORDER[target_layer] > ORDER[layer] or (layer == "kernels" and target_layer == SHARED_ERROR):
            if target_layer == SHARED_ERROR:
                return "kernels must not include include/attnbatch/error.hpp (shared by io, distributed and cli only)"
            return "upward include: %s must not include %s (%s may include only %s)" % (
                layer, target_layer, layer, allowed_below(layer))
        room, target_room = room_of(relative), room_of(target)
        if layer == "io" and target_layer == "io" and room and target_room and ROOM_ORDER[target_room] > ROOM_ORDER[room]:
            return "upward include inside io: %s must not include %s (%s may include only %s)" % (
                room, target_room, room, rooms_at_or_below(room))
        return None
    for pattern, layers, rule in RESTRICTED:
        if pattern.match(os.path.basename(name)):
            if layer not in layers:
                return "%s (found in %s)" % (rule, layer)
            if pattern is MPI and layer == "distributed" and not MPI_FILES_IN_DISTRIBUTED.match(os.path.basename(relative)):
                return "%s (found in distributed outside src/distributed/mpi_*)" % rule
            return None
    if layer == "kernels":
        if name in CXX_STANDARD or name in C_STANDARD or INTRINSICS.match(name) or name in OPENMP:
            return None
        return KERNEL_RULE
    return None


def source_files(root):
    for top in ("src", "include"):
        for directory, subdirectories, files in os.walk(os.path.join(root, top)):
            subdirectories.sort()
            for file in sorted(files):
                if file.endswith(SOURCE_SUFFIXES):
                    yield os.path.relpath(os.path.join(directory, file), root).replace(os.sep, "/")


def parse_includes(root, relative):
    """(line number, delimiter, name, computed text) of each #include of a file."""
    with open(os.path.join(root, relative), encoding="utf-8", errors="replace") as f:
        text = f.read()
    found = []
    for number, line in code_lines(text):
        match = INCLUDE.match(line)
        if match:
            found.append((number,) + match.groups())
    return found


def shown(delimiter, name, computed):
    if delimiter is None:
        return "#include %s" % computed.strip()
    return "#include %s%s%s" % (delimiter, name, '"' if delimiter == '"' else ">")


def must_stay_hdf5_free(relative):
    layer = layer_of(relative)
    if layer in HDF5_FREE_LAYERS:
        return True
    return layer == "io" and relative.startswith("include/") and room_of(relative) in HDF5_FREE_PUBLIC_ROOMS


def hdf5_chains(root, files, includes):
    """For each project file that reaches an HDF5 header through project includes, the chain:
    [file, ..., the file that includes it, "<hdf5 header>"]."""
    chains, visiting = {}, set()

    def chain_of(relative):
        if relative in chains:
            return chains[relative]
        if relative in visiting or relative not in includes:
            return None
        visiting.add(relative)
        found = None
        for _number, delimiter, name, _computed in includes[relative]:
            if delimiter is None:
                continue
            target = resolve(root, relative, name, delimiter == '"')
            if target is None:
                if HDF5.match(os.path.basename(name)):
                    found = [relative, "<%s>" % name]
                    break
                continue
            below = chain_of(target)
            if below:
                found = [relative] + below
                break
        visiting.discard(relative)
        chains[relative] = found
        return found

    for relative in files:
        chain_of(relative)
    return chains


def check_tree(root):
    """(violation lines, number of files checked)."""
    violations = []
    files = list(source_files(root))
    includes = {}
    for relative in files:
        layer = layer_of(relative)
        if layer is None:
            violations.append("%s:1: (file): in no layer; put it under src/<layer>/ or include/attnbatch/<layer>/ "
                              "(layers: %s)" % (relative, ", ".join(LAYERS)))
            continue
        if layer == "io" and room_of(relative) is None:
            violations.append("%s:1: (file): in no io room; put it under src/io/<room>/ or include/attnbatch/io/<room>/ "
                              "(rooms: %s)" % (relative, ", ".join(IO_ROOMS)))
        includes[relative] = parse_includes(root, relative)
        for number, delimiter, name, computed in includes[relative]:
            if delimiter is None:
                rule = "a computed include cannot be checked; name the header"
            else:
                rule = check_include(root, relative, layer, delimiter, name)
            if rule:
                violations.append("%s:%d: %s: %s" % (relative, number, shown(delimiter, name, computed), rule))
    chains = hdf5_chains(root, files, includes)
    for relative in files:
        if relative not in includes or not must_stay_hdf5_free(relative):
            continue
        for number, delimiter, name, computed in includes[relative]:
            target = resolve(root, relative, name, delimiter == '"') if delimiter else None
            if target and chains.get(target):
                violations.append("%s:%d: %s: HDF5 stays inside io, but this reaches %s through %s" % (
                    relative, number, shown(delimiter, name, computed), chains[target][-1], " -> ".join(chains[target][:-1])))
    return violations, len(files)


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__)
        return 2
    root = argv[1] if len(argv) == 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    root = os.path.abspath(root)
    if not os.path.isdir(os.path.join(root, "src")):
        print("check_layering.py: %s has no src/ folder" % root)
        return 2
    violations, checked = check_tree(root)
    for violation in violations:
        print(violation)
    if violations:
        print("layering: %d violation(s) in %d files checked" % (len(violations), checked))
        return 1
    print("layering: %d files checked, no violations" % checked)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
