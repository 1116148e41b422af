"""Benchmark: lmforge's C4 rules and language ID vs datatrove's C4QualityFilter and langdetect.

One process pinned to one core, on the stdlib docstring corpus (lmforge.corpus.stdlib). Every
timed variant gets one untimed warm-up pass, then --reps timed passes, interleaved so that load
from other work hits all variants alike; the best pass counts. Also checks on which documents our
rules and datatrove's agree and explains each disagreement by aligning one rule difference at a time.

datatrove is installed only here, in a git-ignored venv (spaCy's blank English pipeline with its
rule-based sentencizer is what datatrove's English sentence splitter uses; it needs no download):

    python3 -m venv benchmarks/.venv-datatrove
    benchmarks/.venv-datatrove/bin/pip install torch==2.13.0          # CPU build; lmforge pins it
    benchmarks/.venv-datatrove/bin/pip install -e . datatrove langdetect spacy regex
    benchmarks/.venv-datatrove/bin/python benchmarks/cleaning.py      # -> benchmarks/results/cleaning.json

Without datatrove (or langdetect) installed the script runs the other parts and says what it skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import Counter
from pathlib import Path

import lmforge.cleaning.filters as F
from lmforge.config import LanguageConfig, LineRules
from lmforge.corpus.document import Document
from lmforge.corpus.stdlib import stdlib_documents

try:
    from datatrove.data import Document as DtDocument
    from datatrove.pipeline.filters.c4_filters import C4QualityFilter
    from datatrove.utils.text import split_into_sentences as dt_split_sentences
    from datatrove.utils.typeshelper import Languages
except ImportError as exc:
    C4QualityFilter = None
    DATATROVE_ERROR = str(exc)
try:
    import langdetect
except ImportError:
    langdetect = None

OUT = Path(__file__).parent / "results" / "cleaning.json"


# ----------------------------------------------------------------------------- the contenders
def datatrove_filter(r: LineRules):
    """datatrove's C4 filter set to our default constants, as far as its constructor allows."""
    return C4QualityFilter(
        split_paragraph=True,  # one line = one paragraph, as C4 and our rules
        remove_citations=r.citation_pattern is not None,
        filter_no_terminal_punct=r.end_marks is not None,
        min_num_sentences=r.min_sentences,
        min_words_per_line=r.min_words_per_line,
        max_word_length=r.max_word_length,
        filter_lorem_ipsum=r.lorem_ipsum,
        filter_javascript=r.javascript,
        filter_curly_bracket=r.curly_brace,
        filter_policy=bool(r.policy_phrases),
        language=Languages.english,
    )


def run_ours(steps, docs) -> list[str | None]:
    """Kept text per document (None: dropped)."""
    counts, out = Counter(), []
    for doc in docs:
        out.append(None if any(step(doc, counts) is not None for step in steps) else doc.text)
    return out


def run_datatrove(f, docs) -> list[str | None]:
    out = []
    for doc in docs:
        res = f.filter(doc)
        out.append(doc.text if (res[0] if isinstance(res, tuple) else res) else None)
    return out


def run_langdetect_plain(texts) -> list[bool]:
    from langdetect.lang_detect_exception import LangDetectException

    keep = []
    for text in texts:
        try:
            best = langdetect.detect_langs(text)[0]
            keep.append(best.lang == "en" and best.prob >= 0.99)
        except LangDetectException:
            keep.append(False)
    return keep


# ----------------------------------------------------------------------------- timing
def bench(variants: dict, reps: int) -> tuple[dict, dict]:
    """variants: name -> (make_input, run). Warm-up once each, then reps interleaved passes; best wins."""
    best = {name: [float("inf"), float("inf")] for name in variants}
    outputs = {}
    for rep in range(-1, reps):  # rep -1 is the warm-up
        for name, (make_input, run) in variants.items():
            data = make_input()  # fresh objects (the rules rewrite doc.text); not timed
            w, c = time.perf_counter(), time.process_time()
            result = run(data)
            w, c = time.perf_counter() - w, time.process_time() - c
            if rep >= 0:
                best[name] = [min(best[name][0], w), min(best[name][1], c)]
            outputs[name] = result
    return {name: {"wall_s": b[0], "cpu_s": b[1]} for name, b in best.items()}, outputs


# ----------------------------------------------------------------------------- agreement
def with_dt_splitter(fn):
    """Run fn with our rules counting sentences by datatrove's splitter (spaCy sentencizer)."""
    def run(*args):
        saved, F.split_sentences = F.split_sentences, lambda line: dt_split_sentences(line, Languages.english)
        try:
            return fn(*args)
        finally:
            F.split_sentences = saved
    return run


