"""The zero-shot scorers of the other architectures, each against a hand computation that takes a
different path through the same model: Transformer-XL as a causal LM, XLNet left to right (one
query at a time, with the real token in place), and the encoder-decoders through their own
``labels`` shift; batching and padding change nothing."""

from __future__ import annotations

import pytest
import torch

from lmforge.evaluation.harness import (CausalScorer, LeftToRight, Question, Seq2SeqScorer, not_applicable,
                                        score_questions, split_pair_apart)
from lmforge.models.registry import build_model

from .test_harness import EOS, VOCAB, by_hand, encode

PAIRS = [("Return the", " name of the file."), ("Open a", " file for reading"), ("The value of", " x"),
         ("Close the socket ", "and return")]


def moved(context: str, continuation: str) -> tuple[str, str]:
    """lm-eval's move of the context's trailing whitespace to the continuation."""
    kept = context.rstrip()
    return kept, context[len(kept):] + continuation


def _tiny(preset: str, seed: int, **overrides):
    torch.manual_seed(seed)
    return build_model(preset, vocab_size=VOCAB, **overrides).eval()


def test_every_generative_architecture_is_scored_and_the_encoders_are_not():
    for arch in ("gpt", "transformer_xl", "xlnet", "bart", "t5", "switch"):
        assert not_applicable(arch) is None
    for arch in ("bert", "albert", "ernie"):
        assert "masked-LM encoder" in not_applicable(arch)
    assert "LSTM" in not_applicable("elmo")


def test_transformer_xl_scores_as_the_causal_lm_it_is():
    txl = _tiny("txl-tiny", 1, mem_len=0)
    got = CausalScorer(txl, encode, prefix=[EOS], batch_size=3).loglikelihood(PAIRS)
    for (ll, _), (context, continuation) in zip(got, PAIRS):
        assert ll == pytest.approx(by_hand(txl, *moved(context, continuation)), abs=1e-4)


def xlnet_by_hand(model, ids: list[int], first: int) -> float:
    """Sum over positions p >= first of log p(ids[p] | ids[:p]): one call per position, the real
    token in place at p, a single query row pointing at p and every key at or after p blocked."""
    n, total = len(ids), 0.0
    blocked = torch.ones(n, n).triu()[None]
    with torch.no_grad():
        for p in range(first, n):
            target = torch.zeros(1, 1, n)
            target[0, 0, p] = 1
            logits = model(torch.tensor([ids]), perm_mask=blocked, target_mapping=target).logits
            total += float(torch.log_softmax(logits[0, 0].double(), -1)[ids[p]])
    return total


def test_xlnet_read_left_to_right_equals_one_query_at_a_time():
    xlnet = _tiny("xlnet-tiny", 2)
    sep = 3
    view = LeftToRight(xlnet, filler=0)
    assert not view.training  # the wrapper keeps the model's mode (no dropout while scoring)
    got = CausalScorer(view, encode, prefix=[sep], batch_size=4).loglikelihood(PAIRS)
    assert not xlnet.training
    for (ll, _), (context, continuation) in zip(got, PAIRS):
        context, continuation = moved(context, continuation)
        ctx = encode(context)
        cont = encode(context + continuation)[len(ctx):]
        ids = [sep, *ctx, *cont]
        assert ll == pytest.approx(xlnet_by_hand(xlnet, ids, len(ids) - len(cont)), abs=1e-4)


def test_xlnet_left_to_right_never_reads_a_token_at_or_after_its_prediction():
    xlnet = _tiny("xlnet-tiny", 4)
    view = LeftToRight(xlnet)
    ids = torch.tensor([[3, 10, 11, 12, 13, 14]])
    with torch.no_grad():
        base = view(ids).logits
        for p in range(1, 6):  # change the token at position p: predictions of positions <= p (rows < p) stay
            changed = ids.clone()
            changed[0, p] = 40
            out = view(changed).logits
            assert torch.allclose(out[0, :p], base[0, :p], atol=1e-5)
            assert not torch.allclose(out[0, p:], base[0, p:], atol=1e-5)


