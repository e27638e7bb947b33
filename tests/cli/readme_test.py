#!/usr/bin/python3
"""The manual stays true to the binary: its option reference and its command lines.

usage: readme_test.py ATTNBATCH REPOSITORY

- docs/commands.md has a section `## \`SUBCOMMAND\`` for every subcommand `attnbatch --help`
  lists, and the option table of that section names exactly the options
  `attnbatch SUBCOMMAND --help` lists: none missing, none that --help no longer has.
- No `--help` cites a document the repository does not hold (a `*.md` path that does not
  exist, or the contract kept beside the repository).
- Every `attnbatch SUBCOMMAND ...` command line in a code block of README.md, docs/*.md or
  jobs/README.md names a subcommand that exists and only options it takes.

Links, anchors and paths of the same pages are checked by tests/docs/links_test.py.
"""
import glob
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from harness import check, exit_status, failures  # noqa: E402

# What every subcommand takes; commands.md documents these once, above the tables.
COMMON = {"help", "config", "print-config"}


def subcommands(binary):
    usage = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30).stdout
    return re.findall(r"^  ([a-z][a-z-]*)\t", usage, re.M)


def help_text(binary, command):
    return subprocess.run([binary, command, "--help"], capture_output=True, text=True, timeout=30).stdout


def listed_options(text):
    return set(re.findall(r"^\s+(?:-\w \[ )?--([a-z][a-z0-9-]*)", text, re.M))


def sections(text):
    """{name: body} of the `## \`name\`` sections of a page."""
    parts = re.split(r"^## ", text, flags=re.M)
    found = {}
    for part in parts[1:]:
        title, _, body = part.partition("\n")
        match = re.fullmatch(r"`([a-z][a-z-]*)`", title.strip())
        if match:
            found[match.group(1)] = body
    return found


def table_options(body):
    """The options in the first column of the section's option tables (header `| option |`)."""
    options, in_table = set(), False
    for line in body.splitlines():
        if re.match(r"^\|\s*option\s*\|", line):
            in_table = True
            continue
        if not line.startswith("|"):
            in_table = False
            continue
        if in_table:
            first_cell = re.split(r"(?<!\\)\|", line)[1]  # a cell may hold an escaped \|
            options |= set(re.findall(r"--([a-z][a-z0-9-]*)", first_cell))
    return options


def code_lines(text):
    """The lines of a page's code blocks (fenced or indented four spaces)."""
    lines = []
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M):
        lines += block.splitlines()
    lines += [line[4:] for line in re.findall(r"^    .*$", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M), re.M)]
    return lines


def command_lines(text):
    """(subcommand, options) of each attnbatch invocation in a page's code; outputs
    (`attnbatch run: ...`) and comment lines are not invocations."""
    found = []
    for line in code_lines(text):
        if line.lstrip().startswith("#"):
            continue
        command = re.split(r"\s#|&&|\||;", line)[0]
        for match in re.finditer(r"(?:^|[\s/$])attnbatch\s+([a-z][a-z-]*)(?=\s|$)", command):
            rest = command[match.end():]
            found.append((match.group(1), set(re.findall(r"(?:^|\s)--([a-z][a-z0-9-]*)", rest)), line.strip()))
    return found


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    binary, repository = os.path.abspath(sys.argv[1]), os.path.realpath(sys.argv[2])
    commands = subcommands(binary)
    check(len(commands) >= 7, "attnbatch --help lists %r" % commands)
    helps = {command: help_text(binary, command) for command in commands}
    options = {command: listed_options(helps[command]) for command in commands}
    for command, text in helps.items():
        for document in re.findall(r"[\w./-]+\.md\b", text):
            check(os.path.exists(os.path.join(repository, document)),
                  "attnbatch %s --help cites %s, which is not in the repository" % (command, document))
        check(not re.search(r"\bSPEC\b|\.\./shared", text), "attnbatch %s --help cites the contract kept outside the repository" % command)
    for command in commands:
        check(len(options[command] - COMMON) >= 3, "%s --help lists %r" % (command, sorted(options[command])))

    with open(os.path.join(repository, "docs", "commands.md")) as f:
        reference = sections(f.read())
    for command in commands:
        check(command in reference, "docs/commands.md has no section ## `%s`" % command)
        if command not in reference:
            continue
        documented = table_options(reference[command])
        missing = sorted(options[command] - COMMON - documented)
        stale = sorted(documented - options[command])
        check(not missing, "docs/commands.md does not document %s's %s" % (command, ", ".join("--" + o for o in missing)))
        check(not stale, "docs/commands.md documents %s options that --help does not list: %s"
              % (command, ", ".join("--" + o for o in stale)))

    pages = ["README.md", "jobs/README.md"] + sorted(
        os.path.relpath(p, repository) for p in glob.glob(os.path.join(repository, "docs", "*.md")))
    invocations = 0
    for page in pages:
        with open(os.path.join(repository, page)) as f:
            text = f.read()
        for command, used, line in command_lines(text):
            invocations += 1
            if not check(command in options, "%s: `%s` names no subcommand %s" % (page, line, command)):
                continue
            unknown = sorted(used - options[command] - COMMON)
            check(not unknown, "%s: `%s` uses %s, which attnbatch %s does not take"
                  % (page, line, ", ".join("--" + o for o in unknown), command))
    check(invocations >= 30, "found only %d attnbatch command lines in %s (the parser is broken)" % (invocations, pages))
    if not failures:
        print("docs/commands.md documents every option of %s; %d command lines in %d pages use real options"
              % (", ".join(commands), invocations, len(pages)))
    return exit_status()


if __name__ == "__main__":
    sys.exit(main())