def explain(corpus, rules, ours, theirs) -> dict:
    """Re-run our rules with one datatrove difference aligned at a time; attribute each disagreement."""
    base = rules.model_dump()
    alignments = {  # name -> (rule overrides, use datatrove's sentence splitter, strip the result)
        "words counted before citation removal": ({"count_words_after_citation_removal": False}, False, False),
        "' accepted as an end mark": ({"end_marks": [*rules.end_marks, "'"]}, False, False),
        "sentence splitter (spaCy sentencizer vs ours)": ({}, True, False),
        "no max_page_length in datatrove": ({"max_page_length": None}, False, False),
        "datatrove strips the joined text": ({}, False, True),
    }
    alignments["all aligned"] = ({k: v for o, *_ in alignments.values() for k, v in o.items()}, True, True)

    def variant(overrides, dt_split, strip):
        r = LineRules(**{**base, **overrides})
        steps = ([F.MaxPageLength(r.max_page_length)] if r.max_page_length else []) + [F.C4LineRules(r)]
        run = with_dt_splitter(run_ours) if dt_split else run_ours
        kept = run(steps, [Document(id=i, text=t) for i, t in corpus])
        return [k.strip() if (strip and k is not None) else k for k in kept]

    results = {name: variant(*a) for name, a in alignments.items()}
    singles = [n for n in alignments if n != "all aligned"]
    decision, text, examples = Counter(), Counter(), {}
    unexplained = []
    for i, (doc_id, _) in enumerate(corpus):
        if (ours[i] is None) == (theirs[i] is None) and (ours[i] is None or ours[i] == theirs[i]):
            continue
        kind = decision if (ours[i] is None) != (theirs[i] is None) else text
        if kind is decision:
            fixed = [n for n in singles if (results[n][i] is None) == (theirs[i] is None)]
        else:
            fixed = [n for n in singles if results[n][i] == theirs[i]]
        cause = " or ".join(fixed) or ("several differences together" if results["all aligned"][i] == theirs[i]
                                       else "unexplained")
        kind[cause] += 1
        examples.setdefault(f"{'keep/drop' if kind is decision else 'kept text'}: {cause}", []).append(doc_id)
        if cause == "unexplained":
            unexplained.append(doc_id)
    all_ok = sum(results["all aligned"][i] == theirs[i] for i in range(len(corpus)))
    return {"decision_causes": dict(decision.most_common()), "kept_text_causes": dict(text.most_common()),
            "unexplained_ids": unexplained, "all_aligned_identical": all_ok,
            "examples": {cause: ids[:5] for cause, ids in examples.items()}}


def language_agreement(texts, cld2, ld) -> dict:
    """Keep decisions (en, p >= threshold) of cld2 vs langdetect, and why cld2 drops what langdetect keeps."""
    out, why = Counter(), Counter()
    for text in texts:
        (c, cp), (l, lp) = cld2.detect(text), ld.detect(text)
        kc, kl = c == "en" and cp >= cld2.threshold, l == "en" and lp >= ld.threshold
        out.update({"documents": 1, "cld2_keeps": kc, "langdetect_keeps": kl, "same": kc == kl})
        if kl and not kc:
            why["cld2 unreliable" if cp == 0 else "cld2 en below threshold" if c == "en" else f"cld2 says {c}"] += 1
    return {**out, "cld2_drops_langdetect_keeps": dict(why.most_common())}


