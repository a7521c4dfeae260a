#!/usr/bin/env python3
"""Each crate root's module tour (its `//!` docs) names every module the
root declares (test modules aside), in backticks as `m`, `m.rs` or `m/`
(an intra-doc link is in backticks too), so the tour a newcomer reads first matches the code.
Exit 1, naming the crate root and the modules, when one is missing."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
bad = []
for path in sorted(root.glob("crates/*/src/lib.rs")) + sorted(root.glob("crates/*/src/main.rs")):
    text = path.read_text()
    docs = "\n".join(l for l in text.splitlines() if l.startswith("//!"))
    mods = re.findall(
        r"^\s*((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", text, re.M
    )
    named = lambda m: any(f"`{m}{end}`" in docs for end in ("", ".rs", "/"))
    missing = [m for attrs, m in mods if "cfg(test)" not in attrs and not named(m)]
    if missing:
        bad.append(f"{path.relative_to(root)}: the module tour does not name {', '.join(missing)}")
print("\n".join(bad) or "crate tours name every module")
sys.exit(1 if bad else 0)
