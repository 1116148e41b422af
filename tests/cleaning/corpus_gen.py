"""Seeded generators of English-like documents for cleaning tests."""

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