@pytest.mark.parametrize("preset,frame", [
    ("t5-tiny", dict(encoder_suffix=[1])),
    ("switch-tiny", dict(encoder_suffix=[1])),
    ("bart-tiny", dict(encoder_prefix=[2], encoder_suffix=[1], decoder_prefix=[2])),
])
def test_an_encoder_decoder_scores_the_continuation_and_eos_given_the_context(preset, frame):
    model = _tiny(preset, 3)
    start, pad = model.config.decoder_start_id, model.config.pad_id
    scorer = Seq2SeqScorer(model, encode, eos=1, decoder_start=start, pad=pad, batch_size=3, **frame)
    got = scorer.loglikelihood(PAIRS)
    one_by_one = Seq2SeqScorer(model, encode, eos=1, decoder_start=start, pad=pad, batch_size=1, **frame)
    alone = one_by_one.loglikelihood(PAIRS)
    assert [ll for ll, _ in got] == pytest.approx([ll for ll, _ in alone], abs=1e-4)
    assert [g for _, g in got] == [g for _, g in alone]
    prefix = frame.get("decoder_prefix", [])
    for (ll, greedy), (context, continuation) in zip(got, PAIRS):
        ctx, cont = split_pair_apart(encode, context, continuation)
        labels = [*prefix, *cont, 1]
        encoder = [*frame.get("encoder_prefix", []), *ctx, *frame["encoder_suffix"]]
        with torch.no_grad():  # the model shifts its labels right into the decoder's inputs itself
            logits = model(input_ids=torch.tensor([encoder]), labels=torch.tensor([labels])).logits[0]
        logp = torch.log_softmax(logits.double(), -1)
        scored = range(len(prefix), len(labels))
        assert ll == pytest.approx(sum(float(logp[i, labels[i]]) for i in scored), abs=1e-4)
        assert greedy == all(int(logp[i].argmax()) == labels[i] for i in scored)
    assert split_pair_apart(encode, "Close the socket ", "and return") == (encode("Close the socket"),
                                                                           encode(" and return"))


def test_an_encoder_decoder_answers_questions_from_the_context():
    model = _tiny("t5-tiny", 6)
    scorer = Seq2SeqScorer(model, encode, eos=1, decoder_start=0, encoder_suffix=[1])
    questions = [Question("Return the", ("name of the file.", "socket", "an integer"), 0),
                 Question("Open a", ("file for reading", "cat"), 1)]
    got = score_questions(scorer, questions)
    lls = [ll for ll, _ in scorer.loglikelihood([(q.context, " " + c) for q in questions for c in q.choices])]
    assert got["acc"] == pytest.approx(((max(range(3), key=lambda i: (lls[i], -i)) == 0)
                                        + (max(range(2), key=lambda i: (lls[3 + i], -i)) == 1)) / 2)
    with pytest.raises(ValueError, match="no room for the context"):
        Seq2SeqScorer(model, encode, eos=1, decoder_start=0, encoder_suffix=[1], window=1).loglikelihood(PAIRS)


def test_transformer_xl_reads_inputs_longer_than_its_training_segment():
    from types import SimpleNamespace

    from lmforge.evaluation.zero_shot import scorer

    txl = _tiny("txl-tiny", 1, mem_len=0)  # trained on segments of tgt_len = 32 tokens
    tokenizer = SimpleNamespace(vocab=SimpleNamespace(eos=EOS), encode=lambda texts: [encode(t) for t in texts])
    read = scorer(txl, tokenizer, "transformer_xl")
    long = " " + " ".join(f"w{i}" for i in range(40))
    assert len(encode(long)) > txl.config.tgt_len
    ((ll, _),) = read.loglikelihood([("Return the", long)])
    assert ll == pytest.approx(by_hand(txl, "Return the", long), abs=1e-3)
