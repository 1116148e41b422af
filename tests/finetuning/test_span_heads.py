"""Extractive QA: the answer's token positions in every architecture's pair layout, the context
in overlapping windows, the span heads' scores and loss, and scores read back to the answer text."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lmforge.finetuning.features import collate, model_overrides, pad_id
from lmforge.finetuning.span_qa.features import NO_ANSWER, Window, answer_tokens, best_span, encode_questions, span_text
from lmforge.finetuning.tasks import Answer, SpanQuestion
from lmforge.models.registry import build_model
from lmforge.tokenizer_kinds import ARCHITECTURE_TOKENIZER

ARCHITECTURES = sorted(ARCHITECTURE_TOKENIZER)
LENGTH = 64  # the tiny test tokenizers split words finely: the context needs several windows at this length
PRESET = {"bert": "bert-tiny-test", "ernie": "ernie-tiny-test", "albert": "albert-tiny", "gpt": "gpt-tiny",
          "transformer_xl": "txl-tiny", "xlnet": "xlnet-tiny", "elmo": "elmo-tiny", "bart": "bart-tiny", "t5": "t5-tiny",
          "switch": "switch-tiny"}
CONTEXT = ("Open the file and return a stream. The mode argument is an optional string that specifies the mode "
           "in which the file is opened. It defaults to read mode. The buffering argument sets the buffering policy. "
           "Pass zero to switch buffering off, one to select line buffering, and a larger integer for a fixed size.")


def question(answer: str, q: str = "Which argument?") -> SpanQuestion:
    start = CONTEXT.index(answer)
    return SpanQuestion(q, CONTEXT, (Answer(answer, start),), id=answer)


def tok_dir(corpus, arch):
    params, _ = corpus
    return Path(params.tokenizer.output) / ARCHITECTURE_TOKENIZER[arch]


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_the_labelled_positions_hold_the_answer_in_every_window_that_has_it(corpus, arch):
    questions = [question("buffering argument"), question("read mode", "What does it default to?")]
    features, windows, spans = encode_questions(questions, arch, tok_dir(corpus, arch), LENGTH, prefix="question",
                                                train=True)
    assert features and len(features) == len(windows)
    for f, w in zip(features, windows):
        assert len(f["input_ids"]) <= LENGTH
        start, end = (int(x) for x in f["labels"])
        assert w.start <= start <= end < w.start + w.length  # inside the window's context
        first, last = w.first + start - w.start, w.first + end - w.start
        assert span_text(CONTEXT, spans[w.question], first, last) == questions[w.question].answers[0].text
    # at LENGTH tokens the context needs several windows; evaluation keeps all of them
    every, all_windows, _ = encode_questions(questions, arch, tok_dir(corpus, arch), LENGTH, prefix="question")
    per_question = [sum(w.question == q for w in all_windows) for q in range(2)]
    assert min(per_question) >= 2 and len(every) >= len(features)
    assert all(list(f["labels"]) == [NO_ANSWER] * 2 for f, w in zip(every, all_windows)
               if not any(w.first == t.first and w.question == t.question for t in windows))


def test_windows_overlap_by_the_stride_and_the_last_ends_at_the_context_end(corpus):
    features, windows, spans = encode_questions([question("buffering argument")], "bert", tok_dir(corpus, "bert"), LENGTH)
    firsts = [w.first for w in windows]
    steps = {b - a for a, b in zip(firsts, firsts[1:-1])}
    assert len(steps) <= 1 and all(s < windows[0].length for s in steps)  # consecutive windows overlap
    assert windows[-1].first + windows[-1].length == len(spans[0])


def test_the_best_span_is_ordered_bounded_and_inside_the_context():
    w = Window(question=0, first=10, start=3, length=5)
    start = np.full(12, -5.0)
    end = np.full(12, -5.0)
    start[1], end[0] = 50.0, 50.0  # outside the context (positions 3-7): never chosen
    start[7], end[3] = 9.0, 9.0  # end before start: not a span
    start[4], end[6] = 3.0, 2.0  # the best span: tokens 11-13
    assert best_span(start, end, w, max_answer_tokens=30) == (5.0, 11, 13)
    # at most two tokens long: the best is a one-token span scoring 9 - 5 (the first found: token 10)
    assert best_span(start, end, w, max_answer_tokens=2) == (4.0, 10, 10)
    assert answer_tokens([(0, 4), (5, 9), (10, 15)], 5, 15) == (1, 2) and answer_tokens([(0, 4)], 7, 9) is None


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_every_architecture_has_a_span_head(corpus, arch):
    torch.manual_seed(0)
    d = tok_dir(corpus, arch)
    short = SpanQuestion("Which mode?", "The default mode is read mode.", (Answer("read mode", 20),), id="short")
    features, _, _ = encode_questions([question("buffering argument"), short], arch, d, LENGTH, prefix="question",
                                      train=True)
    model = build_model(PRESET[arch], head="span_extraction", num_labels=2, **model_overrides(arch, d))
    model.eval()
    batch = collate(features, pad_id(arch, d))
    with torch.no_grad():
        out = model(**batch)
    B, L = batch["input_ids"].shape[:2]
    assert out.logits.shape == (B, L, 2) and batch["labels"].shape == (B, 2)
    starts, ends = out.logits.float().unbind(-1)
    expected = (F.cross_entropy(starts, batch["labels"][:, 0]) + F.cross_entropy(ends, batch["labels"][:, 1])) / 2
    assert math.isfinite(float(out.loss)) and float(out.aux["span_loss"]) == pytest.approx(float(expected), rel=1e-5)
    # padding never scores as a start or an end
    padded = batch["attention_mask"] == 0
    assert padded.any()  # the short question's window is shorter than the full ones
    assert (out.logits[padded] <= torch.finfo(out.logits.dtype).min / 2).all()
