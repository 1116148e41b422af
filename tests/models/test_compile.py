"""Every architecture compiles to one graph (``torch.compile(fullgraph=True)``: a graph break
is an error) and the compiled model computes what the eager one does: loss and every gradient.

The eager code reads a few facts on the host (no padding -> SDPA's causal fast path, batch
validation, Switch's kept-token count); under compilation it takes the general path instead
(layers.no_padding, layers.check_batch, Switch's capacity dispatch). ELMo is the exception:
Dynamo does not trace ``nn.LSTM``, so its LSTMs run eagerly between compiled pieces (the graph
breaks there, and only there). The ``aot_eager`` backend
traces forward and backward exactly as inductor would see them, without generating code, so
these tests stay fast; one slow test runs inductor itself.
"""

import pytest
import torch
import torch._dynamo

from lmforge.models import switch
from lmforge.models.registry import ARCHITECTURES, PRESET_ARCHITECTURE, build_model
from tests.models.test_registry import batch_for
from tests.models.test_xlnet import V as XLNET_VOCAB
from tests.models.test_xlnet import perm_batch

TINY = sorted(p for p in PRESET_ARCHITECTURE if "tiny" in p)
ONE_GRAPH = [p for p in TINY if PRESET_ARCHITECTURE[p] != "elmo"]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()  # every test compiles its own models: no recompile limit carried over
    yield
    torch._dynamo.reset()


def loss_and_grads(model: torch.nn.Module, batch: dict, forward=None) -> tuple[torch.Tensor, dict]:
    model.zero_grad(set_to_none=True)
    torch.manual_seed(0)  # the same draws in both runs for a head that samples (ELECTRA's generator)
    out = (forward if forward is not None else model)(**batch)
    out.loss.backward()
    return out.loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def assert_compiled_matches_eager(model: torch.nn.Module, batch: dict, fullgraph: bool = True) -> None:
    """Eval mode (no dropout, so both runs compute the same function)."""
    model.eval()
    loss, grads = loss_and_grads(model, batch)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=fullgraph)
    c_loss, c_grads = loss_and_grads(model, batch, compiled)
    torch.testing.assert_close(c_loss, loss, atol=1e-5, rtol=1e-5)
    assert c_grads.keys() == grads.keys()
    for name in grads:
        torch.testing.assert_close(c_grads[name], grads[name], atol=1e-5, rtol=1e-4, msg=lambda m, n=name: f"{n}: {m}")


@pytest.mark.parametrize("name", ONE_GRAPH)
def test_every_tiny_preset_and_head_compiles_to_one_graph_and_matches_eager(name):
    for head in ARCHITECTURES[PRESET_ARCHITECTURE[name]].heads:
        torch.manual_seed(0)
        model = build_model(name, head=head)
        assert_compiled_matches_eager(model, batch_for(name, head))  # batch_for pads a row


@pytest.mark.parametrize("name", ONE_GRAPH)
def test_training_mode_compiles_to_one_graph(name):
    """Dropout, Switch's router jitter and training capacity: still one graph, and a step
    changes the weights."""
    head = ARCHITECTURES[PRESET_ARCHITECTURE[name]].default_head
    torch.manual_seed(0)
    model = build_model(name, head=head).train()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    before = [p.detach().clone() for p in model.parameters()]
    for _ in range(2):
        opt.zero_grad(set_to_none=True)
        loss = compiled(**batch_for(name, head)).loss
        assert torch.isfinite(loss)
        loss.backward()
        opt.step()
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))


def test_elmo_compiles_around_its_lstms_and_matches_eager():
    for head in ARCHITECTURES["elmo"].heads:
        torch.manual_seed(0)
        model = build_model("elmo-tiny", head=head)
        batch = batch_for("elmo-tiny", head)
        explained = torch._dynamo.explain(model)(**batch)
        reasons = [str(r.reason) for r in explained.break_reasons]
        assert reasons and all("LSTM" in r for r in reasons), reasons
        torch._dynamo.reset()
        assert_compiled_matches_eager(model, batch, fullgraph=False)


def test_xlnet_permutation_batch_compiles_and_matches_eager():
    torch.manual_seed(0)
    model = build_model("xlnet-tiny", head="lm", vocab_size=XLNET_VOCAB)
    batch = perm_batch()
    assert_compiled_matches_eager(model, batch)


