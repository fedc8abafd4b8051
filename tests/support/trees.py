"""Seeded trees of the two shapes real syncs have, small enough for a test: a package
tree (many folders of a few to many files, sizes from empty to past a batch's largest
file, names with dots, dashes and one non-ASCII) and a deep tree (1-10 files per
folder, six levels, 64 B to 256 KiB). The same call writes the same bytes."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

Write = Callable[[str, bytes], object]


def deep_tree(write: Write, files: int, *, seed: int = 7) -> list[str]:
    """`files` files, 1-10 per folder, folders six levels deep (3 subfolders each, depth
    first), log-uniform sizes 64 B-256 KiB; their relative paths."""
    rng = random.Random(seed)
    names: list[str] = []

    def fill(folder: str, depth: int) -> None:
        for _ in range(min(rng.randint(1, 10), files - len(names))):
            rel = f"{folder}/f{len(names):05d}.bin"
            size = int(math.exp(rng.uniform(math.log(64), math.log(256 << 10))))
            write(rel, rng.randbytes(size))
            names.append(rel)
        for k in range(3 if depth < 6 else 0):
            if len(names) < files:
                fill(f"{folder}/d{k}", depth + 1)

    while len(names) < files:
        fill(f"t{len(names):05d}", 1)
    return names


def package_tree(write: Write, *, seed: int = 11) -> list[str]:
    """About 300 files laid out as installed packages are; their relative paths."""
    rng = random.Random(seed)
    names: list[str] = []
    for p in range(12):
        pkg = f"pkg_{p}" if p != 5 else "pkg_ünï"
        layout = [f"{pkg}", f"{pkg}/sub", f"{pkg}/sub/deeper", f"{pkg}-1.{p}.dist-info"]
        for folder in layout:
            for k in range(rng.randint(1, 30) if folder == pkg else rng.randint(1, 6)):
                rel = f"{folder}/m{k}.py" if "dist-info" not in folder else f"{folder}/F{k}"
                size = rng.choice((0, 40, 900, 5_000, 60_000, 300_000))
                write(rel, rng.randbytes(size))
                names.append(rel)
    for i, size in enumerate((3 << 20, 5 << 20 | 17)):  # past a batch's largest file
        rel = f"pkg_{i}/lib{i}.so"
        write(rel, rng.randbytes(size))
        names.append(rel)
    return names
