"""Set KEY=VALUE entries (the syntax of ``lmforge ... --set``) in a params.yaml, in place.

    python docker/set_params.py /project/params.yaml tracking.uri=http://mlflow:5000 [KEY=VALUE ...]

``docker/entrypoint.sh`` runs it with ``$LMFORGE_SET`` so that a container's copy of
params.yaml points at the services of the stack (the MLflow server is ``http://mlflow:5000``
inside the compose network) while the checkout's params.yaml keeps what the host uses. Comments
and layout are kept (ruamel.yaml, which DVC installs, round-trips the file); the result is
validated with lmforge's schema before it replaces the file, so a wrong key changes nothing.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap

from lmforge.config import ConfigError, apply_override, load_params


def _yaml() -> YAML:
    rt = YAML()  # round-trip: comments, order and flow style survive
    rt.preserve_quotes = True
    rt.width = 4096  # never re-wrap long lines
    rt.indent(mapping=2, sequence=4, offset=2)
    rt.representer.add_representer(type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null"))
    return rt


def set_params(path: str | os.PathLike, items: list[str]) -> None:
    path = Path(path)
    rt = _yaml()
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    data = rt.load(text) if text.strip() else None
    if data is None:
        data = CommentedMap()
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    for item in items:
        apply_override(data, item)
    out = io.StringIO()
    rt.dump(data, out)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".yaml", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(out.getvalue())
        load_params(tmp)  # the schema: an unknown key or a bad value stops here, naming the key
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python docker/set_params.py PARAMS_YAML KEY=VALUE [KEY=VALUE ...]", file=sys.stderr)
        return 64
    try:
        set_params(argv[0], argv[1:])
    except ConfigError as exc:
        print(f"set_params: {exc}", file=sys.stderr)
        return 65
    if argv[1:]:
        keys = ", ".join(item.split("=", 1)[0] for item in argv[1:])  # values may hold credentials
        print(f"set_params: {argv[0]}: set {keys}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
