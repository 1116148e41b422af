"""Print the requirements of a pyproject.toml: the project's dependencies and those of the named
extras, one a line, for ``pip install -r``.

    python3 docker/requirements.py pyproject.toml team > requirements.txt

The images install these in a layer of their own, before any of the project's code is copied
in, so that a change to the code rebuilds only the layers after it (the project itself is then
installed with ``--no-deps``). An extra that names the project itself (``lmforge[hf,onnx]``) is
expanded into those extras' requirements. Standard library only: it runs before anything is
installed.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(pyproject: Path, extras: list[str]) -> list[str]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    own = _canonical(project.get("name", ""))
    optional = project.get("optional-dependencies", {})
    unknown = [extra for extra in extras if extra not in optional]
    if unknown:
        raise SystemExit(f"requirements.py: {pyproject}: no extra named {', '.join(unknown)} "
                         f"(it has: {', '.join(sorted(optional)) or 'none'})")
    out: list[str] = []
    seen_extras: set[str] = set()

    def add(items: list[str]) -> None:
        for item in items:
            m = _NAME.match(item)
            if m and own and _canonical(m[1]) == own:  # the project naming its own extras
                add_extras([e.strip() for e in (m[2] or "").split(",") if e.strip()])
            elif item not in out:
                out.append(item)

    def add_extras(names: list[str]) -> None:
        for name in names:
            if name not in seen_extras:
                seen_extras.add(name)
                add(optional.get(name, []))

    add(project.get("dependencies", []))
    add_extras(extras)
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python3 docker/requirements.py PYPROJECT_TOML [EXTRA ...]", file=sys.stderr)
        return 64
    path = Path(argv[0])
    if not path.is_file():
        print(f"requirements.py: {path}: no such file", file=sys.stderr)
        return 66
    try:
        lines = requirements(path, argv[1:])
    except tomllib.TOMLDecodeError as exc:
        print(f"requirements.py: {path}: not valid TOML: {exc}", file=sys.stderr)
        return 65
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
