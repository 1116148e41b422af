"""The zero-shot scorer (no lm-eval needed): log-likelihoods and acc / acc_norm / acc_bytes
against a hand computation with the same tiny GPT."""

from __future__ import annotations

import math

import pytest
import torch

from lmforge.evaluation.harness import (CausalScorer, Question, choice_metrics, not_applicable, score_questions,
                                        split_pair)
from lmforge.models.registry import build_model

VOCAB, EOS = 64, 0


def encode(text: str) -> list[int]:
    """A word-level toy tokenizer: a word and the space before it are one token, as byte-level BPE has it."""
    ids, word = [], ""
    for ch in text:
        if ch == " " and word:
            ids.append(1 + sum(map(ord, word)) % (VOCAB - 1))
            word = ""
        word += ch
    if word:
        ids.append(1 + sum(map(ord, word)) % (VOCAB - 1))
    return ids


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(3)
    return build_model("gpt-tiny", head="lm", vocab_size=VOCAB, n_positions=32).eval()


def by_hand(model, context: str, continuation: str) -> float:
    """Sum of log p(continuation token | everything before it), one full forward pass, eos first."""
    ctx = encode(context)
    cont = encode(context + continuation)[len(ctx):]
    ids = [EOS, *ctx, *cont]
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), -1)
    return sum(float(logp[len(ids) - len(cont) - 1 + i, t]) for i, t in enumerate(cont))


def test_split_pair_moves_the_contexts_trailing_space_to_the_continuation():
    assert split_pair(encode, "Return the", " file") == (encode("Return the"), encode(" file"))
    assert split_pair(encode, "Return the ", "file") == (encode("Return the"), encode(" file"))
    assert split_pair(encode, "", "file") == ([], encode("file"))


def test_loglikelihoods_equal_a_hand_computation(gpt):
    pairs = [("Return the", " name of the file."), ("Open", " a socket"), ("", "Hello world"),
             ("A longer context with several words in it", " and an end")]
    scorer = CausalScorer(gpt, encode, prefix=[EOS], window=32, batch_size=3)  # two batches, padded rows
    got = scorer.loglikelihood(pairs)
    for (ll, greedy), (c, x) in zip(got, pairs):
        assert ll == pytest.approx(by_hand(gpt, c, x), abs=1e-4)
        assert ll < 0 and isinstance(greedy, bool)
    # one at a time (no padding) gives the same numbers
    alone = [CausalScorer(gpt, encode, prefix=[EOS], window=32, batch_size=1).loglikelihood([p])[0][0] for p in pairs]
    assert [ll for ll, _ in got] == pytest.approx(alone, abs=1e-4)


def test_is_greedy_when_every_continuation_token_is_the_argmax(gpt):
    ctx = encode("Return the")
    with torch.no_grad():
        nxt = int(gpt(torch.tensor([[EOS, *ctx]])).logits[0, -1].argmax())
    scorer = CausalScorer(gpt, encode, prefix=[EOS])
    (_, greedy), = scorer.loglikelihood_ids([(ctx, [nxt])])
    (_, other), = scorer.loglikelihood_ids([(ctx, [(nxt + 1) % VOCAB])])
    assert greedy is True and other is False


def test_a_long_input_keeps_its_last_window_tokens(gpt):
    ctx, cont = list(range(1, 40)), [5, 6]
    scorer = CausalScorer(gpt, encode, prefix=[EOS], window=32)
    (ll, _), = scorer.loglikelihood_ids([(ctx, cont)])
    ids = ([EOS] + ctx + cont)[:-1][-32:]
    with torch.no_grad():
        logp = torch.log_softmax(gpt(torch.tensor([ids])).logits[0].double(), -1)
    assert ll == pytest.approx(float(logp[-2, 5] + logp[-1, 6]), abs=1e-4)


def test_acc_and_acc_norm_follow_lm_evals_definitions():
    # summed: choice 1 wins; per character: choice 0 (long); per byte: choice 2 ("é" is two bytes)
    lls = [-12.0, -6.0, -9.0]
    choices = ["a" * 10, "b", "é" * 4]  # 10 chars / 10 bytes, 1 / 1, 4 / 8
    assert choice_metrics(lls, choices, gold=1) == {"acc": 1.0, "acc_norm": 0.0, "acc_bytes": 0.0}
    assert choice_metrics(lls, choices, gold=0) == {"acc": 0.0, "acc_norm": 1.0, "acc_bytes": 0.0}
    # -12/10 = -1.2, -6/1 = -6, -9/8 = -1.125 per byte: choice 2 wins on bytes
    assert choice_metrics(lls, choices, gold=2) == {"acc": 0.0, "acc_norm": 0.0, "acc_bytes": 1.0}
    assert choice_metrics([-1.0, -1.0], ["x", "y"], gold=0)["acc"] == 1.0  # ties: the first


def test_score_questions_equals_a_hand_computation(gpt):
    questions = [Question("Return the", ("name of the file.", "socket", "an integer"), 0),
                 Question("Open a", ("file for reading", "cat"), 1),
                 Question("The value of", ("x", "the largest key in the mapping", "é"), 2)]
    got = score_questions(CausalScorer(gpt, encode, prefix=[EOS], window=32), questions)
    acc = norm = 0.0
    for q in questions:
        lls = [by_hand(gpt, q.context, " " + c) for c in q.choices]
        acc += max(range(len(lls)), key=lambda i: (lls[i], -i)) == q.gold
        norm += max(range(len(lls)), key=lambda i: (lls[i] / len(q.choices[i]), -i)) == q.gold
    assert got["n"] == 3
    assert got["acc"] == pytest.approx(acc / 3) and got["acc_norm"] == pytest.approx(norm / 3)
    assert not math.isnan(got["acc_bytes"])


def test_bad_input_is_one_clear_error(gpt):
    scorer = CausalScorer(gpt, encode, prefix=[EOS], window=4)
    with pytest.raises(ValueError, match="empty continuation"):
        scorer.loglikelihood_ids([([1], [])])
    with pytest.raises(ValueError, match="longer than the 4 positions"):
        scorer.loglikelihood_ids([([1], [2, 3, 4, 5, 6, 7])])
    with pytest.raises(ValueError, match="no questions"):
        score_questions(scorer, [])
    assert not_applicable("gpt") is None
    assert "masked-LM encoder" in not_applicable("bert")
