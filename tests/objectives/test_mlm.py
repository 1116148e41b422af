"""Statistical tests of the masked-LM objectives: their defining numbers on synthetic corpora.

Tolerances are K_SIGMA binomial standard deviations of the measured fraction, sqrt(p(1-p)/n),
with n the number of positions (or examples) measured; fixed seeds make every run identical,
so a pass is not luck that can change between runs.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from lmforge.objectives import masking
from lmforge.objectives.base import IGNORE_INDEX, Corpus, Document, ObjectiveError, Vocab, rng_for
from lmforge.objectives.knowledge_masking import KnowledgeMLM, _gram_hashes, _words
from lmforge.objectives.mlm import MLM
from lmforge.objectives.sentence_pairs import MLMNextSentence, MLMSentenceOrder, _truncation_counts

VOCAB = Vocab(size=1000, pad=0, unk=1, cls=2, sep=3, mask=4, special_ids=frozenset({0, 1, 2, 3, 4}))
SPECIALS = np.array(sorted(VOCAB.special_ids))
K_SIGMA = 4.5  # a fixed-seed run this far off would be a real bias, not noise


def tolerance(p: float, n: int) -> float:
    return K_SIGMA * math.sqrt(p * (1 - p) / n)


# ---------------------------------------------------------------------------------------------
# synthetic corpora


def words_to_doc(words: list[tuple[int, ...]], sentence_flags: list[bool], index: int) -> Document:
    tokens, word_starts, sentence_starts = [], [], []
    for word, first in zip(words, sentence_flags):
        for j, t in enumerate(word):
            tokens.append(t)
            word_starts.append(j == 0)
            sentence_starts.append(first and j == 0)
    return Document(np.array(tokens, dtype=np.int64), np.array(word_starts), np.array(sentence_starts), index)


def random_corpus(n_docs: int, seed: int, sentences=(2, 12), unk_rate: float = 0.01) -> Corpus:
    """Documents of random words (1-3 tokens in [10, 1000)), 3-19 words a sentence, with a few
    [UNK] tokens in the text (special, so never to be chosen)."""
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(n_docs):
        words, flags = [], []
        for _ in range(rng.integers(*sentences)):
            for w in range(rng.integers(3, 20)):
                word = rng.integers(10, 1000, size=rng.integers(1, 4))
                word[rng.random(len(word)) < unk_rate] = VOCAB.unk
                words.append(tuple(int(t) for t in word))
                flags.append(w == 0)
        docs.append(words_to_doc(words, flags, d))
    return Corpus(docs)


def ordered_corpus(n_docs: int = 16, seed: int = 0) -> Corpus:
    """Document d holds the increasing ids 10 + 60 d, 10 + 60 d + 1, ...: an id tells its
    document and its place in it."""
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(n_docs):
        n = int(rng.integers(30, 61))
        tokens = 10 + 60 * d + np.arange(n)
        word_starts = rng.random(n) < 0.7
        word_starts[0] = True
        sentence_starts = word_starts & (rng.random(n) < 0.25)
        sentence_starts[0] = True
        docs.append(Document(tokens.astype(np.int64), word_starts, sentence_starts, d))
    return Corpus(docs)


def doc_of(ids: np.ndarray) -> np.ndarray:
    return (ids - 10) // 60


def originals(example: dict) -> np.ndarray:
    """The unmasked ids: labels where predicted, inputs elsewhere."""
    return np.where(example["labels"] != IGNORE_INDEX, example["labels"], example["input_ids"])


def segments(example: dict) -> tuple[np.ndarray, np.ndarray]:
    """Original ids of A and B in ``[CLS] A [SEP] B [SEP]``."""
    ids = originals(example)
    seps = np.flatnonzero(example["input_ids"] == VOCAB.sep)
    assert example["input_ids"][0] == VOCAB.cls and len(seps) == 2 and seps[1] == len(ids) - 1
    return ids[1 : seps[0]], ids[seps[0] + 1 : seps[1]]


def build(objective, n: int | None = None, seed: int = 0, epoch: int = 0) -> list[dict]:
    n = len(objective) if n is None else min(n, len(objective))
    return [objective.example(i, rng_for(seed, epoch, i)) for i in range(n)]


@pytest.fixture(scope="module")
def corpus():
    return random_corpus(400, seed=1, sentences=(2, 16))  # ~80k tokens, ~650 chunks of <= 126


@pytest.fixture(scope="module")
def token_examples(corpus):
    objective = MLM(corpus, VOCAB)
    return objective, build(objective)


# ---------------------------------------------------------------------------------------------
# primitives


def test_prediction_budget_is_googles_exact_count():
    assert masking.prediction_budget(126, 0.15, 20) == 19  # round(18.9)
    assert masking.prediction_budget(510, 0.15, 20) == 20  # capped
    assert masking.prediction_budget(3, 0.15, 20) == 1  # at least one
    assert masking.prediction_budget(10, 0.25, None) == 3  # round half up: 2.5 -> 3
    assert masking.prediction_budget(0, 0.15, 20) == 0


def test_truncation_counts_match_berts_one_token_at_a_time_loop():
    for la in range(0, 30):
        for lb in range(0, 30):
            a, b, ra, rb = la, lb, 0, 0
            while a + b > 20:  # truncate_seq_pair: the longer side, B on ties
                if a > b:
                    a, ra = a - 1, ra + 1
                else:
                    b, rb = b - 1, rb + 1
            assert _truncation_counts(la, lb, 20) == (ra, rb)


def test_ngram_lengths_follow_one_over_n():
    """Tiled n-grams follow 6/11, 3/11, 2/11; chosen n-grams too, up to the budget fitting."""
    rng = np.random.default_rng(0)
    length = 512
    eligible = np.ones(length, dtype=bool)
    eligible[[0, 255, length - 1]] = False  # [CLS] A [SEP] B [SEP]: runs end at specials
    word_starts = np.ones(length, dtype=bool)  # one-token words: lengths in words = in tokens
    tiled, chosen = [], []
    for _ in range(150):
        starts = masking.ngram_unit_starts(word_starts, eligible, 3, rng)
        ids = masking.unit_ids(starts, eligible)
        lengths = np.bincount(ids[ids >= 0])
        picked = masking.choose_units(starts, eligible, 0.15, None, rng)
        tiled.append(lengths)
        chosen.append(lengths[np.unique(ids[picked])])
        # n-grams never cross a special token
        assert not starts[~eligible].any() and starts[1] and starts[256]
    expected = np.array([6, 3, 2]) / 11
    tiled, chosen = np.concatenate(tiled), np.concatenate(chosen)
    assert len(tiled) > 10_000 and len(chosen) > 10_000 * 0.15
    for n in (1, 2, 3):
        # tiling: the draws themselves, cut only at the 3 run ends of each sequence
        assert abs(np.mean(tiled == n) - expected[n - 1]) < tolerance(expected[n - 1], len(tiled)) + 0.003
        # choosing: skipping n-grams that overshoot the budget favours 1-grams slightly (docstring)
        assert abs(np.mean(chosen == n) - expected[n - 1]) < tolerance(expected[n - 1], len(chosen)) + 0.015


def test_units_never_span_specials_and_are_chosen_whole():
    rng = np.random.default_rng(3)
    starts = np.array([0, 1, 0, 0, 1, 0, 0, 1, 0, 0], dtype=bool)
    eligible = np.array([0, 1, 1, 1, 1, 0, 1, 1, 1, 0], dtype=bool)
    assert masking.unit_ids(starts, eligible).tolist() == [-1, 0, 0, 0, 1, -1, 2, 3, 3, -1]
    for _ in range(200):
        chosen = masking.choose_units(starts, eligible, 0.5, None, rng)
        assert not chosen[~eligible].any()
        ids = masking.unit_ids(starts, eligible)
        for u in range(4):
            assert chosen[ids == u].all() or not chosen[ids == u].any()


# ---------------------------------------------------------------------------------------------
# BERT MLM


def test_mlm_mask_rate_and_80_10_10(token_examples):
    objective, examples = token_examples
    stats = objective.statistics(examples)
    n = stats["predictions"]
    assert stats["eligible_tokens"] > 60_000 and n > 10_000
    # the exact count: round(n_eligible * 0.15) per example, so only rounding separates it from 0.15
    for e in examples:
        eligible = int((e["special_tokens_mask"] == 0).sum())
        assert int((e["labels"] != IGNORE_INDEX).sum()) == masking.prediction_budget(eligible, 0.15, 20)
    assert abs(stats["mask_rate"] - 0.15) < 0.003
    assert abs(stats["mask_token_fraction"] - 0.8) < tolerance(0.8, n)
    assert abs(stats["random_token_fraction"] - 0.1) < tolerance(0.1, n)
    assert abs(stats["unchanged_fraction"] - 0.1) < tolerance(0.1, n)
    assert objective.max_predictions == 20  # ceil(128 * 0.15): BERT's max_predictions_per_seq


def test_mlm_bernoulli_rate(corpus):
    objective = MLM(corpus, VOCAB, MLM.Config(exact_count=False))
    assert objective.max_predictions is None
    stats = objective.statistics(build(objective))
    assert abs(stats["mask_rate"] - 0.15) < tolerance(0.15, stats["eligible_tokens"])
    assert stats["max_predictions_seen"] > 20  # no cap: the Binomial's upper tail is kept


def test_mlm_labels_specials_and_layout(corpus, token_examples):
    objective, examples = token_examples
    random_seen = unk_in_text = 0
    for (d, s, e), example in zip(objective.chunks, examples):
        content = corpus[int(d)].tokens[s:e]
        ids, labels = example["input_ids"], example["labels"]
        assert len(ids) <= 128 and set(example) == {"input_ids", "labels", "token_type_ids", "special_tokens_mask"}
        assert ids[0] == VOCAB.cls and ids[-1] == VOCAB.sep and (example["token_type_ids"] == 0).all()
        original = np.concatenate([[VOCAB.cls], content, [VOCAB.sep]])
        special = np.isin(original, SPECIALS)
        assert (example["special_tokens_mask"] == special).all()
        chosen = labels != IGNORE_INDEX
        assert not chosen[special].any()  # [CLS], [SEP] and [UNK] in the text never chosen
        assert (labels[chosen] == original[chosen]).all()  # labels: the original ids ...
        assert (labels[~chosen] == IGNORE_INDEX).all()  # ... and -100 elsewhere
        assert (ids[~chosen] == original[~chosen]).all()  # unchosen inputs untouched
        random_seen += int((~np.isin(ids[chosen], SPECIALS) & (ids[chosen] != original[chosen])).sum())
        assert not np.isin(ids[chosen], [VOCAB.cls, VOCAB.sep, VOCAB.pad, VOCAB.unk]).any()  # random ids are non-special
        unk_in_text += int((content == VOCAB.unk).sum())
    assert random_seen > 1000 and unk_in_text > 100


def test_whole_word_masking_masks_whole_words(corpus):
    objective = MLM(corpus, VOCAB, MLM.Config(masking="whole_word"))
    examples = build(objective)
    multi_token_chosen = 0
    for (d, s, e), example in zip(objective.chunks, examples):
        doc = corpus[int(d)].slice(s, e)
        chosen = example["labels"][1:-1] != IGNORE_INDEX
        eligible = ~np.isin(doc.tokens, SPECIALS)
        words = masking.unit_ids(doc.word_starts, eligible)
        for w in np.unique(words[chosen]):
            assert chosen[words == w].all()  # a word is chosen whole or not at all
            multi_token_chosen += int((words == w).sum() > 1)
    stats = objective.statistics(examples)
    assert stats["predictions"] > 10_000 and multi_token_chosen > 1000
    assert abs(stats["mask_rate"] - 0.15) < 0.005  # the budget is met, never exceeded
    assert stats["max_predictions_seen"] <= 20
    assert abs(stats["mask_token_fraction"] - 0.8) < tolerance(0.8, stats["predictions"])


def test_ngram_masking_runs_are_longer(corpus):
    objective = MLM(corpus, VOCAB, MLM.Config(masking="ngram"))
    stats = objective.statistics(build(objective))
    whole_word = MLM(corpus, VOCAB, MLM.Config(masking="whole_word"))
    assert abs(stats["mask_rate"] - 0.15) < 0.005
    assert stats["masked_run_length_mean"] > whole_word.statistics(build(whole_word))["masked_run_length_mean"] + 0.5


def test_determinism_and_dynamic_masking(corpus):
    for objective in (MLM(corpus, VOCAB), MLMNextSentence(corpus, VOCAB), MLMSentenceOrder(corpus, VOCAB)):
        for i in range(20):
            a, b = objective.example(i, rng_for(7, 0, i)), objective.example(i, rng_for(7, 0, i))
            assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    mlm = MLM(corpus, VOCAB)
    differs = [
        not np.array_equal(mlm.example(i, rng_for(7, 0, i))["labels"], mlm.example(i, rng_for(7, 1, i))["labels"])
        for i in range(50)
    ]
    assert sum(differs) >= 49  # a new epoch re-draws the masks


# ---------------------------------------------------------------------------------------------
# NSP and SOP


def test_nsp_label_balance_and_segments():
    corpus = ordered_corpus()
    objective = MLMNextSentence(corpus, VOCAB, MLMNextSentence.Config(max_length=32))
    forced, free = [], []
    for epoch in range(80):
        for i in range(len(objective)):
            example = objective.example(i, rng_for(0, epoch, i))
            a, b = segments(example)
            assert len(example["input_ids"]) <= 32 and len(a) >= 1 and len(b) >= 1
            assert (example["token_type_ids"] == np.r_[np.zeros(len(a) + 2), np.ones(len(b) + 1)]).all()
            label = int(example["next_sentence_label"])
            assert example["next_sentence_label"].shape == ()
            d = int(objective.chunks[i, 0])
            assert (doc_of(a) == d).all()
            if label == 0:  # IsNext: B follows A in A's document
                assert (doc_of(b) == d).all() and b.min() > a.max()
            else:  # NotNext: B from one other document
                assert len(set(doc_of(b).tolist())) == 1 and doc_of(b)[0] != d
            # only a one-sentence document has no true pair: NotNext is forced there
            doc, start = corpus[d], int(objective.chunks[i, 1])
            one_sentence = start == 0 and not doc.sentence_starts[1:].any()
            (forced if one_sentence else free).append(label)
    assert all(forced)
    assert len(free) > 2000
    assert abs(np.mean(free) - 0.5) < tolerance(0.5, len(free))


def test_nsp_truncation_keeps_the_limit_and_short_sequences():
    corpus = random_corpus(60, seed=5, sentences=(3, 12))
    mean_lengths = []
    for short_seq_prob in (0.0, 0.5):
        objective = MLMNextSentence(corpus, VOCAB, MLMNextSentence.Config(max_length=64, short_seq_prob=short_seq_prob))
        examples = [e for epoch in range(10) for e in build(objective, seed=3, epoch=epoch)]
        lengths = np.array([len(e["input_ids"]) for e in examples])
        assert lengths.max() == 64 and (lengths <= 64).all()
        assert abs(objective.statistics(examples)["mask_rate"] - 0.15) < 0.01
        mean_lengths.append(lengths.mean())
    # targets uniform in [2, 61] half the time; whole sentences (~22 tokens here) are then
    # gathered until they reach it, so short examples overshoot their targets (as in BERT)
    assert mean_lengths[1] < mean_lengths[0] - 2.5


def test_sop_same_document_and_balance():
    corpus = ordered_corpus()
    objective = MLMSentenceOrder(corpus, VOCAB, MLMSentenceOrder.Config(max_length=32))
    labels = []
    for epoch in range(60):
        for i in range(len(objective)):
            example = objective.example(i, rng_for(0, epoch, i))
            a, b = segments(example)
            assert len(example["input_ids"]) <= 32
            label = int(example["sentence_order_label"])
            d = int(objective.chunks[i, 0])
            assert (doc_of(a) == d).all() and (doc_of(b) == d).all()  # negatives from the same document
            if label == 0:
                assert a.max() < b.min()
            else:  # the same two segments, swapped
                assert a.min() > b.max()
            labels.append(label)
    assert len(labels) > 2000
    assert abs(np.mean(labels) - 0.5) < tolerance(0.5, len(labels))
    stats = objective.statistics([objective.example(i, rng_for(0, 0, i)) for i in range(len(objective))])
    assert "swapped_fraction" in stats


def test_sop_uses_ngram_masking_by_default(corpus):
    objective = MLMSentenceOrder(corpus, VOCAB)
    assert objective.config.masking == "ngram"
    stats = objective.statistics(build(objective))
    assert stats["predictions"] > 10_000
    assert abs(stats["mask_rate"] - 0.15) < 0.005
    assert abs(stats["swapped_fraction"] - 0.5) < tolerance(0.5, stats["examples"])


def test_nsp_needs_two_documents():
    with pytest.raises(ObjectiveError, match="mlm_nsp: needs at least 2 non-empty documents"):
        MLMNextSentence(random_corpus(1, seed=0), VOCAB)


def test_examples_batch_through_pad_batch(corpus):
    pytest.importorskip("torch")
    from lmforge.objectives.features import pad_batch

    objective = MLMNextSentence(corpus, VOCAB, MLMNextSentence.Config(short_seq_prob=1.0))
    examples = build(objective, n=8)
    batch = pad_batch(examples, pad_id=VOCAB.pad)
    longest = max(len(e["input_ids"]) for e in examples)
    assert batch["input_ids"].shape == (8, longest) and batch["next_sentence_label"].shape == (8,)
    for i, e in enumerate(examples):
        n = len(e["input_ids"])
        assert batch["attention_mask"][i].sum() == n
        assert (batch["labels"][i, n:] == IGNORE_INDEX).all() and (batch["input_ids"][i, n:] == VOCAB.pad).all()
        assert (batch["special_tokens_mask"][i, n:] == 1).all()
        assert (batch["token_type_ids"][i, :n].numpy() == e["token_type_ids"]).all()


# ---------------------------------------------------------------------------------------------
# ERNIE knowledge masking


def knowledge_corpus(seed: int = 0, n_docs: int = 300):
    """Zipfian words with planted *entities* (2-3 words used nowhere else) and *phrases* (two
    frequent words that also occur apart)."""
    rng = np.random.default_rng(seed)
    seen: set[tuple[int, ...]] = set()

    def new_word():
        while True:
            word = tuple(int(t) for t in rng.integers(10, 1000, size=rng.integers(1, 3)))
            if word not in seen:
                seen.add(word)
                return word

    lexicon = [new_word() for _ in range(300)]
    zipf = 1 / np.arange(1, 301)
    zipf /= zipf.sum()
    entities = [tuple(new_word() for _ in range(rng.integers(2, 4))) for _ in range(6)]
    phrases = [(lexicon[i], lexicon[i + 1]) for i in range(10, 22, 2)]
    docs = []
    for d in range(n_docs):
        words, flags = [], []
        for _ in range(rng.integers(5, 15)):
            first = True
            for _ in range(rng.integers(6, 16)):
                u = rng.random()
                if u < 0.06:
                    unit = entities[rng.integers(len(entities))]
                elif u < 0.08:
                    unit = phrases[rng.integers(len(phrases))]
                else:
                    unit = (lexicon[rng.choice(300, p=zipf)],)
                for word in unit:
                    words.append(word)
                    flags.append(first)
                    first = False
        docs.append(words_to_doc(words, flags, d))
    return Corpus(docs), entities, phrases


def gram_hash(words: tuple[tuple[int, ...], ...]) -> np.uint64:
    doc = words_to_doc(list(words), [True] + [False] * (len(words) - 1), 0)
    _, hashes, sentence = _words(doc.tokens, doc.word_starts, doc.sentence_starts)
    return _gram_hashes(hashes, sentence, len(words))[len(words)][0][0]


@pytest.fixture(scope="module")
def knowledge():
    return knowledge_corpus()


def test_unit_tables_find_planted_entities_and_phrases(knowledge):
    corpus, entities, phrases = knowledge
    objective = KnowledgeMLM(corpus, VOCAB)
    for entity in entities:  # parts never occur apart: npmi 1
        assert gram_hash(entity) in objective.tables["entity"][len(entity)]
    # phrases: the table's class agrees with an independent bigram NPMI count
    unigrams, bigrams, total = Counter(), Counter(), 0
    for d in range(len(corpus)):
        doc = corpus[d]
        bounds = np.append(np.flatnonzero(doc.word_starts), len(doc))
        words = [tuple(doc.tokens[a:b].tolist()) for a, b in zip(bounds[:-1], bounds[1:])]
        new_sentence = doc.sentence_starts[bounds[:-1]]
        total += len(words)
        unigrams.update(words)
        bigrams.update((words[i], words[i + 1]) for i in range(len(words) - 1) if not new_sentence[i + 1])
    classes = []
    for a, b in phrases:
        p_ab = bigrams[(a, b)] / total
        npmi = math.log(p_ab / (unigrams[a] / total * unigrams[b] / total)) / -math.log(p_ab)
        expected = "entity" if npmi >= 0.65 else "phrase" if npmi >= 0.4 else None
        got = [level for level in ("phrase", "entity") if gram_hash((a, b)) in objective.tables[level][2]]
        assert got == ([expected] if expected else [])
        classes.append(expected)
    assert classes.count("phrase") >= 4


@pytest.mark.parametrize("level", ["basic", "phrase", "entity"])
def test_knowledge_masking_masks_whole_units(knowledge, level):
    corpus, _, _ = knowledge
    weights = {f"{lv}_weight": float(lv == level) for lv in ("basic", "phrase", "entity")}
    objective = KnowledgeMLM(corpus, VOCAB, KnowledgeMLM.Config(**weights))
    examples = build(objective)
    multi_word_units = 0
    for (d, s, e), example in zip(objective.chunks, examples):
        chunk = corpus[int(d)].slice(s, e)
        chosen = example["labels"][1:-1] != IGNORE_INDEX
        units = masking.unit_ids(objective.unit_starts(chunk, level), np.ones(len(chunk), dtype=bool))
        words = masking.unit_ids(chunk.word_starts, np.ones(len(chunk), dtype=bool))
        for u in np.unique(units[chosen]):
            assert chosen[units == u].all()  # whole units only
            multi_word_units += len(np.unique(words[units == u])) > 1
    stats = objective.statistics(examples)
    assert stats["eligible_tokens"] > 50_000
    # each unit with p = 0.15: the token fraction is 0.15 in expectation; units of up to ~6
    # tokens make positions correlated, so the tolerance uses the number of units (~tokens / 2)
    assert abs(stats["mask_rate"] - 0.15) < tolerance(0.15, stats["eligible_tokens"] // 3)
    assert abs(stats["mask_token_fraction"] - 0.8) < tolerance(0.8, stats["predictions"])
    assert abs(stats["random_token_fraction"] - 0.1) < tolerance(0.1, stats["predictions"])
    if level == "basic":
        assert multi_word_units == 0
    else:
        assert multi_word_units > 50


def test_knowledge_masking_mixes_levels(knowledge):
    corpus, _, _ = knowledge
    objective = KnowledgeMLM(corpus, VOCAB)
    assert np.allclose(objective.level_probs, 1 / 3)
    stats = objective.statistics(build(objective))
    assert abs(stats["mask_rate"] - 0.15) < 0.01 and stats["entity_table_size"] > 0 and stats["phrase_table_size"] > 0


# ---------------------------------------------------------------------------------------------
# parameters and vocabulary


@pytest.mark.parametrize(
    ("objective", "params", "parameter"),
    [
        (MLM, {"mask_rate": 1.5}, "mask_rate"),
        (MLM, {"mask_rate": 0.0}, "mask_rate"),
        (MLM, {"mask_token_prob": -0.1}, "mask_token_prob"),
        (MLM, {"random_token_prob": 1.2}, "random_token_prob"),
        (MLM, {"mask_token_prob": 0.9, "random_token_prob": 0.2}, "mask_token_prob \\+ random_token_prob"),
        (MLM, {"max_length": 2}, "max_length"),
        (MLM, {"masking": "span"}, "masking"),
        (MLM, {"max_predictions": 0}, "max_predictions"),
        (MLM, {"max_ngram": 0}, "max_ngram"),
        (MLMNextSentence, {"short_seq_prob": 1.5}, "short_seq_prob"),
        (MLMNextSentence, {"max_length": 4}, "max_length"),
        (MLMSentenceOrder, {"masking": "words"}, "masking"),
        (KnowledgeMLM, {"basic_weight": -1.0}, "basic_weight"),
        (KnowledgeMLM, {"basic_weight": 0.0, "phrase_weight": 0.0, "entity_weight": 0.0}, "basic_weight"),
        (KnowledgeMLM, {"entity_min_npmi": 0.3}, "entity_min_npmi"),
        (KnowledgeMLM, {"min_count": 0}, "min_count"),
        (KnowledgeMLM, {"max_unit_words": 1}, "max_unit_words"),
    ],
)
def test_bad_parameters_name_the_parameter(objective, params, parameter):
    corpus = random_corpus(3, seed=0)
    with pytest.raises(ObjectiveError, match=f"^{objective.name}: {parameter}"):
        objective(corpus, VOCAB, objective.Config(**params))


def test_unknown_parameter_is_rejected():
    with pytest.raises(ValueError, match="mask_prob"):
        MLM.Config(mask_prob=0.15)


@pytest.mark.parametrize("objective", [MLM, MLMNextSentence, MLMSentenceOrder, KnowledgeMLM])
def test_vocab_without_mask_token_fails_clearly(objective):
    no_mask = Vocab(size=1000, pad=0, cls=2, sep=3, special_ids=frozenset({0, 2, 3}))
    with pytest.raises(ObjectiveError, match=f"{objective.name}: the tokenizer has no mask token"):
        objective(random_corpus(3, seed=0), no_mask)


def test_one_sentence_documents():
    """NSP can only make NotNext pairs of a one-sentence document; SOP cuts it in two."""
    corpus = ordered_corpus()
    docs = [corpus[d] for d in range(len(corpus))]
    first_only = [np.arange(len(d)) == 0 for d in docs]  # one sentence start: the first token
    one_sentence = Corpus([Document(d.tokens, d.word_starts, f, d.index) for d, f in zip(docs, first_only)])
    nsp = MLMNextSentence(one_sentence, VOCAB, MLMNextSentence.Config(max_length=128))
    assert all(int(nsp.example(i, rng_for(0, 0, i))["next_sentence_label"]) == 1 for i in range(len(nsp)))
    sop = MLMSentenceOrder(one_sentence, VOCAB, MLMSentenceOrder.Config(max_length=128))
    labels = []
    for epoch in range(20):
        for i in range(len(sop)):
            example = sop.example(i, rng_for(0, epoch, i))
            a, b = segments(example)
            first, second = (a, b) if int(example["sentence_order_label"]) == 0 else (b, a)
            whole = corpus[int(sop.chunks[i, 0])].tokens
            assert np.array_equal(np.concatenate([first, second]), whole)  # the whole document, cut once
            labels.append(int(example["sentence_order_label"]))
    assert abs(np.mean(labels) - 0.5) < tolerance(0.5, len(labels))
