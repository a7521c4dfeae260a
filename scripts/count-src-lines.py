#!/usr/bin/env python3
"""Non-blank Rust lines in crates/*/src that are not tests (issue 44's
measure of the codebase's size): skips `tests.rs` files, files declared
`#[cfg(test)] mod x;` and inline `#[cfg(test)] mod x { ... }` blocks;
comments count, and so does code behind test-support features (core's
`contract` suite, `fuzzing`), as the issue counted. `-v` lists files, largest first; `--split` counts code
and comment lines apart, and the Lua files the Rust embeds (not in the
total: until the scripts moved out of Rust strings, they counted).

    python3 scripts/count-src-lines.py [ROOT] [-v] [--split]
"""
import os
import re
import sys

args = [a for a in sys.argv[1:] if not a.startswith("-")]
root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TEST_MOD = re.compile(
    r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\(\w+\))?\s+)?mod\s+(\w+)\s*;"
)


def without_inline_tests(text):
    """The file's lines less its inline `#[cfg(test)] mod x { ... }` blocks."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        if lines[i].strip().startswith("#[cfg(test)]"):
            j = i + 1
            while j < len(lines) and lines[j].strip().startswith("#["):
                j += 1
            opening = j < len(lines) and re.match(
                r"(\s*)(pub(\(\w+\))?\s+)?mod\s+\w+\s*\{", lines[j]
            )
            if opening:
                # rustfmt closes the block at the `mod` line's indent.
                closing = opening.group(1) + "}"
                k = j + 1
                while k < len(lines) and lines[k].rstrip() != closing:
                    k += 1
                i = k + 1
                continue
            if j < len(lines) and re.match(r"\s*(pub(\(\w+\))?\s+)?mod\s+\w+\s*;", lines[j]):
                i = j + 1
                continue
        out.append(lines[i])
        i += 1
    return out


crates = os.path.join(root, "crates")
sources, lua = [], 0
for d, _, files in os.walk(crates):
    # crates/NAME/src/...: not tests/, benches/ or examples/.
    if os.path.relpath(d, crates).split(os.sep)[1:2] == ["src"]:
        sources += [os.path.join(d, f) for f in files if f.endswith(".rs")]
        # Lua that Rust embeds (include_str!): not Rust, told apart.
        for f in files:
            if f.endswith(".lua"):
                lua += sum(1 for l in open(os.path.join(d, f)) if l.strip())
test_files = set()
for p in sources:
    d, f = os.path.split(p)
    parent = d if f in ("mod.rs", "lib.rs", "main.rs") else p[:-3]
    for name in TEST_MOD.findall(open(p).read()):
        test_files |= {os.path.join(parent, name + ".rs"), os.path.join(parent, name, "mod.rs")}
per, code, comments = {}, 0, 0
for p in sources:
    if os.path.basename(p) == "tests.rs" or p in test_files:
        continue
    kept = [l.strip() for l in without_inline_tests(open(p).read()) if l.strip()]
    per[os.path.relpath(p, root)] = len(kept)
    comments += sum(1 for l in kept if l.startswith("//"))
    code += sum(1 for l in kept if not l.startswith("//"))
if "-v" in sys.argv:
    for path, n in sorted(per.items(), key=lambda kv: -kv[1]):
        print(n, path)
if "--split" in sys.argv:
    print(f"code {code}, comments {comments}; Lua embedded beside it {lua}")
print("total", code + comments)
