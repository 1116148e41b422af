"""The task families' metrics against hand computations and the reference libraries."""

import math
import random
import subprocess
import sys
import warnings

import numpy as np
import pytest
import sacrebleu
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score

from lmforge.finetuning.generation.metrics import bleu, generation_scores, rouge
from lmforge.finetuning.generation.metrics import exact_match as generation_exact_match
from lmforge.finetuning.regression.metrics import correlations
from lmforge.finetuning.span_qa.metrics import exact_match, normalize_answer, squad_scores, token_f1
from lmforge.finetuning.tagging.metrics import entity_scores
from lmforge.finetuning.tasks.tagging_files import to_iob2
from lmforge.testing.documents import WORDS

# --- tagging -----------------------------------------------------------------------------------

# John Smith lives in New York . / Apple hired Mary . / It rained all day . / Google and IBM
GOLD = [
    ["B-PER", "I-PER", "O", "O", "B-LOC", "I-LOC", "O"],
    ["B-ORG", "O", "B-PER", "O"],
    ["O", "O", "O", "O", "O"],
    ["B-ORG", "O", "B-ORG"],
]
PRED = [
    ["B-PER", "I-PER", "O", "O", "B-LOC", "O", "O"],  # New York found as "New": partial, wrong
    ["B-LOC", "O", "B-PER", "O"],  # Apple as a LOC: wrong type
    ["O", "O", "O", "O", "O"],  # no entities
    ["B-ORG", "O", "O"],  # IBM missed
]
# gold entities: PER John Smith, LOC New York, ORG Apple, PER Mary, ORG Google, ORG IBM = 6
# predicted: PER John Smith (right), LOC New (wrong), LOC Apple (wrong), PER Mary (right),
#            ORG Google (right) = 5, 3 right -> P = 3/5, R = 3/6, F1 = 2PR/(P+R) = 0.6/1.1 = 6/11
# words 7 + 4 + 5 + 3 = 19, tags wrong: York, Apple, IBM -> token accuracy 16/19


