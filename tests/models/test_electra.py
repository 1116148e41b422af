"""ELECTRA's replaced-token detection head (``rtd``, models/electra.py): transformers'
discriminator on the same corrupted batch, the corruption, the generator's size and the shared
embeddings, and the weights a classifier takes from it."""

from __future__ import annotations

import pytest
import torch
import transformers

from lmforge.interop._bert import encoder_hf_kwargs
from lmforge.interop.hf import to_hf
from lmforge.models.electra import RTD_WEIGHT, generator_config
from lmforge.models.registry import build_model


def masked_batch(vocab: int, B: int = 3, L: int = 24, seed: int = 0) -> dict[str, torch.Tensor]:
    """An ``mlm`` batch: about a fifth of the positions masked (id 3) with their original as label,
    the last row padded from position 16."""
    g = torch.Generator().manual_seed(seed)
    original = torch.randint(5, vocab, (B, L), generator=g)
    masked = torch.rand(B, L, generator=g) < 0.2
    masked[:, 0] = True  # at least one per row
    attention_mask = torch.ones(B, L, dtype=torch.long)
    attention_mask[-1, 16:] = 0
    masked &= attention_mask.bool()
    labels = torch.where(masked, original, torch.full_like(original, -100))
    return {"input_ids": torch.where(masked, torch.full_like(original, 3), original),
            "attention_mask": attention_mask, "labels": labels}