def test_xlnet_bad_target_mapping_is_refused_under_compile():
    torch.manual_seed(0)
    model = build_model("xlnet-tiny", head="lm", vocab_size=XLNET_VOCAB).eval()
    batch = perm_batch()
    tm = batch["target_mapping"].clone()
    tm[0, 0, :2] = 1  # a row pointing at two positions
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    with pytest.raises(ValueError, match="one-hot"):
        model(**{**batch, "target_mapping": tm})
    with pytest.raises(RuntimeError, match="one-hot"):  # checked on the device, the graph unbroken
        compiled(**{**batch, "target_mapping": tm})
    assert torch.isfinite(compiled(**batch).loss)


def test_bart_classification_without_eos_is_refused_under_compile():
    torch.manual_seed(0)
    model = build_model("bart-tiny", head="classification").eval()
    batch = batch_for("bart-tiny", "classification")
    batch["input_ids"] = batch["input_ids"].clamp(min=5)  # no </s> anywhere
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    with pytest.raises(RuntimeError, match="needs an </s>"):
        compiled(**batch)


def test_transformer_xl_memory_compiles_and_matches_eager():
    """The second segment with the first's memory (what training with carry_memory runs)."""
    torch.manual_seed(0)
    model = build_model("txl-tiny", head="lm").eval()
    first, second = batch_for("txl-tiny", "lm"), batch_for("txl-tiny", "lm", L=12)
    second["input_ids"] = second["labels"] = second["input_ids"].roll(1, dims=1)
    mems = model(**first).aux["mems"]
    assert len(mems) == model.config.n_layers + 1
    assert_compiled_matches_eager(model, {**second, "mems": mems})


def test_switch_compiles_with_the_capacity_dispatch_and_drops_the_same_tokens():
    """Compiled, the experts run on the capacity buffer (static shapes); eager on a CPU, on
    the sorted tokens. With capacity forced low, both drop the same tokens: same outputs."""
    torch.manual_seed(0)
    model = build_model("switch-tiny", head="seq2seq", capacity_factor_train=0.5, capacity_factor_eval=0.5)
    batch = batch_for("switch-tiny", "seq2seq", B=2, L=16)
    assert_compiled_matches_eager(model, batch)
    out = model(**batch)
    assert out.aux["dropped_fraction"].max() > 0  # the low capacity did drop tokens


def test_switch_dispatch_choice_under_compile(monkeypatch):
    layer = switch.SwitchFeedForward(build_model("switch-tiny").config)
    x = torch.zeros(1, 4, layer.config.d_model)
    assert layer.use_sorted(x)  # eager, CPU
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert not layer.use_sorted(x)  # float32: grouped_mm does not trace
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert layer.use_sorted(x)  # bf16: it does
    assert layer.use_sorted(x.bfloat16())
    monkeypatch.setattr(switch.SwitchFeedForward, "dispatch", "sorted")
    assert layer.use_sorted(x)  # a forced dispatch is kept


def test_switch_compiles_with_the_sorted_dispatch_in_bf16():
    """Under bf16 autocast the compiled layer sorts the tokens (every dropped one riding along
    with the last expert, weighted 0, so no host read); eager on a CPU computes only the kept
    rows: the same loss and gradients up to bf16 rounding."""
    torch.manual_seed(0)
    model = build_model("switch-tiny", head="seq2seq", capacity_factor_train=0.5, capacity_factor_eval=0.5).eval()
    batch = batch_for("switch-tiny", "seq2seq", B=2, L=16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, grads = loss_and_grads(model, batch)
        compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
        c_loss, c_grads = loss_and_grads(model, batch, compiled)
    assert model(**batch).aux["dropped_fraction"].max() > 0
    torch.testing.assert_close(c_loss, loss, atol=2e-2, rtol=2e-2)
    for name in grads:
        torch.testing.assert_close(c_grads[name], grads[name], atol=2e-2, rtol=5e-2, msg=lambda m, n=name: f"{n}: {m}")


@pytest.mark.slow
def test_inductor_compiled_training_step_matches_eager():
    """The default backend (inductor: generated C++ on a CPU) on one model of each kind of
    attention: learned positions with SDPA (GPT), relative positions with two streams (XLNet)."""
    for name, head, batch in (("gpt-tiny", "lm", batch_for("gpt-tiny", "lm")),
                              ("xlnet-tiny", "lm", perm_batch())):
        torch.manual_seed(0)
        model = build_model(name, head=head, **({"vocab_size": XLNET_VOCAB} if name == "xlnet-tiny" else {})).eval()
        loss, grads = loss_and_grads(model, batch)
        c_loss, c_grads = loss_and_grads(model, batch, torch.compile(model, fullgraph=True))
        torch.testing.assert_close(c_loss, loss, atol=1e-4, rtol=1e-4)
        for n in grads:
            torch.testing.assert_close(c_grads[n], grads[n], atol=1e-4, rtol=1e-3, msg=lambda m, n=n: f"{name} {n}: {m}")

