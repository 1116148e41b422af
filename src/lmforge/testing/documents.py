"""Seeded generators of English-like documents and pages (with cases on both sides of every C4
rule), for the tests and the benchmarks of the cleaning, tokenizing and fine-tuning stages."""

import json
import random

WORDS = (
    "the of and to in is was for on that with as by at from his her they we you are this have not be or had "
    "an which one their all were when there can been has more if will would who so out no what up about into "
    "than them only other its time some could these two may first then do any like my now over such our man "
    "me even most made after also did many before must through back years where much your way well down should "
    "because each just those people how too little state good very make world still own see men work long get "
    "here between both life being under never day same another know while last might us great old year off come "
    "since against go came right used take three"
).split()


def sentence(rng: random.Random, n_words: int | None = None) -> str:
    n = n_words or rng.randint(8, 14)
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def page(rng: random.Random, lines: int = 4, per_line: int = 2) -> str:
    return "\n".join(" ".join(sentence(rng) for _ in range(per_line)) for _ in range(lines))


def write_jsonl(path, docs) -> str:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return str(path)


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize()


def _rule_line(rng: random.Random) -> str:
    """One line of a web page, drawn so that every C4 line and page rule has cases on both
    sides of its threshold (word counts around 5, pages around 3 sentences)."""
    kind = rng.choices(
        ["clean", "short", "no_end", "other_end", "ellipsis", "citation", "javascript", "lorem", "curly",
         "policy", "long_word", "blank", "abbreviation", "unicode"],
        weights=[30, 14, 6, 8, 3, 8, 3, 1, 2, 3, 1, 3, 4, 3],
    )[0]
    pad = rng.choice(["", "", " ", "\t", "  "])
    if kind == "clean":
        line = " ".join(sentence(rng, rng.randint(3, 12)) for _ in range(rng.randint(1, 3)))
    elif kind == "short":  # 1-7 words: around min_words_per_line
        line = sentence(rng, rng.randint(1, 7))
    elif kind == "no_end":
        line = _words(rng, rng.randint(3, 10)) + rng.choice(["", ",", ":", ";", " -", ")"])
    elif kind == "other_end":  # the end marks C4 accepts, and the one only datatrove accepts
        n = rng.randint(3, 9)
        line = rng.choice([_words(rng, n) + "?", _words(rng, n) + "!", f'He said "{_words(rng, n)}."',
                           f'{_words(rng, n)} "quoted"', f"{_words(rng, n)} 'quoted'", f"{_words(rng, n)}.'"])
    elif kind == "ellipsis":
        line = _words(rng, rng.randint(3, 9)) + rng.choice(["...", "....", ". . ."])
    elif kind == "citation":  # a marker removed before the end-mark rule; words counted before or after
        n = rng.randint(3, 7)
        marker = rng.choice(["[1]", "[23]", "[]", "[edit]", "[citation needed]"])
        line = rng.choice([f"{_words(rng, n)}.{marker}", f"{_words(rng, n)}. {marker}", f"{_words(rng, n)} {marker}.",
                           f"{marker} {_words(rng, n)}.", f"{_words(rng, n)}.{marker}{marker}"])
    elif kind == "javascript":
        line = rng.choice(["Please enable JavaScript to view this page.", "You need javascript for this site to work.",
                           "Javascript is off.", f"{_words(rng, 4)} with JAVASCRIPT here."])
    elif kind == "lorem":
        line = rng.choice(["Lorem ipsum dolor sit amet, consectetur adipiscing elit.", "LOREM IPSUM is a filler text here.",
                           "Lorem ipsum dolor", "Some lorem ipsum."])
    elif kind == "curly":
        line = rng.choice(["function f() { return 1; }", "The set {a, b} has two members here.",
                           "Use {braces} for the template values.", "A {b}.", "{"])
    elif kind == "policy":
        line = rng.choice(["By using this site you agree to our terms of use.", "Read our Privacy Policy for more details.",
                           "This website uses cookies to improve your experience.", "Privacy policy.",
                           "We use cookies on this site to help you."])
    elif kind == "long_word":
        line = f"{_words(rng, 4)} {'x' * rng.choice([999, 1000, 1001, 1500])} here."
    elif kind == "blank":
        line = rng.choice(["", " ", "\t", "   "])
    elif kind == "abbreviation":  # sentence boundaries the splitter must not take (or must)
        line = rng.choice([f"Dr. Smith said {_words(rng, 5).lower()}.", f"It was {_words(rng, 3).lower()} e.g. this one. "
                           f"{sentence(rng, 6)}", f"J. R. Tolkien wrote {_words(rng, 4).lower()}.",
                           f"{sentence(rng, 5)} {sentence(rng, 5)} {sentence(rng, 5)}"])
    else:  # non-ASCII: the rules' slow path
        line = rng.choice([f"Café {_words(rng, 5).lower()}.", f"Naïve {_words(rng, 2).lower()}.",
                           f"Über {_words(rng, 6).lower()} JavaScript.", f"İstanbul {_words(rng, 5).lower()}."])
    return pad + line + rng.choice(["", "", " "])


def rule_page(rng: random.Random, max_lines: int = 8) -> str:
    """A page of 1..max_lines lines from ``_rule_line``: about half of them pass C4's rules."""
    return "\n".join(_rule_line(rng) for _ in range(rng.randint(1, max_lines)))
