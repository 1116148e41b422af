"""``lmforge export --format onnx``: ONNX Runtime gives our model's logits on a batch and lengths
other than the export's example, for every architecture the graph can hold; a fine-tuned
classifier keeps its labels; ELMo and Switch are refused with the reason."""

import json

import numpy as np
import pytest
import torch

from lmforge.inference.export import NO_ONNX, export_onnx, onnx_inputs
from lmforge.inference.loading import InferenceError, load

from .conftest import PRESETS, redraw_weights, write_toy_classifier

ort = pytest.importorskip("onnxruntime")
ONNX_ARCHS = [a for a in PRESETS if a not in NO_ONNX]


def _inputs(loaded, names, batch=3, length=13, target=6):
    g = torch.Generator().manual_seed(1)
    ordinary = torch.tensor(sorted(set(range(loaded.vocab.size)) - set(loaded.vocab.special_ids)))
    values = {"input_ids": ordinary[torch.randint(len(ordinary), (batch, length), generator=g)],
              "attention_mask": torch.ones(batch, length, dtype=torch.long),
              "token_type_ids": torch.zeros(batch, length, dtype=torch.long),
              "decoder_input_ids": ordinary[torch.randint(len(ordinary), (batch, target), generator=g)]}
    values["attention_mask"][-1, -2:] = 0  # a padded row: the masked path is in the graph too
    values["token_type_ids"][:, length // 2:] = 1
    return {n: values[n] for n in names}


@pytest.mark.parametrize("arch", ONNX_ARCHS)
def test_onnx_runtime_gives_our_logits(models, arch, tmp_path):
    loaded = redraw_weights(load(models[arch]), std=0.1, seed=2)
    out = export_onnx(loaded, tmp_path / "onnx")
    names = onnx_inputs(loaded)
    assert json.loads((out / "onnx.json").read_text())["inputs"] == names
    assert (out / "tokenizer.json").exists() and "ONNX Runtime" in (out / "README.md").read_text()
    session = ort.InferenceSession(str(out / "model.onnx"))
    assert [i.name for i in session.get_inputs()] == names
    for shape in ((3, 13, 6), (1, 5, 2)):
        inputs = _inputs(loaded, names, *shape)
        theirs = session.run(["logits"], {k: v.numpy() for k, v in inputs.items()})[0]
        with torch.no_grad():
            ours = loaded.model.eval()(**inputs).logits
        np.testing.assert_allclose(theirs, ours.numpy(), atol=1e-4, rtol=1e-4)


def test_an_onnx_classifier_keeps_its_labels(corpus, tmp_path):
    params, _ = corpus
    run = tmp_path / "bert" / "toy"
    write_toy_classifier(params, run)
    loaded = load(run)
    out = export_onnx(loaded, tmp_path / "onnx")
    assert json.loads((out / "onnx.json").read_text())["labels"] == ["module", "class", "function"]
    inputs = _inputs(loaded, onnx_inputs(loaded))
    theirs = ort.InferenceSession(str(out / "model.onnx")).run(["logits"], {k: v.numpy() for k, v in inputs.items()})[0]
    assert theirs.shape == (3, 3)
    with torch.no_grad():
        np.testing.assert_allclose(theirs, loaded.model.eval()(**inputs).logits.numpy(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch", sorted(NO_ONNX))
def test_architectures_the_graph_cannot_hold_are_refused(models, arch, tmp_path):
    with pytest.raises(InferenceError, match=f"{arch} cannot be exported to ONNX: "):
        export_onnx(load(models[arch]), tmp_path / "x")
    assert not (tmp_path / "x").exists()
