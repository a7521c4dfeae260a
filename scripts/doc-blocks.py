#!/usr/bin/env python3
"""The shell blocks of a Markdown guide, for the tests that run them.

Every ```sh block of the guide is marked on the line before it (blank lines
between allowed) with either
    <!-- test: NAME -->         run by a test script, which asks for it by NAME
    <!-- not run: REASON -->    not run anywhere, and why

    doc-blocks.py FILE NAME     prints the block marked NAME
    doc-blocks.py --check FILE  fails on a block without a mark, or a NAME twice
"""
import re
import sys

MARK = re.compile(r"^<!-- (test: (?P<name>[a-z0-9-]+)|not run: .+) -->$")


def blocks(path):
    """(mark match or None, block text, line) for every ```sh block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```sh":
            start = i
            j = i - 1
            while j >= 0 and lines[j].strip() == "":
                j -= 1
            mark = MARK.match(lines[j].strip()) if j >= 0 else None
            end = i + 1
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            out.append((mark, "\n".join(lines[i + 1:end]) + "\n", start + 1))
            i = end
        i += 1
    return out


def main(argv):
    if len(argv) == 3 and argv[1] == "--check":
        seen, bad = set(), 0
        for mark, _, line in blocks(argv[2]):
            if mark is None:
                print(f"{argv[2]}:{line}: a sh block without <!-- test: NAME --> "
                      "or <!-- not run: REASON --> before it")
                bad += 1
            elif mark.group("name"):
                if mark.group("name") in seen:
                    print(f"{argv[2]}:{line}: test name {mark.group('name')} twice")
                    bad += 1
                seen.add(mark.group("name"))
        return 1 if bad else 0
    if len(argv) == 3:
        for mark, text, _ in blocks(argv[1]):
            if mark and mark.group("name") == argv[2]:
                sys.stdout.write(text)
                return 0
        print(f"{argv[1]}: no block marked <!-- test: {argv[2]} -->", file=sys.stderr)
        return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
