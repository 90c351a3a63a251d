"""Report files on disk: names safe to take from a profile's contents, and writes that are all or nothing.

A kernel's name comes from the user's code or from a `.profile.json` someone shared: it becomes a file
name only as letters, digits, `_`, `-` and `.` (never a path, a leading dot or a control character).
Every report is written to a temporary beside it and renamed when complete, so a run killed half-way
leaves the previous file or none, never a truncated one.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path

MAX_STEM = 100


def safe_stem(name: object) -> str:
    """`name` as one harmless file-name component: other characters become `_`, no leading dot."""
    stem = re.sub(r"[^A-Za-z0-9_.\-]", "_", str(name))[:MAX_STEM].lstrip(".")
    return stem or "kernel"


@contextlib.contextmanager
def replacing(path: Path):
    """Yield a temporary path beside `path` (hidden, with the same suffix); it becomes `path` (atomically)
    only if the block completes."""
    tmp = path.with_name(f".{os.getpid()}.{path.name}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> Path:
    with replacing(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path


def profile_stem(out: Path, kernel: str, source: str) -> str:
    """The file stem for `kernel`'s reports under `out`: its safe name, numbered (`-2`, `-3`, ...) when a
    profile of a same-named kernel from another source file is already there."""
    base, n = safe_stem(kernel), 1
    while True:
        stem = base if n == 1 else f"{base}-{n}"
        try:
            there = json.loads((out / f"{stem}.profile.json").read_text()).get("source_file")
        except (OSError, ValueError, AttributeError):
            there = None if (out / f"{stem}.profile.json").exists() else source
        if there == source:
            return stem
        n += 1
