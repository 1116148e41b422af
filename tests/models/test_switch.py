"""Switch Transformer: forward/backward, the router (float32, jitter on the router only), the
capacity, exactly the over-capacity tokens dropped and passed through, the router losses
against a loop reference, a dispatch that does not loop over experts, presets, config errors."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
import transformers
from torch.utils._python_dispatch import TorchDispatchMode

from lmforge.interop._t5 import switch_hf_config
from lmforge.models import switch, t5
from lmforge.models.layers import ConfigError, count_parameters

from .test_t5 import make_batch

HEADS = [switch.SwitchForConditionalGeneration, switch.SwitchForSequenceClassification]


def tiny(**overrides) -> switch.SwitchConfig:
    return switch.from_name("switch-tiny", vocab_size=97, **overrides)


def moe_layer(seed: int = 0, **overrides) -> switch.SwitchFeedForward:
    torch.manual_seed(seed)
    layer = switch.SwitchFeedForward(tiny(dropout=0.0, **overrides))
    with torch.no_grad():  # a router that actually prefers experts (the N(0, 0.02) init is near uniform)
        layer.router.weight.normal_(0.0, 1.0)
    return layer.eval()


def reference_moe(layer: switch.SwitchFeedForward, x: torch.Tensor, capacity: int):
    """Token by token, in order: route, count, drop over capacity, apply one expert (loops)."""
    E = layer.config.num_experts
    w, wo = layer.experts.wi, layer.experts.wo
    out = torch.zeros_like(x)
    kept = torch.zeros(x.shape[:2], dtype=torch.bool)
    for b in range(x.size(0)):
        counts = [0] * E
        for s in range(x.size(1)):
            logits = layer.router.weight @ x[b, s]
            probs = logits.softmax(-1)
            e = int(probs.argmax())
            counts[e] += 1
            if counts[e] <= capacity:
                kept[b, s] = True
                out[b, s] = probs[e] * (torch.relu(x[b, s] @ w[e]) @ wo[e])
    return out, kept


def reference_losses(logits: torch.Tensor) -> tuple[float, float]:
    """Switch eq. 4-6 per group (sequence) averaged over groups, and the z-loss, with loops."""
    B, S, E = logits.shape
    lb, z = 0.0, 0.0
    for b in range(B):
        probs = logits[b].softmax(-1)
        top = probs.argmax(-1)
        f = [sum(int(top[s]) == i for s in range(S)) / S for i in range(E)]
        P = [float(probs[:, i].mean()) for i in range(E)]
        lb += E * sum(f[i] * P[i] for i in range(E)) / B
        for s in range(S):
            z += float(torch.logsumexp(logits[b, s], -1)) ** 2 / (B * S)
    return lb, z


@pytest.mark.parametrize("head", HEADS, ids=lambda h: h.__name__)
def test_forward_backward_every_head(head):
    torch.manual_seed(0)
    config = tiny()
    model = head(config)
    batch = make_batch(config, head)
    out = model(**batch)
    n_sparse = 2  # block 1 of each stack
    assert out.aux["load_balancing_loss_per_layer"].shape == (n_sparse,)
    assert out.aux["router_z_loss_per_layer"].shape == (n_sparse,)
    assert out.aux["expert_fraction"].shape == (n_sparse, config.num_experts)
    torch.testing.assert_close(out.aux["expert_fraction"].sum(-1), torch.ones(n_sparse))
    assert out.aux["dropped_fraction"].shape == (n_sparse,)
    task = out.aux["lm_loss" if head is switch.SwitchForConditionalGeneration else "classification_loss"]
    expected = (task + config.router_aux_loss_coef * out.aux["load_balancing_loss_per_layer"].mean()
                + config.router_z_loss_coef * out.aux["router_z_loss_per_layer"].mean())
    torch.testing.assert_close(out.loss, expected)
    torch.testing.assert_close(out.aux["load_balancing_loss"],
                               config.router_aux_loss_coef * out.aux["load_balancing_loss_per_layer"].mean())
    out.loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    assert model.encoder.layers[1].ffn.router.weight.grad.abs().sum() > 0  # the gate carries gradient to the router


def test_router_losses_can_stay_out_of_the_loss():
    torch.manual_seed(0)
    model = switch.SwitchForConditionalGeneration(tiny(add_router_losses=False)).eval()
    out = model(**make_batch(model.config, switch.SwitchForConditionalGeneration))
    assert torch.equal(out.loss, out.aux["lm_loss"])
    assert out.aux["load_balancing_loss"] > 0 and out.aux["router_z_loss"] > 0  # still reported, for the loop to add


def test_sparse_blocks_follow_the_step():
    config = switch.from_name("switch-base-8")
    with torch.device("meta"):
        model = switch.SwitchForConditionalGeneration(config)
    for stack in (model.encoder, model.decoder):
        sparse = [i for i, layer in enumerate(stack.layers) if isinstance(layer.ffn, switch.SwitchFeedForward)]
        assert sparse == [1, 3, 5, 7, 9, 11]
    assert [switch.is_sparse(i, 4) for i in range(6)] == [False, True, False, False, False, True]
    assert all(switch.is_sparse(i, 1) for i in range(3)) and not any(switch.is_sparse(i, 0) for i in range(3))


def test_expert_capacity():
    config = tiny(num_experts=4, capacity_factor_train=1.25, capacity_factor_eval=2.0, min_expert_capacity=1)
    assert switch.expert_capacity(64, config, training=True) == 20  # int(64 * 1.25 / 4)
    assert switch.expert_capacity(64, config, training=False) == 32
    assert switch.expert_capacity(10, config, training=True) == 3  # int(3.125)
    assert switch.expert_capacity(1, tiny(num_experts=8), training=False) == 4  # the minimum (default 4)
    assert switch.expert_capacity(1000, tiny(expert_capacity=7), training=True) == 7  # fixed


# the three ways to dispatch (SwitchFeedForward's docstring): sorted with the kept count read on the
# host (a CPU's default), sorted without a host read (a GPU's), the capacity buffer (a float32 GPU's)
DISPATCHES = {"sorted": ("sorted", None), "sorted-no-host-read": ("sorted", False), "capacity": ("capacity", None)}


def set_dispatch(layer: switch.SwitchFeedForward, mode: str) -> switch.SwitchFeedForward:
    layer.dispatch, layer.count_on_host = DISPATCHES[mode]
    return layer


@pytest.mark.parametrize("mode", sorted(DISPATCHES))
def test_dispatch_matches_a_token_by_token_reference_and_drops_exactly_the_overflow(mode):
    layer = set_dispatch(moe_layer(min_expert_capacity=0, capacity_factor_eval=0.8), mode)  # 12 tokens, 4 experts: capacity 2
    x = torch.randn(3, 12, layer.config.d_model)
    with torch.no_grad():
        y, routing = layer(x)
        expected, kept = reference_moe(layer, x, capacity=2)
    assert routing.capacity == 2
    assert torch.equal(routing.kept, kept)
    assert 0 < (~kept).sum() < kept.numel()  # some dropped, some not
    torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5)
    assert (y[~kept] == 0).all()
    # a large capacity drops nothing
    layer.config.capacity_factor_eval = 10.0
    with torch.no_grad():
        y, routing = layer(x)
        expected, kept = reference_moe(layer, x, capacity=30)
    assert routing.kept.all() and kept.all()
    torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5)


def test_dropped_tokens_pass_through_the_block_unchanged():
    torch.manual_seed(0)
    config = tiny(dropout=0.0, min_expert_capacity=0, capacity_factor_eval=0.6)
    model = switch.SwitchForConditionalGeneration(config).eval()
    block = model.encoder.layers[1]
    with torch.no_grad():
        block.ffn.router.weight.normal_(0.0, 1.0)
    seen = {}
    h1 = block.ffn_norm.register_forward_hook(lambda m, inp, out: seen.__setitem__("residual", inp[0]))
    h2 = block.register_forward_hook(lambda m, inp, out: seen.__setitem__("out", out))
    batch = make_batch(config, switch.SwitchForConditionalGeneration)
    with torch.no_grad():
        model(**batch)
    h1.remove(), h2.remove()
    out, routing = seen["out"]
    dropped = ~routing.kept
    assert dropped.any() and routing.kept.any()
    assert torch.equal(out[dropped], seen["residual"][dropped])  # output = residual input, bit for bit
    assert not torch.allclose(out[routing.kept], seen["residual"][routing.kept])


def test_router_losses_equal_a_loop_reference():
    layer = moe_layer()
    x = torch.randn(3, 10, layer.config.d_model)
    with torch.no_grad():
        _, routing = layer(x)
    lb, z = reference_losses(routing.logits)
    assert routing.load_balancing_loss.item() == pytest.approx(lb, rel=1e-5)
    assert routing.router_z_loss.item() == pytest.approx(z, rel=1e-5)
    # f counts choices BEFORE dropping: the same with a capacity that drops most tokens
    tight = moe_layer(min_expert_capacity=0, expert_capacity=1)
    with torch.no_grad():
        _, dropped_routing = tight(x)
    assert dropped_routing.kept.float().mean() < 0.5
    assert dropped_routing.load_balancing_loss.item() == pytest.approx(lb, rel=1e-5)
    # uniform router probabilities: E * sum_i f_i / E = 1 however the (tied) choices fall
    with torch.no_grad():
        layer.router.weight.zero_()
        _, uniform = layer(x)
    assert uniform.load_balancing_loss.item() == pytest.approx(1.0)
    assert uniform.router_z_loss.item() == pytest.approx(torch.log(torch.tensor(4.0)).item() ** 2)


def test_router_is_float32_and_jitter_reaches_only_the_router():
    layer = moe_layer(capacity_factor_train=10.0, capacity_factor_eval=10.0)
    x = torch.randn(2, 8, layer.config.d_model)
    x_before = x.clone()
    layer.train()
    a, b = layer.router(x), layer.router(x)
    assert a.dtype == torch.float32 and not torch.equal(a, b)  # jittered in training
    assert torch.equal(x, x_before)  # the input itself is untouched
    layer.eval()
    assert torch.equal(layer.router(x), layer.router(x))
    # zero router weights: every jittered logit is 0, all tokens go to expert 0 with gate 1/E; if the
    # jitter reached the experts' input, training and evaluation outputs would differ
    with torch.no_grad():
        layer.router.weight.zero_()
        train_out = layer.train()(x)[0]
        eval_out = layer.eval()(x)[0]
    torch.testing.assert_close(train_out, eval_out, atol=0, rtol=0)
    # bf16 model: the router still computes in float32
    layer = moe_layer().to(torch.bfloat16)
    y, routing = layer(x.bfloat16())
    assert y.dtype == torch.bfloat16 and routing.logits.dtype == torch.float32


class _CountOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.counts: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def test_dispatch_is_vectorised_over_experts():
    """The same operators run, the same number of times, for 2 or 16 experts: no loop over experts,
    the experts run as grouped matmuls over the tokens sorted by expert, no boolean-mask indexing
    (nonzero), and one host read (how many tokens are kept, the number of rows to compute)."""
    counts = {}
    for E in (2, 16):
        layer = switch.SwitchFeedForward(tiny(num_experts=E)).eval()
        with torch.no_grad(), _CountOps() as mode:
            layer(torch.randn(2, 8, layer.config.d_model))
        counts[E] = mode.counts
    assert counts[2] == counts[16]
    assert counts[2]["_grouped_mm"] == 2 and "bmm" not in counts[2] and "nonzero" not in counts[2]
    assert counts[2]["_local_scalar_dense"] == 1
    assert switch.Experts(tiny(num_experts=16)).wi.shape == (16, 64, 128)
    # without the host read (a GPU's default), and the capacity buffer: still no loop, and no host read
    for mode, op in (("sorted-no-host-read", "_grouped_mm"), ("capacity", "bmm")):
        for E in (2, 16):
            layer = set_dispatch(switch.SwitchFeedForward(tiny(num_experts=E)).eval(), mode)
            with torch.no_grad(), _CountOps() as mode_counts:
                layer(torch.randn(2, 8, layer.config.d_model))
            counts[E] = mode_counts.counts
        assert counts[2] == counts[16], mode
        assert counts[2][op] == 2 and "_local_scalar_dense" not in counts[2] and "nonzero" not in counts[2], mode


def test_experts_cast_to_the_autocast_dtype():
    """Under autocast the grouped matmuls run in its dtype (as nn.Linear's would), not float32."""
    torch.manual_seed(0)
    experts = switch.Experts(tiny(num_experts=4, dropout=0.0))
    x = torch.randn(9, 64)
    ends = torch.tensor([3, 3, 7, 9], dtype=torch.int32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = experts(x, ends)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), experts(x, ends), atol=0.05, rtol=0.05)


