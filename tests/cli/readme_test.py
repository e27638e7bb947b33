#!/usr/bin/python3
"""The README stays true to the binary and to the repository.

usage: readme_test.py ATTNBATCH REPOSITORY

- Every option that `attnbatch SUBCOMMAND --help` lists (for every subcommand of
  `attnbatch --help`) appears in README.md as `--name`.
- No link of README.md or jobs/README.md leaves the repository: every link is an anchor of a
  heading of the same page, or a relative path to a file or directory of the repository
  (with an anchor, to a heading of that file); nothing outside it (`../shared/...`, http).
"""
import os
import re
import subprocess
import sys

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL: " + message)


def subcommands(binary):
    usage = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30).stdout
    return re.findall(r"^  ([a-z][a-z-]*)\t", usage, re.M)


def listed_options(binary, command):
    text = subprocess.run([binary, command, "--help"], capture_output=True, text=True, timeout=30).stdout
    return sorted(set(re.findall(r"^\s+(?:-\w \[ )?--([a-z][a-z0-9-]*)", text, re.M)))


def anchor(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(text):
    return {anchor(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def check_links(repository, page):
    path = os.path.join(repository, page)
    with open(path) as f:
        text = f.read()
    # Links outside code: fenced and indented code blocks and inline code are not links.
    prose = re.sub(r"^(    |\t).*$", "", re.sub(r"```.*?```", "", text, flags=re.S), flags=re.M)
    prose = re.sub(r"`[^`\n]*`", "", prose)
    links = re.findall(r"\]\(([^)\s]+)\)", prose)
    check(len(links) > 0 or page != "README.md", "%s: no links found (the parser is broken)" % page)
    for link in links:
        if re.match(r"^[a-z]+:", link):
            check(False, "%s: link %s leaves the repository" % (page, link))
            continue
        target, _, fragment = link.partition("#")
        if not target:
            check(fragment in anchors_of(text), "%s: link #%s names no heading of the page" % (page, fragment))
            continue
        resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
        inside = os.path.commonpath([resolved, os.path.realpath(repository)]) == os.path.realpath(repository)
        check(inside, "%s: link %s leaves the repository" % (page, link))
        check(os.path.exists(resolved), "%s: link %s names nothing in the repository" % (page, link))
        if fragment and inside and os.path.isfile(resolved) and resolved.endswith(".md"):
            with open(resolved) as f:
                check(fragment in anchors_of(f.read()), "%s: link %s names no heading of %s" % (page, link, target))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    binary, repository = os.path.abspath(sys.argv[1]), os.path.realpath(sys.argv[2])
    with open(os.path.join(repository, "README.md")) as f:
        readme = f.read()
    commands = subcommands(binary)
    check(len(commands) >= 6, "attnbatch --help lists %r" % commands)
    documented = set(re.findall(r"--([a-z][a-z0-9-]*)", readme))
    for command in commands:
        options = listed_options(binary, command)
        check(len(options) >= 3, "%s --help lists %r" % (command, options))
        missing = [o for o in options if o not in documented]
        check(not missing, "README.md does not document %s's %s" % (command, ", ".join("--" + o for o in missing)))
    check("../shared" not in readme, "README.md mentions ../shared")
    for page in ("README.md", "jobs/README.md"):
        check_links(repository, page)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("README.md documents every option of %s; its links stay in the repository" % ", ".join(commands))
    return 0


if __name__ == "__main__":
    sys.exit(main())
