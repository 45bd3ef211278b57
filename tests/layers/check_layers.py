#!/usr/bin/env python3
"""Checks braid's layer rule: every quoted #include in the tree against layers.txt.

    check_layers.py ROOT [--rules FILE] [--extra FILE ...]

Reads the rules (default ROOT/layers.txt), scans the C/C++/CUDA sources of every folder the rules
name (and any --extra file, checked as if it were at its path under ROOT), and prints one line per
include that goes against them, as FILE:LINE: <folder> may not include "<header>" (<its folder>;
allowed: ...). Exit 0 when there is none, 1 otherwise, 2 on a malformed rules file.
"""

import os
import re
import sys

SOURCES = (".h", ".hpp", ".cc", ".c", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_rules(path):
    rules = {}
    with open(path) as f:
        for number, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            if ":" not in line:
                sys.exit(f"{path}:{number}: expected '<folder>: <folders>', got {raw.strip()!r}")
            folder, uses = line.split(":", 1)
            folder = folder.strip().rstrip("/")
            if not folder or folder in rules:
                sys.exit(f"{path}:{number}: folder {folder!r} is empty or listed twice")
            rules[folder] = set(uses.split())
    for folder, uses in rules.items():
        for u in uses:
            if u not in rules:
                sys.exit(f"{path}: {folder} may use {u!r}, which is not a folder of the rules")
    return rules


def owner(path, rules):
    """The longest rule folder that is a prefix of path (a/b/c.h -> a/b or a), or None."""
    parts = path.split("/")
    for n in range(len(parts) - 1, 0, -1):
        prefix = "/".join(parts[:n])
        if prefix in rules:
            return prefix
    return None


def check_file(rel, text, rules):
    problems = []
    mine = owner(rel, rules)
    if mine is None:
        return problems
    for number, line in enumerate(text.splitlines(), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        header = m.group(1)
        if header.startswith("braid/"):
            continue  # public headers (include/braid/) and generated ones (braid/git_revision.h)
        theirs = owner(header, rules)
        if theirs is None:
            if "/" not in header:
                continue  # a file next to this one
            problems.append(f"{rel}:{number}: \"{header}\" is in no folder of layers.txt")
            continue
        if theirs == mine or theirs in rules[mine]:
            continue
        allowed = " ".join(sorted(rules[mine])) or "nothing"
        problems.append(f"{rel}:{number}: {mine} may not include \"{header}\" ({theirs}; "
                        f"{mine} may use: {allowed})")
    return problems


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    root = os.path.abspath(argv[1])
    rules_path = os.path.join(root, "layers.txt")
    extra = []
    i = 2
    while i < len(argv):
        if argv[i] == "--rules" and i + 1 < len(argv):
            rules_path = argv[i + 1]
            i += 2
        elif argv[i] == "--extra" and i + 1 < len(argv):
            extra.append(argv[i + 1])
            i += 2
        else:
            print(f"check_layers.py: unknown argument {argv[i]!r}", file=sys.stderr)
            return 2
    rules = read_rules(rules_path)
    problems = []
    files = 0
    tops = sorted({f.split("/")[0] for f in rules})
    for top in tops:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("build"))
            for name in sorted(filenames):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                with open(path, errors="replace") as f:
                    problems += check_file(rel, f.read(), rules)
                files += 1
    for path in extra:
        # --extra a/b.cc:AS: the file at a/b.cc, checked as if it lived at AS (relative to root).
        src, _, as_rel = path.partition(":")
        with open(src, errors="replace") as f:
            problems += check_file(as_rel or os.path.relpath(src, root), f.read(), rules)
        files += 1
    for p in problems:
        print(p)
    print(f"check_layers: {files} files, {len(rules)} folders, "
          f"{len(problems)} include(s) against {os.path.relpath(rules_path, root)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
