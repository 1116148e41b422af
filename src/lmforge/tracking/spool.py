"""What a run could not send while its tracking server was away, kept on disk until it is back.

One JSON-lines file per run, ``<tracking.spool_dir>/<run id>.jsonl``: each line one call the
``Tracker`` would have made (a batch of metrics, params or tags; an artifact; a logged model; the
run's end), with copies of the files it names in ``<run id>/``. ``Tracker`` appends to it while
the server does not answer and sends it when the server answers again; whatever is left when
the run ends is sent by ``lmforge tracking sync`` (``sync.send_spooled``).

A spool line names its server without the URI's user and password (the sender takes them from
the configuration), and a spool is sent only after ``verify``: every file it would upload lies
under its own folder, so an edited spool cannot upload other files.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import LmforgeError
from ..redact import redact_uri

__all__ = ["Spool", "SpoolError", "pending"]

FILE_KEYS = ("path", "model_dir")  # the record keys naming a file or folder to upload


class SpoolError(LmforgeError):
    """A spool that is not what ``Tracker`` writes (a file outside its folder, another run)."""


class Spool:
    """The records of one run (``uri`` and ``run_id`` say where they go)."""

    def __init__(self, folder: str | os.PathLike, uri: str, run_id: str, experiment_id: str | None = None):
        self.folder = Path(folder)
        self.uri = redact_uri(uri)
        self.run_id = run_id
        self.experiment_id = experiment_id
        self.file = self.folder / f"{run_id}.jsonl"
        self.files = self.folder / run_id

    def __len__(self) -> int:
        return len(self.records())

    def add(self, record: dict) -> None:
        """Append ``record`` (fsynced: a crash loses at most the line being written)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"uri": self.uri, "run_id": self.run_id, "experiment_id": self.experiment_id, **record})
        with open(self.file, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def keep(self, path: str | os.PathLike) -> str:
        """A copy of the file or folder ``path`` that stays until the record naming it is sent."""
        path = Path(path)
        self.files.mkdir(parents=True, exist_ok=True)
        target = self.files / f"{len(list(self.files.iterdir())):04d}" / path.name
        target.parent.mkdir()
        if path.is_dir():
            shutil.copytree(path, target)
        else:
            shutil.copy2(path, target)
        return str(target)

    def verify(self) -> None:
        """``SpoolError`` naming the line unless every record is of this run and every file or
        folder it names lies in ``<spool>/<run id>/`` (no link leading out of it either)."""
        base = self.files.resolve()

        def inside(path: Path) -> bool:
            return not path.is_symlink() and path.resolve().is_relative_to(base)

        for n, record in enumerate(self.records(), 1):
            if record.get("run_id") != self.run_id:
                raise SpoolError(f"{self.file}:{n}: a record of run {record.get('run_id')!r} in the spool of run "
                                 f"{self.run_id}; not sent")
            for key in FILE_KEYS:
                if record.get(key) is None:
                    continue
                path = Path(str(record[key]))
                bad = not inside(path)  # (a relative path is opened from here, as the spool folder is)
                if not bad and path.is_dir():
                    bad = any(not inside(p) for p in path.rglob("*"))
                if bad:
                    raise SpoolError(f"{self.file}:{n}: names {path}, which is not a copy the run kept in {self.files}; "
                                     "the spool is not sent")

    def records(self) -> list[dict]:
        """The records in order; a last line cut short by a crash is left out."""
        if not self.file.exists():
            return []
        out = []
        for line in self.file.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def send(self, apply: Callable[[dict], None]) -> int:
        """``apply`` each record in order, then remove the spool; the number sent. A record that
        fails stops it: the records from that one on stay (the file is rewritten with them)."""
        records = self.records()
        for i, record in enumerate(records):
            try:
                apply(record)
            except BaseException:
                self._rewrite(records[i:])
                raise
        self.clear()
        return len(records)

    def _rewrite(self, records: list[dict]) -> None:
        tmp = self.file.with_name(self.file.name + ".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        os.replace(tmp, self.file)

    def clear(self) -> None:
        self.file.unlink(missing_ok=True)
        shutil.rmtree(self.files, ignore_errors=True)


def pending(folder: str | os.PathLike) -> Iterator[Spool]:
    """The spools left in ``folder``, oldest first."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    for file in sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime):
        records = Spool(folder, "", file.stem).records()
        if records:
            first = records[0]
            yield Spool(folder, str(first.get("uri") or ""), file.stem, first.get("experiment_id"))