def test_entity_scores_by_hand():
    s = entity_scores(PRED, GOLD)
    assert s["precision"] == pytest.approx(3 / 5)
    assert s["recall"] == pytest.approx(3 / 6)
    assert s["f1"] == pytest.approx(6 / 11)
    assert s["token_accuracy"] == pytest.approx(16 / 19)
    assert (s["entities"], s["predicted_entities"], s["sentences"]) == (6, 5, 4)
    # PER: 2 gold, 2 predicted, 2 right; LOC: 1 gold, 2 predicted, 0 right; ORG: 3 gold, 1 predicted, 1 right
    assert s["per_type"]["PER"] == pytest.approx({"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 2})
    assert s["per_type"]["LOC"] == pytest.approx({"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1})
    assert s["per_type"]["ORG"] == pytest.approx({"precision": 1.0, "recall": 1 / 3, "f1": 0.5, "support": 3})
    assert set(s["per_type"]) == {"PER", "LOC", "ORG"}


def test_entity_scores_are_seqevals_and_plain_python():
    s = entity_scores(PRED, GOLD)
    assert s["precision"] == precision_score(GOLD, PRED)
    assert s["recall"] == recall_score(GOLD, PRED)
    assert s["f1"] == f1_score(GOLD, PRED)
    report = classification_report(GOLD, PRED, output_dict=True)
    for kind, row in s["per_type"].items():
        assert row == pytest.approx({"precision": report[kind]["precision"], "recall": report[kind]["recall"],
                                     "f1": report[kind]["f1-score"], "support": report[kind]["support"]})
        assert type(row["f1"]) is float and type(row["support"]) is int
    assert all(type(s[k]) is float for k in ("precision", "recall", "f1", "token_accuracy"))
    assert all(type(s[k]) is int for k in ("entities", "predicted_entities", "sentences"))


def test_entity_scores_perfect_and_empty_prediction():
    assert entity_scores(GOLD, GOLD)["f1"] == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # undefined precision is 0, without seqeval's warning
        none = entity_scores([["O"] * len(g) for g in GOLD], GOLD)
    assert (none["precision"], none["recall"], none["f1"], none["predicted_entities"]) == (0.0, 0.0, 0.0, 0)


def test_entity_scores_iob1_reads_like_iob2():
    iob1 = [["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]]
    iob2 = [to_iob2(iob1[0])]
    assert entity_scores(iob1, iob2)["f1"] == 1.0
    assert entity_scores(iob1, iob2)["entities"] == 3


def test_entity_scores_bad_input():
    with pytest.raises(ValueError, match="sentence 1 has 3 predicted tags for 4 gold tags"):
        entity_scores([["O"], ["O", "O", "O"]], [["O"], ["O", "O", "O", "O"]])
    with pytest.raises(ValueError, match="entity_scores: 1 predicted sentences for 2"):
        entity_scores([["O"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match="no sentences"):
        entity_scores([], [])
    with pytest.raises(ValueError, match="string"):
        entity_scores(["B-PER", "O"], ["B-PER", "O"])


@pytest.mark.parametrize("iob1, iob2", [
    (["I-PER", "I-PER", "O", "I-LOC"], ["B-PER", "I-PER", "O", "B-LOC"]),
    (["I-PER", "B-PER", "I-PER"], ["B-PER", "B-PER", "I-PER"]),  # B-X inside IOB1: a second entity
    (["I-ORG", "I-LOC", "I-LOC"], ["B-ORG", "B-LOC", "I-LOC"]),  # a change of type starts one
    (["O", "O"], ["O", "O"]),
    ([], []),
])
def test_to_iob2(iob1, iob2):
    assert to_iob2(iob1) == iob2
    assert to_iob2(iob2) == iob2  # IOB2 comes back unchanged


def test_to_iob2_bad_tags():
    for bad in (["O", "E-PER"], ["B-"], ["PER"], ["o"], ["O", None]):
        with pytest.raises(ValueError, match="to_iob2"):
            to_iob2(bad)


# --- spans -------------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, normal", [
    ("The Denver Broncos", "denver broncos"),
    ("An apple a day", "apple day"),
    ("theatre and anthem", "theatre and anthem"),  # articles only as whole words
    ("U.S.A.!", "usa"),
    ("  Hello,\t\nWORLD  ", "hello world"),
    ("the", ""),
])
def test_normalize_answer(raw, normal):
    assert normalize_answer(raw) == normal


def test_exact_match_and_f1_by_hand():
    answers = ["Denver Broncos", "Broncos"]
    assert exact_match("the Denver Broncos", answers) == 1.0
    assert token_f1("the Denver Broncos", answers) == 1.0
    assert exact_match("Broncos!", answers) == 1.0
    # "denver broncos won": vs "denver broncos" 2 common, P = 2/3, R = 2/2; vs "broncos" P = 1/3, R = 1
    p, r = 2 / 3, 1.0
    assert exact_match("Denver Broncos won", answers) == 0.0
    assert token_f1("Denver Broncos won", answers) == pytest.approx(2 * p * r / (p + r))  # 0.8 > 0.5
    # bags: "x y y y" vs "y y z": y counted min(3, 2) = 2 times, P = 2/4, R = 2/3
    p, r = 2 / 4, 2 / 3
    assert token_f1("x y y y", ["y y z", "q"]) == pytest.approx(2 * p * r / (p + r))
    assert token_f1("Carolina Panthers", answers) == 0.0
    # nothing left after normalisation: 1 if both sides are empty, else 0
    assert token_f1("The", ["a", "Broncos"]) == 1.0
    assert token_f1("The", ["Broncos"]) == 0.0
    assert token_f1("Broncos", ["the"]) == 0.0


def test_squad_scores_means():
    s = squad_scores(["the Denver Broncos", "Denver Broncos won", "Panthers"],
                     [["Denver Broncos", "Broncos"], ["Denver Broncos"], ["Carolina"]])
    assert s == pytest.approx({"exact_match": 1 / 3, "f1": (1.0 + 0.8 + 0.0) / 3, "examples": 3})


def test_spans_bad_input():
    with pytest.raises(ValueError, match="squad_scores: 1 predictions for 2"):
        squad_scores(["a"], [["a"], ["b"]])
    with pytest.raises(ValueError, match="no examples"):
        squad_scores([], [])
    with pytest.raises(ValueError, match="question 0"):
        squad_scores(["a"], [[]])
    with pytest.raises(ValueError, match="not one string"):
        exact_match("Broncos", "Broncos")
    with pytest.raises(ValueError, match="no gold answers"):
        token_f1("Broncos", [])


# --- regression --------------------------------------------------------------------------------

def test_correlations_against_numpy():
    rng = np.random.default_rng(0)
    gold = rng.normal(size=50)
    pred = gold + rng.normal(scale=0.7, size=50)  # continuous: no ties
    s = correlations(pred.tolist(), gold.tolist())
    assert s["pearson"] == pytest.approx(np.corrcoef(pred, gold)[0, 1])
    ranks = lambda x: np.argsort(np.argsort(x))  # noqa: E731
    assert s["spearman"] == pytest.approx(np.corrcoef(ranks(pred), ranks(gold))[0, 1])
    assert s["mse"] == pytest.approx(np.mean((pred - gold) ** 2))
    assert s["examples"] == 50
    assert 0.3 < s["pearson"] < 1.0


def test_correlations_by_hand():
    assert correlations([1, 2, 3], [2, 4, 6]) == pytest.approx({"pearson": 1.0, "spearman": 1.0, "mse": 14 / 3, "examples": 3})
    monotone = correlations([1, 4, 9, 100], [1, 2, 3, 4])
    assert monotone["spearman"] == pytest.approx(1.0)
    assert monotone["pearson"] < 0.9
    assert correlations([3, 2, 1], [1, 2, 3])["spearman"] == pytest.approx(-1.0)


def test_correlations_constant_is_zero():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ConstantInputWarning, no NaN
        s = correlations([2.5, 2.5, 2.5], [1.0, 2.0, 3.0])
        assert (s["pearson"], s["spearman"]) == (0.0, 0.0)
        assert s["mse"] == pytest.approx((1.5 ** 2 + 0.5 ** 2 + 0.5 ** 2) / 3)
        assert correlations([1.0, 2.0], [4.0, 4.0])["pearson"] == 0.0


def test_correlations_bad_input():
    with pytest.raises(ValueError, match="correlations: 2 predictions for 3"):
        correlations([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="at least 2"):
        correlations([1], [1])
    with pytest.raises(ValueError, match="finite"):
        correlations([1, float("nan")], [1, 2])
    with pytest.raises(ValueError, match="numbers"):
        correlations(["a", "b"], [1, 2])


# --- generation --------------------------------------------------------------------------------

def test_rouge_by_hand():
    # words of at most 3 letters: the Porter stemmer leaves them alone
    # pred the big red dog ran (5) / ref a big dog ran far off now (7): common big, dog, ran -> 2*3/(5+7)
    # bigrams 4 / 6, common "dog ran" -> 2*1/(4+6); LCS big dog ran = 3 -> 2*3/(5+7)
    one = rouge(["the big red dog ran"], ["a big dog ran far off now"])
    assert one == pytest.approx({"rouge1": 0.5, "rouge2": 0.2, "rougeL": 0.5})
    # same words in another order: unigram F 1, no common bigram, LCS one word -> 1/3
    two = rouge(["dog bit man"], ["man bit dog"])
    assert two == pytest.approx({"rouge1": 1.0, "rouge2": 0.0, "rougeL": 1 / 3})
    both = rouge(["the big red dog ran", "dog bit man"], ["a big dog ran far off now", "man bit dog"])
    assert both == pytest.approx({"rouge1": 0.75, "rouge2": 0.1, "rougeL": (0.5 + 1 / 3) / 2})


def test_bleu_and_chrf():
    same = "the quick brown fox jumps over the lazy dog"
    assert bleu([same], [same]) == pytest.approx({"bleu": 1.0, "chrf": 1.0})
    assert bleu(["alpha beta gamma delta epsilon"], ["one two three four five"])["bleu"] == 0.0
    preds = ["the cat sat on the mat today", "a quick brown dog jumped over fences"]
    refs = ["the cat sat on a mat today", "the quick brown fox jumped over the fence"]
    s = bleu(preds, refs)
    # chrF: only the scale and the wiring are checked here (sacrebleu on both sides)
    assert s["chrf"] == pytest.approx(sacrebleu.corpus_chrf(preds, [refs]).score / 100)
    assert 0.0 < s["chrf"] < 1.0


def test_bleu_by_hand():
    """Corpus BLEU counted by hand (no punctuation: the 13a tokens are the words).

    the cat sat on the mat today / the cat sat on a mat today: 1-grams 6/7 ("the" clipped to
    one), 2-grams 4/6 (the cat, cat sat, sat on, mat today), 3-grams 2/5 (the cat sat, cat sat
    on), 4-grams 1/4 (the cat sat on).
    a quick brown dog jumped over fences / the quick brown fox jumped over the fence: 1-grams
    4/7 (quick brown jumped over), 2-grams 2/6 (quick brown, jumped over), 3- and 4-grams 0/5, 0/4.
    Corpus: 10/14, 6/12, 2/10, 1/8, geometric mean (1/112)^(1/4); 14 words against 15:
    brevity penalty exp(1 - 15/14).
    """
    preds = ["the cat sat on the mat today", "a quick brown dog jumped over fences"]
    refs = ["the cat sat on a mat today", "the quick brown fox jumped over the fence"]
    assert bleu(preds, refs)["bleu"] == pytest.approx(math.exp(-1 / 14) * (1 / 112) ** 0.25, rel=1e-12)
    # no 4-gram shared: exponential smoothing counts the first order with no match as
    # 1 / (2 * its n-grams). the cat sat down on the mat / the cat sat on the mat: 6/7, 4/6,
    # 2/5, 4-grams 0 of 4 -> 1/8; 7 words against 6: no brevity penalty
    assert bleu(["the cat sat down on the mat"], ["the cat sat on the mat"])["bleu"] == pytest.approx((1 / 35) ** 0.25, rel=1e-12)
    # a prediction shorter than four words has no 4-gram at all: its order has no n-gram to
    # smooth, so its precision is 0 and BLEU is 0, as in sacrebleu
    assert bleu(["the cat"], ["the cat sat"])["bleu"] == pytest.approx(0.0, abs=1e-12)


def test_bleu_against_nltk():
    """The same corpus BLEU from NLTK's implementation (its ``method3`` is NIST's geometric
    smoothing, sacrebleu's ``exp``), on generated pairs of words with no punctuation. Every
    prediction has at least four words: NLTK counts a prediction without n-grams of an order as
    having one (``max(1, count)``), sacrebleu as having none, so the two differ there."""
    from nltk.translate.bleu_score import SmoothingFunction, corpus_bleu

    rng = random.Random(5)
    preds, refs = [], []
    for _ in range(300):
        ref = [rng.choice(WORDS) for _ in range(rng.randint(5, 20))]
        pred = [w if rng.random() < 0.7 else rng.choice(WORDS) for w in ref]
        if rng.random() < 0.5:
            del pred[rng.randrange(len(pred))]
        refs.append(" ".join(ref))
        preds.append(" ".join(pred))
    for n in (300, 40, 3):
        expected = corpus_bleu([[r.split()] for r in refs[:n]], [p.split() for p in preds[:n]],
                               smoothing_function=SmoothingFunction().method3)
        assert 0.05 < expected < 0.95
        assert bleu(preds[:n], refs[:n])["bleu"] == pytest.approx(expected, rel=1e-9)


def test_generation_exact_match_and_scores():
    # "The cat." = "cat", "a dog" = "dog", "Cat" != "cats" -> 2/3
    assert generation_exact_match(["The cat.", "a dog", "Cat"], ["cat", "dog", "cats"]) == pytest.approx(2 / 3)
    s = generation_scores(["dog bit man"], ["man bit dog"], ["rouge", "exact_match"])
    assert s == pytest.approx({"rouge1": 1.0, "rouge2": 0.0, "rougeL": 1 / 3, "exact_match": 0.0})
    assert set(generation_scores(["a b"], ["a b"], ["bleu"])) == {"bleu", "chrf"}
    with pytest.raises(ValueError, match="known: rouge, bleu, exact_match"):
        generation_scores(["a"], ["a"], ["rouge", "meteor"])


def test_generation_bad_input():
    for function in (rouge, bleu, generation_exact_match):
        with pytest.raises(ValueError, match=f"{function.__name__}: 1 predictions for 2 references"):
            function(["a"], ["a", "b"])
        with pytest.raises(ValueError, match="no examples"):
            function([], [])
    with pytest.raises(ValueError, match="example 0"):
        bleu(["a"], [["a", "b"]])


def test_metric_modules_import_no_heavy_library():
    code = ("import sys\n"
            "import lmforge.finetuning.tagging.metrics, lmforge.finetuning.span_qa.metrics\n"
            "import lmforge.finetuning.regression.metrics, lmforge.finetuning.generation.metrics\n"
            "print(sorted(m for m in ('seqeval', 'scipy', 'rouge_score', 'sacrebleu') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
