"""What the Python multi-node tests share: the rig (local-cluster.sh) and mpirun across its
nodes.

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import rig
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RIG = os.path.join(HERE, "local-cluster.sh")
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from harness import fresh_directory, mpi_env  # noqa: E402

SKIP = 77


def command(*args, timeout=120):
    """local-cluster.sh ARGS: (exit code, stdout + stderr)."""
    result = subprocess.run(["bash", RIG, *args], capture_output=True, text=True, timeout=timeout)
    return result.returncode, result.stdout + result.stderr


def require():
    """Exits 77 (skipped) with the rig's own line where namespaces are not permitted, 1 when
    the rig could run but is not up (the fixture test multinode.cluster_up starts it)."""
    code, text = command("check")
    if code == SKIP:
        print(text.strip())
        sys.exit(SKIP)
    code, text = command("status")
    if code != 0:
        print("FAIL: the rig is not up (the fixture test multinode.cluster_up starts it):\n" + text)
        sys.exit(1)


def arguments(doc):
    """A test's ATTNBATCH MPIEXEC WORKDIR (the paths made absolute, WORKDIR emptied), once the
    rig is known to be up (require()); the usage and exit 2 without them."""
    if len(sys.argv) != 4:
        print(doc)
        sys.exit(2)
    require()
    binary, mpiexec, work = os.path.realpath(sys.argv[1]), sys.argv[2], os.path.realpath(sys.argv[3])
    fresh_directory(work)
    return binary, mpiexec, work


def env(**extra):
    """The environment for mpirun across the rig: its `env` exports (rsh agent, subnet,
    keepalives, SLURM_CONF) over mpi_env()'s root and oversubscription settings."""
    code, text = command("env")
    if code != 0:
        raise RuntimeError("local-cluster.sh env: " + text)
    variables = mpi_env(**extra)
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            name, value = line[len("export "):].split("=", 1)
            variables[name] = value
    return variables


def info():
    """{node: (address, memory limit in bytes or None)} from local-cluster.sh info."""
    code, text = command("info")
    nodes = {}
    for line in text.splitlines():
        name, address, memory, _ = line.split()
        nodes[name] = (address, None if memory == "-" else int(memory))
    return nodes


def hostfile(path, nodes, slots):
    """A hostfile of the first `nodes` nodes with `slots` slots each."""
    code, text = command("hostfile", "--nodes", str(nodes), "--slots", str(slots))
    if code != 0:
        raise RuntimeError("local-cluster.sh hostfile: " + text)
    with open(path, "w") as f:
        f.write(text)
    return path


def mpirun(mpiexec, hosts, nodes, per_node, program):
    """`program` on `per_node` ranks on each of the first `nodes` nodes, unbound (the nodes
    share this host's cores)."""
    return [mpiexec, "--hostfile", hosts, "-np", str(nodes * per_node), "--map-by", "ppr:%d:node" % per_node,
            "--bind-to", "none", *program]