# ----------------------------------------------------------------------------- main
def machine() -> dict:
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    return {"cpu": cpu, "cores": os.cpu_count(), "pinned_to": sorted(os.sched_getaffinity(0)),
            "python": platform.python_version()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cpu", type=int, default=None, help="core to pin to (default: the first allowed one)")
    ap.add_argument("--out", type=Path, default=OUT, help="JSON results file")
    args = ap.parse_args()
    os.sched_setaffinity(0, {args.cpu if args.cpu is not None else min(os.sched_getaffinity(0))})

    corpus = [(d.id, d.text) for d in stdlib_documents()]
    texts = [t for _, t in corpus]
    n, mb = len(corpus), sum(len(t.encode("utf-8")) for t in texts) / 1e6
    rules = LineRules()
    ours_steps = [F.MaxPageLength(rules.max_page_length), F.C4LineRules(rules)]
    cld2 = F.LanguageFilter(LanguageConfig(backend="cld2"))
    lmf_docs = lambda: [Document(id=i, text=t) for i, t in corpus]  # noqa: E731
    lang_run = lambda f: (lambda docs: [f(d, Counter()) is None for d in docs])  # noqa: E731

    variants = {"ours: C4 rules": (lmf_docs, lambda d: run_ours(ours_steps, d)),
                "ours: C4 rules + cld2": (lmf_docs, lambda d: run_ours(ours_steps + [cld2], d))}
    skipped = []
    if C4QualityFilter is not None:
        dt = datatrove_filter(rules)
        variants["datatrove: C4QualityFilter"] = (
            lambda: [DtDocument(text=t, id=i) for i, t in corpus], lambda d: run_datatrove(dt, d))
    else:
        skipped.append(f"datatrove ({DATATROVE_ERROR})")
    variants["ours: LanguageFilter cld2"] = (lmf_docs, lang_run(cld2))
    if langdetect is not None:
        ld = F.LanguageFilter(LanguageConfig(backend="langdetect"))
        langdetect.DetectorFactory.seed = 0
        variants["ours: LanguageFilter langdetect"] = (lmf_docs, lang_run(ld))
        variants["langdetect.detect_langs"] = (lambda: texts, run_langdetect_plain)
    else:
        skipped.append("langdetect (not installed)")

    print(f"{n} documents, {mb:.2f} MB; pinned to core {sorted(os.sched_getaffinity(0))}; "
          f"{args.reps} reps after a warm-up", file=sys.stderr)
    times, outputs = bench(variants, args.reps)

    def row(name):
        t = times[name]
        return {"docs_per_s": n / t["wall_s"], "mb_per_s": mb / t["wall_s"], **t,
                "docs_per_cpu_s": n / t["cpu_s"]}

    res = {"machine": machine(), "documents": n, "mb": mb, "reps": args.reps, "skipped": skipped,
           "throughput": {name: row(name) for name in variants}, "ratios": {}}
    th = res["throughput"]

    def ratio(a, b, label):
        if a in th and b in th:
            res["ratios"][label] = {"wall": th[b]["wall_s"] / th[a]["wall_s"], "cpu": th[b]["cpu_s"] / th[a]["cpu_s"]}

    ratio("ours: C4 rules", "datatrove: C4QualityFilter", "C4 rules: ours / datatrove")
    ratio("ours: C4 rules + cld2", "datatrove: C4QualityFilter", "C4 rules + cld2 (ours) / datatrove rules alone")
    ratio("ours: LanguageFilter cld2", "ours: LanguageFilter langdetect", "language ID: cld2 / langdetect")
    ratio("ours: LanguageFilter cld2", "langdetect.detect_langs", "language ID: cld2 / plain langdetect")

    ours_kept = outputs["ours: C4 rules"]
    res["ours_kept"] = sum(k is not None for k in ours_kept)
    if "datatrove: C4QualityFilter" in outputs:
        theirs = outputs["datatrove: C4QualityFilter"]
        both = [i for i in range(n) if ours_kept[i] is not None and theirs[i] is not None]
        res["agreement"] = {
            "datatrove_kept": sum(k is not None for k in theirs),
            "same_decision": sum((ours_kept[i] is None) == (theirs[i] is None) for i in range(n)),
            "kept_by_ours_only": sum(ours_kept[i] is not None and theirs[i] is None for i in range(n)),
            "kept_by_datatrove_only": sum(ours_kept[i] is None and theirs[i] is not None for i in range(n)),
            "both_kept": len(both), "both_kept_same_text": sum(ours_kept[i] == theirs[i] for i in both),
            **explain(corpus, rules, ours_kept, theirs)}
    if langdetect is not None:
        raw = language_agreement(texts, cld2, ld)
        raw["our_langdetect_vs_plain_same"] = sum(a == b for a, b in zip(
            outputs["ours: LanguageFilter langdetect"], outputs["langdetect.detect_langs"]))
        res["language_agreement"] = {"raw documents": raw, "after our C4 rules": language_agreement(
            [k for k in ours_kept if k is not None], cld2, ld)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")
    report(res)


def report(res: dict) -> None:
    m = res["machine"]
    print(f"\n{res['documents']} documents, {res['mb']:.3f} MB; {m['cpu']}, {m['cores']} cores, pinned to "
          f"{m['pinned_to']}; best of {res['reps']} after a warm-up\n")
    print("| step | docs/s | MB/s | best wall s | best CPU s |\n|---|---:|---:|---:|---:|")
    for name, t in res["throughput"].items():
        print(f"| {name} | {t['docs_per_s']:,.0f} | {t['mb_per_s']:.2f} | {t['wall_s']:.3f} | {t['cpu_s']:.3f} |")
    print("\n| ratio | wall | CPU |\n|---|---:|---:|" if res["ratios"] else "")
    for label, r in res["ratios"].items():
        print(f"| {label} | {r['wall']:.1f}x | {r['cpu']:.1f}x |")
    if "agreement" in res:
        a = res["agreement"]
        print(f"\nC4 rules: ours keep {res['ours_kept']}, datatrove keeps {a['datatrove_kept']}; same keep/drop on "
              f"{a['same_decision']}/{res['documents']} (ours only: {a['kept_by_ours_only']}, datatrove only: "
              f"{a['kept_by_datatrove_only']}); both keep {a['both_kept']}, same text {a['both_kept_same_text']}")
        for title, causes in (("keep/drop", a["decision_causes"]), ("kept text", a["kept_text_causes"])):
            print(f"\n| {title} disagreement explained by aligning | docs |\n|---|---:|")
            for cause, count in causes.items():
                print(f"| {cause} | {count} |")
        print(f"\nall differences aligned: identical result on {a['all_aligned_identical']}/{res['documents']}; "
              f"unexplained: {a['unexplained_ids'] or 'none'}")
    for where, la in res.get("language_agreement", {}).items():
        print(f"\nlanguage (en, p >= 0.99), {where}: {la}")
    for s in res["skipped"]:
        print(f"skipped: {s}")


if __name__ == "__main__":
    main()
