#!/usr/bin/python3
"""Every link of the manual leads somewhere inside the repository.

usage: links_test.py REPOSITORY

Checks every Markdown file of the repository (README.md, docs/, jobs/README.md, ...; build
trees and hidden folders are skipped):

- a relative link names a file or folder of the repository, and its anchor (`page.md#x`, or
  `#x` on the same page) names a heading of that page, as GitHub spells anchors;
- no link leaves the repository: no `../` past its root, no absolute path, no URL (a user's
  clone must read the same offline);
- no page mentions the project's private working files (the `shared` folder beside the
  clone, `/work/...`, the contract documents kept there), which users' clones do not have;
- every repository path a page names in inline code (`src/...`, `scripts/...`) exists, so a
  file that moves shows up here rather than in a reader's confusion;
- README.md stays short (at most 200 lines), and every page of docs/ is listed in
  docs/README.md.

Code (fenced or indented blocks, inline spans) holds no links. Prints one line per broken
rule and exits 1 when there is any.
"""
import os
import re
import sys

README_MAX_LINES = 200

# Paths of the repository that pages name in inline code; only these prefixes are checked,
# so that `build/attnbatch` or `shards/shards.txt` (made by the reader) are not.
REPOSITORY_PATH = re.compile(r"^(src|include|tests|scripts|jobs|docs|fuzz)/[\w.+/-]*$")
# The project's private working files: they live beside the repository, not in it.
PRIVATE = re.compile(r"\.\.[/]shared|/work/|\bSPEC\.md\b|\bSPEC\b|HPC-NOTES|\bSTYLE\.md\b")


def markdown_files(root):
    pages = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".")
                               and not os.path.exists(os.path.join(folder, d, "CMakeCache.txt")))
        pages += [os.path.relpath(os.path.join(folder, f), root) for f in sorted(files) if f.endswith(".md")]
    return pages


def without_code(text):
    """The prose of a page: fenced and indented code blocks blanked, inline code removed."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"^(    |\t).*$", "", text, flags=re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def inline_code(text):
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"^(    |\t).*$", "", text, flags=re.M)
    return re.findall(r"`([^`\n]+)`", text)


def anchor(heading):
    """GitHub's anchor of a heading: its text in lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link: its text
    text = text.lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(text):
    """Every anchor of a page; a repeated heading gets -1, -2, ... as on GitHub."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    seen, anchors = {}, set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.M):
        base = anchor(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        anchors.add(base if count == 0 else "%s-%d" % (base, count))
    return anchors


def links_of(text):
    prose = without_code(text)
    links = re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", prose)
    links += re.findall(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", prose, re.M)
    links += re.findall(r"(?:href|src)=\"([^\"]+)\"", prose)
    return links


def check_repository(root):
    """The broken rules of the Markdown files under root, one line each."""
    root = os.path.realpath(root)
    failures = []
    pages = markdown_files(root)
    texts = {}
    for page in pages:
        with open(os.path.join(root, page), encoding="utf-8") as f:
            texts[page] = f.read()

    def text_of(path):
        relative = os.path.relpath(path, root)
        if relative not in texts:
            with open(path, encoding="utf-8") as f:
                texts[relative] = f.read()
        return texts[relative]

    for page in pages:
        text = texts[page]
        for number, line in enumerate(text.splitlines(), 1):
            for match in PRIVATE.finditer(line):
                failures.append("%s:%d: mentions %s, which is not in the repository" % (page, number, match.group(0)))
        for link in links_of(text):
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", link):
                failures.append("%s: link %s leaves the repository (a URL)" % (page, link))
                continue
            if link.startswith("/"):
                failures.append("%s: link %s is an absolute path" % (page, link))
                continue
            target, _, fragment = link.partition("#")
            if not target:
                if fragment not in anchors_of(text):
                    failures.append("%s: link #%s names no heading of the page" % (page, fragment))
                continue
            resolved = os.path.realpath(os.path.join(root, os.path.dirname(page), target))
            if os.path.commonpath([resolved, root]) != root:
                failures.append("%s: link %s leaves the repository" % (page, link))
                continue
            if not os.path.exists(resolved):
                failures.append("%s: link %s names nothing in the repository" % (page, link))
                continue
            if fragment:
                if not (os.path.isfile(resolved) and resolved.endswith(".md")):
                    failures.append("%s: link %s has an anchor into something that is not a page" % (page, link))
                elif fragment not in anchors_of(text_of(resolved)):
                    failures.append("%s: link %s names no heading of %s" % (page, link, target))
        for code in inline_code(text):
            path = code.strip().rstrip(".,;:")
            if REPOSITORY_PATH.match(path) and not os.path.exists(os.path.join(root, path)):
                failures.append("%s: names `%s`, which is not in the repository" % (page, path))

    if "README.md" in texts:
        lines = texts["README.md"].count("\n")
        if lines > README_MAX_LINES:
            failures.append("README.md: %d lines, more than %d: put the rest in docs/" % (lines, README_MAX_LINES))
    if "docs/README.md" in texts:
        listed = {os.path.normpath(os.path.join("docs", l.partition("#")[0])) for l in links_of(texts["docs/README.md"])}
        for page in pages:
            if os.path.dirname(page) == "docs" and page != "docs/README.md" and page not in listed:
                failures.append("docs/README.md: does not list %s" % page)
    return failures, pages


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    failures, pages = check_repository(sys.argv[1])
    for failure in failures:
        print("FAIL: " + failure)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    if "README.md" not in pages or not any(p.startswith("docs/") for p in pages):
        print("FAIL: found no README.md or docs/ under %s (%s)" % (sys.argv[1], ", ".join(pages)))
        return 1
    print("%d Markdown files: every link, anchor and named path is in the repository" % len(pages))
    return 0


if __name__ == "__main__":
    sys.exit(main())