def test_experts_compute_each_expert_on_its_own_rows():
    """Grouped matmuls over tokens sorted by expert equal each expert's feed-forward layer on its
    slice, empty experts included, and the gradients reach each expert's own weights only."""
    torch.manual_seed(0)
    experts = switch.Experts(tiny(num_experts=4, dropout=0.0))
    x = torch.randn(9, 64)
    ends = torch.tensor([3, 3, 7, 9], dtype=torch.int32)  # expert 1 gets nothing
    out = experts(x, ends)
    starts = [0, 3, 3, 7]
    expected = torch.cat([torch.relu(x[a:b] @ experts.wi[e]) @ experts.wo[e]
                          for e, (a, b) in enumerate(zip(starts, ends.tolist()))])
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    out.backward(torch.randn_like(out))  # (torch 2.13's grouped_mm backward rejects .sum()'s expanded gradient)
    assert (experts.wi.grad[1] == 0).all() and (experts.wo.grad[1] == 0).all()
    assert all(experts.wi.grad[e].abs().sum() > 0 for e in (0, 2, 3))


@pytest.mark.parametrize("mode", sorted(DISPATCHES))
def test_gradients_match_a_token_by_token_reference_with_drops(mode):
    """Input, router and expert gradients through each dispatch equal those of the loop
    reference, with a capacity that drops tokens (which get no expert gradient)."""
    layer = set_dispatch(moe_layer(min_expert_capacity=0, capacity_factor_eval=0.8), mode)  # capacity 2 of 12 tokens
    x = torch.randn(3, 12, layer.config.d_model)
    g = torch.randn_like(x)
    x1 = x.clone().requires_grad_()
    y, routing = layer(x1)
    (y * g).sum().backward()
    grads = [x1.grad, layer.router.weight.grad, layer.experts.wi.grad, layer.experts.wo.grad]
    layer.zero_grad()
    x2 = x.clone().requires_grad_()
    expected, kept = reference_moe(layer, x2, capacity=2)
    (expected * g).sum().backward()
    assert torch.equal(routing.kept, kept) and not kept.all()
    for got, want in zip(grads, [x2.grad, layer.router.weight.grad, layer.experts.wi.grad, layer.experts.wo.grad]):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_cached_decoding_matches_full_decoding():
    """When the full decoding drops nothing (a one-token step never drops anything)."""
    torch.manual_seed(0)
    model = switch.SwitchForConditionalGeneration(tiny(capacity_factor_eval=4.0)).eval()
    batch = make_batch(model.config, switch.SwitchForConditionalGeneration)
    with torch.no_grad():
        memory = model.encode(batch["input_ids"], batch["attention_mask"])
        full = model.decode(batch["decoder_input_ids"], memory, batch["attention_mask"])
        cache: dict = {}
        steps = [model.decode(batch["decoder_input_ids"][:, :t], memory, batch["attention_mask"], cache=cache)
                 for t in range(1, batch["decoder_input_ids"].size(1) + 1)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_training_steps_reduce_the_loss():
    torch.manual_seed(0)
    model = switch.SwitchForConditionalGeneration(tiny())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batch = make_batch(model.config, switch.SwitchForConditionalGeneration)
    losses = []
    for _ in range(8):
        out = model(**batch)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(out.aux["lm_loss"].item())
    assert losses[-1] < losses[0] - 1.0


@pytest.mark.parametrize("name", sorted(switch.PRESETS))
def test_preset_parameter_counts_equal_transformers(name):
    config = switch.from_name(name)
    with torch.device("meta"):
        ours = count_parameters(switch.SwitchForConditionalGeneration(config))
        theirs = transformers.SwitchTransformersForConditionalGeneration(switch_hf_config(config)).num_parameters()
    assert ours == theirs


def test_switch_base_8_has_the_published_size():
    """google/switch-base-8: 619M (all experts, the tied embedding once), T5-base's 223M + 12 x 7 extra experts."""
    with torch.device("meta"):
        n = count_parameters(switch.SwitchForConditionalGeneration(switch.from_name("switch-base-8")))
        base = count_parameters(t5.T5ForConditionalGeneration(t5.from_name("t5-base")))
    assert abs(n - 619e6) / 619e6 < 0.005, n
    assert n - base == 12 * (7 * 2 * 768 * 3072 + 8 * 768)


def test_config_errors():
    with pytest.raises(ConfigError, match="num_experts"):
        tiny(num_experts=0)
    with pytest.raises(ConfigError, match="capacity_factor_train"):
        tiny(capacity_factor_train=0.0)
    with pytest.raises(ConfigError, match="expert_capacity"):
        tiny(expert_capacity=0)
    with pytest.raises(ConfigError, match="router_jitter"):
        tiny(router_jitter=1.0)
    with pytest.raises(ConfigError, match="encoder_sparse_step"):
        tiny(encoder_sparse_step=-1)
    with pytest.raises(ConfigError, match="unknown option"):
        tiny(n_experts=4)
    with pytest.raises(ConfigError, match="known: .*switch-base-8"):
        switch.from_name("switch-c-2048")
    assert isinstance(tiny(), t5.T5Config)  # a T5 config plus the experts
