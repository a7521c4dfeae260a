#!/usr/bin/env python3
"""Prints the shell blocks of a Markdown file that are marked as tested.

A fenced block counts when the line just before its opening fence is
`<!-- tested: TAG -->`; `readme-blocks.py FILE TAG` prints every such block
for TAG, in order, exactly as written, so a client's test.sh can run the
README's own install and usage commands rather than a copy of them.
Exits 1 when FILE has no block for TAG (a README that lost its marks must
not pass silently).
"""
import re
import sys


def blocks(text, tag):
    lines = text.split("\n")
    out = []
    i = 0
    mark = re.compile(r"^\s*<!--\s*tested:\s*(\S+)\s*-->\s*$")
    while i < len(lines):
        m = mark.match(lines[i])
        if m and m.group(1) == tag and i + 1 < len(lines) and lines[i + 1].lstrip().startswith("```"):
            fence = lines[i + 1].lstrip()[:3]
            j = i + 2
            body = []
            while j < len(lines) and not lines[j].lstrip().startswith(fence):
                body.append(lines[j])
                j += 1
            out.append("\n".join(body))
            i = j + 1
            continue
        i += 1
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: readme-blocks.py FILE TAG")
    with open(sys.argv[1], encoding="utf-8") as f:
        found = blocks(f.read(), sys.argv[2])
    if not found:
        sys.exit(f"readme-blocks.py: no block marked 'tested: {sys.argv[2]}' in {sys.argv[1]}")
    print("\n".join(found))


if __name__ == "__main__":
    main()
