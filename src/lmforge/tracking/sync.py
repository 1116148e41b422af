"""``lmforge tracking sync``: send the spools runs kept while their tracking server was away
(``spool.Spool``), each to its run, once the configured server answers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..redact import redact_uri
from .spool import pending
from .store import TrackingUnavailable, check_reachable, resolve_tracking_uri
from .tracker import Tracker


def send_spooled(folder: str | Path, uri: str | None, log: Callable[[str], None] = print) -> tuple[int, int]:
    """Send the spools in ``folder`` kept for the tracking server ``uri`` (the configured one:
    ``lmforge tracking sync``): (runs sent, runs still waiting). Nothing else is sent anywhere: a
    spool kept for another server stays where it is (and waits), and every spool is verified
    first (``Spool.verify``: it uploads only the copies in its own folder), else ``SpoolError``
    before anything is sent. A server that does not answer leaves the spools where they are."""
    target = resolve_tracking_uri(uri)
    shown = redact_uri(target)
    spools = list(pending(folder))
    for spool in spools:
        spool.verify()
    sent = waiting = 0
    unreachable: TrackingUnavailable | None = None
    checked = False
    for spool in spools:
        if spool.uri.rstrip("/") != shown.rstrip("/"):
            log(f"run {spool.run_id}: {len(spool)} records kept for {spool.uri}, not for the configured tracking "
                f"server {shown}; left in {spool.file}")
            waiting += 1
            continue
        if not checked:
            checked = True
            try:
                check_reachable(target, 5.0)
            except TrackingUnavailable as exc:
                unreachable = exc
        if unreachable is not None:
            log(f"run {spool.run_id}: {len(spool)} records wait ({unreachable})")
            waiting += 1
            continue
        n = spool.send(Tracker.resume(target, spool.run_id, spool.experiment_id).apply)
        log(f"run {spool.run_id}: sent {n} records to {shown}")
        sent += 1
    return sent, waiting
