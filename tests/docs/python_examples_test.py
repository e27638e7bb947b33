#!/usr/bin/python3
"""docs/python.md's examples run as shown, and so does README.md's Python example (on the files
its Quick start generates), which points to the page.

usage: python_examples_test.py BUILD_DIR MPIEXEC PYTHON WORKDIR

In WORKDIR, with `build` linking to BUILD_DIR and PYTHONPATH=BUILD_DIR/python as the page
says, takes its code blocks in order: a ```python block whose first line is `# NAME.py` is
saved as NAME.py; any other ```python block runs with PYTHON and must exit 0 and print, for
each `print(...)   # output` comment that reads as output (a tuple, a number, True or
False), that text on a line it prints; an indented
block runs through the shell (`mpirun` is MPIEXEC, `/usr/bin/python3` is PYTHON) and must
exit 0.
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, exit_status, fresh_directory, mpi_env, run_with_timeout  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def blocks(text):
    """(kind, lines): "python" for fenced python blocks, "shell" for indented blocks."""
    found, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].startswith("```python"):
            j = lines.index("```", i + 1)
            found.append(("python", lines[i + 1:j]))
            i = j + 1
        elif lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            block = []
            while i < len(lines) and lines[i].startswith("    "):
                block.append(lines[i][4:])
                i += 1
            found.append(("shell", block))
        else:
            i += 1
    return found


def expected_prints(code):
    """What the print lines say they print: their comment when it starts as output does (a
    tuple, a number, True or False), up to a colon that starts prose."""
    expected = []
    for line in code:
        match = re.match(r"\s*print\(.*\)\s+# ([(\d]|True|False)(.*)$", line)
        if match:
            expected.append((match.group(1) + match.group(2)).split(":")[0].strip())
    return expected


def main():
    build, mpiexec, python, work = sys.argv[1:5]
    fresh_directory(work)
    os.symlink(os.path.abspath(build), os.path.join(work, "build"))
    env = mpi_env(PYTHONPATH=os.path.join(os.path.abspath(build), "python"))
    with open(os.path.join(ROOT, "README.md")) as f:
        check("docs/python.md" in f.read(), "README.md does not link docs/python.md")
    with open(os.path.join(ROOT, "docs", "python.md")) as f:
        page = f.read()
    ran = 0
    for number, (kind, code) in enumerate(blocks(page)):
        if kind == "python" and re.match(r"# \w+\.py$", code[0]):
            with open(os.path.join(work, code[0][2:]), "w") as f:
                f.write("\n".join(code) + "\n")
            continue
        if kind == "python":
            script = os.path.join(work, f"block{number}.py")
            with open(script, "w") as f:
                f.write("\n".join(code) + "\n")
            command = [python, script]
        else:
            text = "\n".join(code).replace("mpirun ", mpiexec + " ", 1).replace("/usr/bin/python3", python)
            if text.startswith("export ") or "cmake --install" in text:
                continue  # the installation's own commands: covered by python.install
            command = ["bash", "-c", text]
        result = run_with_timeout(command, 300, cwd=work, env=env)
        ran += 1
        shown = " ".join(code)[:80]
        if result is None:
            check(False, f"block {number} ({shown}...) did not end within 300 s")
            continue
        print(f"--- block {number}: exit {result.returncode}\n{result.stdout}", end="")
        check(result.returncode == 0, f"block {number} ({shown}...): exit {result.returncode}: {result.stderr.strip()[-1500:]}")
        printed = result.stdout.splitlines()
        for want in (expected_prints(code) if kind == "python" else []):
            check(any(want in line for line in printed), f"block {number}: no printed line shows {want!r}")
    check(ran >= 5, f"only {ran} blocks ran")

    # README.md's Python example, on the files its Quick start's generate line makes.
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    generate = next((line.strip() for line in readme.splitlines() if line.strip().startswith("build/attnbatch generate")), None)
    section = re.split(r"^## ", readme, flags=re.M)
    python_section = next((part for part in section if part.startswith("From Python\n")), "")
    example = [line[4:] for line in python_section.splitlines() if line.startswith("    ")]
    check(generate is not None and example, "README.md lacks its generate line or its Python example")
    if generate and example:
        readme_dir = os.path.join(work, "readme")
        fresh_directory(readme_dir)
        os.symlink(os.path.abspath(build), os.path.join(readme_dir, "build"))
        result = run_with_timeout(["bash", "-c", generate], 300, cwd=readme_dir, env=env)
        check(result is not None and result.returncode == 0, f"README's {generate!r} failed")
        with open(os.path.join(readme_dir, "example.py"), "w") as f:
            f.write("\n".join(example) + "\n")
        result = run_with_timeout([python, "example.py"], 300, cwd=readme_dir, env=env)
        check(result is not None and result.returncode == 0,
              "README.md's Python example failed: " + ("timeout" if result is None else result.stderr.strip()[-1500:]))
        check(os.path.exists(os.path.join(readme_dir, "py_out.h5")), "README.md's Python example wrote no py_out.h5")
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
