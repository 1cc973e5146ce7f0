#!/usr/bin/env python3
"""Folders read top-down (docs/architecture.md, rule 11): every #include
"folder/..." in src/ must name its own folder or one that the table below lets
it include. Prints each include that breaks the rule and exits 1 if any does;
make test runs it (CTest: house.include_graph).

  scripts/check_includes.py [SRC_DIR]
"""
import pathlib
import re
import sys

# What each folder may include besides itself: the table of
# docs/architecture.md ("Which folder may include which").
BELOW = {
    "core": set(),
    "tensor": {"core"},
    "jinja": {"core"},
    "backend": {"tensor", "core"},
    "model": {"backend", "tensor", "core"},
    "kv": {"model", "backend", "tensor", "core"},
    "tokenizer": {"jinja", "model", "core"},
    "engine": {"kv", "tokenizer", "model", "backend", "tensor", "core"},
    "offline": {"engine", "kv", "tokenizer", "model", "backend", "tensor", "core"},
    "hub": {"core"},
    "server/http": {"core"},
    "server/events": {"engine", "kv", "core"},
    "server/api": {"server/http", "engine", "tokenizer", "kv", "model", "backend", "tensor", "core"},
    "server": {"server/api", "server/events", "server/http", "engine", "tokenizer", "kv", "model", "backend",
               "tensor", "core"},
}
ROOMS = ("server/http", "server/api", "server/events")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def folder_of(path: str) -> str:
    """The folder a path under src/ belongs to (server's rooms are folders of their own)."""
    for room in ROOMS:
        if path.startswith(room + "/"):
            return room
    return path.split("/", 1)[0]


def main() -> int:
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent / "src")
    broken = []
    for file in sorted(src.rglob("*")):
        if file.suffix not in (".h", ".cc", ".cu", ".cuh", ".inl"):
            continue
        here = folder_of(file.relative_to(src).as_posix())
        if here == "cli":
            continue  # the binaries' folder may include everything below it
        if here not in BELOW:
            broken.append(f"{file.relative_to(src)}: folder {here}/ is not in the table of scripts/check_includes.py")
            continue
        for include in INCLUDE.findall(file.read_text(errors="replace")):
            if "/" not in include:
                continue  # a generated or system header of the same folder
            there = folder_of(include)
            if there != here and there not in BELOW[here]:
                broken.append(f"{file.relative_to(src)}: includes {include} ({there}/ is not below {here}/)")
    for line in broken:
        print(line)
    if not broken:
        print("include graph: every folder includes only those below it")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
