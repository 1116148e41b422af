"""Weighted mixtures of the corpus's sources in the token store's train split (``tokenize.mixture``).

A rule names a source as the clean stage recorded it in each document's ``source`` ("stdlib",
"site-packages", an input file as it was named, "hf:NAME"), or a folder above input files (every
source under it). A source takes the rule of the longest name that matches it; a source no rule
names is taken once, as without a mixture.

Each document of a ruled source gets a number of copies: ``floor(weight)``, plus one for the first
``round(frac(weight) * documents)`` of the source's documents in its *order* (by a stable hash of
the seed and the document id: xxh64, the same on every machine and Python). With ``max_tokens``
the copies are then taken pass by pass (every document's first copy in that order, then the
second copies, ...) up to the first one that would pass the cap. The store writes its train split
pass by pass: the first copies in the corpus's order (with all weights 1, exactly the store
without a mixture), then the second copies, and so on. Validation and test are never weighted.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import xxhash

from ..config import MixtureRule
from ..errors import ConfigError

_LISTED = 20  # source names an error lists at most


def rule_of(source: str, names: list[str]) -> str | None:
    """The mixture key that ``source`` falls under: itself, or the longest folder above it."""
    best = None
    for name in names:
        if source == name or source.startswith(name.rstrip("/") + "/"):
            if best is None or len(name) > len(best):
                best = name
    return best


def check_rules(rules: dict[str, MixtureRule], known: list[str]) -> None:
    """Every key of ``tokenize.mixture`` names at least one of the corpus's sources."""
    unknown = [name for name in rules if not any(rule_of(s, [name]) for s in known)]
    if unknown:
        shown = ", ".join(repr(s) for s in sorted(known)[:_LISTED])
        more = f" and {len(known) - _LISTED} more" if len(known) > _LISTED else ""
        raise ConfigError(f"tokenize.mixture: unknown source {', '.join(repr(u) for u in unknown)}; "
                          f"the clean corpus's sources are {shown or 'none'}{more}")


def order_keys(ids: list[str], seed: int) -> np.ndarray:
    """Each document's place in its source's order: xxh64 of the seed and the id."""
    return np.fromiter((xxhash.xxh64_intdigest(f"mixture\x00{seed}\x00{i}".encode("utf-8")) for i in ids),
                       dtype=np.uint64, count=len(ids))


def plan(ids: list[str], sources: list[str], lengths: np.ndarray, rules: dict[str, MixtureRule],
         seed: int) -> tuple[np.ndarray, dict[str, Any]]:
    """The copies of each train document (in store order) and the report of the mixture: per group
    (a mixture key, or an unruled source by itself) its documents and tokens before and after,
    its share of the tokens before, the share its rule asks for and the share it got."""
    lengths = np.asarray(lengths, dtype=np.int64)
    names = list(rules)
    group_of = {s: rule_of(s, names) or s for s in set(sources)}
    groups = np.array([group_of[s] for s in sources], dtype=object)
    copies = np.ones(len(ids), dtype=np.int64)
    keys = order_keys(ids, seed)
    report: dict[str, dict[str, Any]] = {}
    for group in sorted(set(group_of.values())):
        members = np.flatnonzero(groups == group)
        rule = rules.get(group)
        if rule is not None:
            copies[members] = _copies(members[np.argsort(keys[members], kind="stable")], lengths, rule, len(ids))[members]
        entry: dict[str, Any] = {
            "weight": rule.weight if rule else 1.0, "max_tokens": rule.max_tokens if rule else None,
            "documents_before": int(len(members)), "tokens_before": int(lengths[members].sum()),
            "documents_after": int(copies[members].sum()), "tokens_after": int((copies[members] * lengths[members]).sum()),
        }
        if rule is not None and group not in group_of:  # a folder: the sources under it
            entry["sources"] = sorted(s for s, g in group_of.items() if g == group)
        target = entry["weight"] * entry["tokens_before"]
        entry["target_tokens"] = min(target, rule.max_tokens) if rule and rule.max_tokens is not None else target
        report[group] = entry
    for name in names:  # a key whose sources have no train document (all in validation / test)
        report.setdefault(name, {"weight": rules[name].weight, "max_tokens": rules[name].max_tokens,
                                 "documents_before": 0, "tokens_before": 0, "documents_after": 0, "tokens_after": 0,
                                 "target_tokens": 0})
    totals = {k: sum(e[k] for e in report.values()) for k in ("tokens_before", "target_tokens", "tokens_after")}
    for entry in report.values():
        entry["share_before"] = round(entry["tokens_before"] / max(totals["tokens_before"], 1), 6)
        entry["target_share"] = round(entry.pop("target_tokens") / totals["target_tokens"], 6) if totals["target_tokens"] else 0.0
        entry["realised_share"] = round(entry["tokens_after"] / max(totals["tokens_after"], 1), 6)
    return copies, dict(sorted(report.items()))


def _copies(order: np.ndarray, lengths: np.ndarray, rule: MixtureRule, n: int) -> np.ndarray:
    """Copies of the documents ``order`` (one source's, in its order) under ``rule``; zero elsewhere."""
    copies = np.zeros(n, dtype=np.int64)
    whole = math.floor(rule.weight)
    copies[order] = whole
    copies[order[: math.floor((rule.weight - whole) * len(order) + 0.5)]] += 1
    if rule.max_tokens is None:
        return copies
    kept = np.zeros(n, dtype=np.int64)
    total = 0
    for p in range(int(copies[order].max(initial=0))):
        this_pass = order[copies[order] > p]
        cumulative = total + np.cumsum(lengths[this_pass])
        fit = int(np.searchsorted(cumulative, rule.max_tokens, side="right"))
        kept[this_pass[:fit]] += 1
        if fit < len(this_pass):
            break
        total = int(cumulative[-1]) if fit else total
    return kept