@pytest.mark.parametrize("preset", ["bert-tiny-test", "ernie-tiny-test"])
def test_the_discriminator_scores_and_loss_match_transformers_electra(preset):
    torch.manual_seed(0)
    model = build_model(preset, head="rtd", dropout=0.0, attn_dropout=0.0).eval()
    config = model.config
    batch = masked_batch(config.vocab_size)
    torch.manual_seed(1)
    out = model(**batch)
    # the discriminator's input, drawn again from the same seed: the original text with the
    # generator's samples at the masked positions (eval mode: the generator draws nothing else)
    torch.manual_seed(1)
    corrupted, replaced = model.corrupt(batch["input_ids"], batch["labels"], model.generator(**batch).logits)
    assert torch.equal(replaced, out.aux["replaced"]) and replaced.any()
    ours = out.aux["rtd_logits"]

    # the BERT-shaped settings as the converters name them (no projection: embeddings D wide)
    hf_config = transformers.ElectraConfig(embedding_size=config.d_model, pad_token_id=config.pad_id,
                                           **encoder_hf_kwargs(config, "transformers' ELECTRA"))
    electra = transformers.ElectraForPreTraining(hf_config).eval()
    # our encoder as transformers' BertModel (same names as ElectraModel's), then the detector
    state = {f"electra.{k}": v for k, v in to_hf(model.encoder).state_dict().items()
             if not k.startswith("embeddings.task")}
    state |= {"discriminator_predictions.dense.weight": model.detector.dense.weight,
              "discriminator_predictions.dense.bias": model.detector.dense.bias,
              "discriminator_predictions.dense_prediction.weight": model.detector.score.weight,
              "discriminator_predictions.dense_prediction.bias": model.detector.score.bias}
    missing, unexpected = electra.load_state_dict(state, strict=False)
    assert not unexpected and all("position_ids" in k or "token_type_ids" in k for k in missing)
    with torch.no_grad():
        theirs = electra(corrupted, attention_mask=batch["attention_mask"], labels=replaced.long())
    torch.testing.assert_close(ours, theirs.logits, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(out.aux["rtd_loss"], theirs.loss, atol=1e-6, rtol=1e-5)
    assert out.loss.item() == pytest.approx(out.aux["mlm_loss"].item() + RTD_WEIGHT * out.aux["rtd_loss"].item(), rel=1e-6)


def test_corruption_replaces_only_the_masked_positions_with_the_generators_samples():
    torch.manual_seed(0)
    model = build_model("bert-tiny-test", head="rtd")
    batch = masked_batch(model.config.vocab_size)
    masked = batch["labels"] != -100
    original = torch.where(masked, batch["labels"], batch["input_ids"])
    # a generator certain of token 7 everywhere: every masked position becomes 7
    logits = torch.full((*batch["input_ids"].shape, model.config.vocab_size), -1e4)
    logits[..., 7] = 0.0
    corrupted, replaced = model.corrupt(batch["input_ids"], batch["labels"], logits)
    assert torch.equal(corrupted[~masked], original[~masked])
    assert (corrupted[masked] == 7).all()
    assert torch.equal(replaced, masked & (original != 7))
    # a masked position whose sample is its own original counts as original (the paper's rule)
    labels = batch["labels"].clone()
    labels[0, 0] = 7
    corrupted, replaced = model.corrupt(batch["input_ids"], labels, logits)
    assert corrupted[0, 0] == 7 and not replaced[0, 0]
    # training mode: the generator's (N, V) logits at the labelled positions, in order
    n = int(masked.sum())
    flat = torch.full((n, model.config.vocab_size), -1e4)
    flat[torch.arange(n), torch.arange(n) + 10] = 0.0
    corrupted, _ = model.corrupt(batch["input_ids"], batch["labels"], flat)
    assert corrupted[masked].tolist() == list(range(10, 10 + n))


def test_samples_follow_the_generators_distribution():
    torch.manual_seed(0)
    model = build_model("bert-tiny-test", head="rtd")
    input_ids = torch.full((1, 4000), 3)
    labels = torch.full((1, 4000), 9)
    logits = torch.full((4000, model.config.vocab_size), -1e4)
    logits[:, 5], logits[:, 6] = 0.0, torch.log(torch.tensor(3.0))  # 1 : 3
    corrupted, replaced = model.corrupt(input_ids, labels, logits)
    share = (corrupted == 6).float().mean().item()
    assert abs(share - 0.75) < 0.03 and replaced.all()


def test_the_generator_is_a_third_of_the_layers_and_shares_the_embeddings():
    model = build_model("bert-tiny-test", head="rtd", n_layers=6)
    assert len(model.encoder.layers) == 6 and len(model.generator.encoder.layers) == 2
    assert generator_config(model.config).n_layers == 2 and generator_config(model.config).d_model == model.config.d_model
    assert build_model("bert-tiny-test", head="rtd").generator.config.n_layers == 1  # at least one
    assert model.generator.encoder.embeddings is model.encoder.embeddings
    # the shared embeddings learn from both losses
    batch = masked_batch(model.config.vocab_size)
    out = model(**batch)
    out.aux["mlm_loss"].backward(retain_graph=True)
    from_generator = model.encoder.embeddings.word.weight.grad.clone()
    assert from_generator.abs().sum() > 0
    model.zero_grad()
    (RTD_WEIGHT * out.aux["rtd_loss"]).backward()
    assert model.encoder.embeddings.word.weight.grad.abs().sum() > 0
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in model.generator.encoder.layers.parameters())


def test_the_discriminator_is_what_a_classifier_loads(tmp_path):
    from lmforge.models.folder import load_model_dir, save_model_dir

    torch.manual_seed(0)
    model = build_model("bert-tiny-test", head="rtd")
    save_model_dir(model, "bert-tiny-test", "rtd", {}, tmp_path / "m")
    loaded = load_model_dir(tmp_path / "m")
    assert loaded.generator.encoder.embeddings is loaded.encoder.embeddings  # tied again after loading
    assert all(torch.equal(v, loaded.state_dict()[k]) for k, v in model.state_dict().items())
    classifier = build_model("bert-tiny-test", head="classification", num_labels=3)
    source = loaded.state_dict()
    shared = set(source) & set(classifier.state_dict())
    assert shared == {k for k in source if k.startswith("encoder.")}  # the generator and detector stay behind
    assert set(classifier.state_dict()) - shared == {"encoder.pooler.weight", "encoder.pooler.bias",
                                                      "classifier.weight", "classifier.bias"}
