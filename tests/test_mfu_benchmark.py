"""benchmarks/mfu.py: the FLOPs count it divides by, and its loops on a CPU (what it measures
needs a GPU: BENCHMARKS.md, "On a GPU: MFU")."""

from __future__ import annotations

import pytest

from .conftest import load_benchmark


def test_gpt2_flops_per_token_is_six_n_plus_the_attention_term():
    from lmforge.models.registry import build_model

    mfu = load_benchmark("mfu")
    model = build_model("gpt2", head="lm")
    # GPT-2 small: 124,439,808 parameters, 1,024 x 768 of them the position table
    assert sum(p.numel() for p in model.parameters()) == 124_439_808
    n = 124_439_808 - 1024 * 768
    assert mfu.flops_per_token("gpt2", model, 1024, 1.0) == 6 * n + 12 * 12 * 768 * 1024


@pytest.mark.parametrize("model", ["gpt2", "bert-base"])
def test_both_loops_run_on_a_cpu_and_report_their_rates(model):
    rows = load_benchmark("mfu").main(["--model", model, "--device-check", "--runs", "ours,hf"])
    assert [r["run"] for r in rows] == ["ours", "hf"]
    for row in rows:
        assert "error" not in row, row
        assert row["tokens_per_s"] > 0 and 0 <= row["host_gap_fraction"] < 1 and row["gpu_idle_fraction"] is None
        # the profiled wait for data: some time in next() (no worker here: the batch is built
        # inside it), less than the whole window
        assert 0 < row["data_wait_fraction"] < 1


def test_a_padded_vocabulary_counts_only_the_real_rows():
    from lmforge.models.registry import build_model

    mfu = load_benchmark("mfu")
    plain, padded = build_model("gpt2", head="lm"), build_model("gpt2", head="lm", vocab_size=50304)
    assert padded.gpt.wte.weight.shape[0] == 50304 == -(-50257 // mfu.PAD_MULTIPLE) * mfu.PAD_MULTIPLE
    assert mfu.flops_per_token("gpt2", padded, 1024, 1.0, vocab_size=50257) == mfu.flops_per_token("gpt2", plain, 1024, 1.0)
    bert, bert_padded = build_model("bert-base", head="pretraining"), build_model("bert-base", head="pretraining", vocab_size=30528)
    # (the padded model's output bias has 6 more entries, each counted at every position)
    assert (mfu.flops_per_token("bert-base", bert_padded, 512, 0.15, vocab_size=30522)
            == mfu.flops_per_token("bert-base", bert, 512, 0.15) + 6 * 6)


def test_run_names_are_parsed_with_their_options_and_unknown_ones_refused():
    mfu = load_benchmark("mfu")
    assert mfu.parse_run("ours-compiled+pad+cudnn") == ("ours", "compiled", {"pad", "cudnn"})
    assert mfu.parse_run("hf") == ("hf", "", set())
    for bad in ("ours+fast", "theirs-compiled", "ours-jit"):
        with pytest.raises(ValueError, match="unknown run"):
            mfu.parse_run(bad)


def test_the_padded_run_trains_on_a_cpu_and_says_so():
    rows = load_benchmark("mfu").main(["--model", "gpt2", "--device-check", "--runs", "ours+pad+cudnn"])
    assert "error" not in rows[0], rows[0]
    assert rows[0]["vocab_rows"] == 50304 and rows[0]["attention"] == "sdpa"  # cuDNN only on a GPU


@pytest.mark.parametrize("preset, head", [("gpt2", "lm"), ("bert-base", "pretraining")])
def test_nodrop_builds_a_model_without_dropout_and_the_trainers_copy_has_none_either(preset, head):
    import torch

    from lmforge.interop.hf import to_hf
    from lmforge.models.registry import build_model

    mfu = load_benchmark("mfu")
    assert mfu.parse_run("hf-compiled+nodrop") == ("hf", "compiled", {"nodrop"})
    small = dict(n_layers=1, d_model=32, n_heads=2, d_ff=64, vocab_size=128)
    plain = build_model(preset, head=head, **small)
    bare = build_model(preset, head=head, **small, **mfu.no_dropout(preset))

    def rates(model):
        return {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)}

    assert rates(plain) == {0.1} and rates(bare) <= {0.0}
    assert rates(to_hf(plain)) == {0.1} and rates(to_hf(bare)) == {0.0}


def test_the_nodrop_run_trains_on_a_cpu_and_says_so():
    rows = load_benchmark("mfu").main(["--model", "gpt2", "--device-check", "--runs", "ours+pad+nodrop"])
    assert "error" not in rows[0], rows[0]
    assert rows[0]["dropout"] is False and rows[0]["vocab_rows"] == 50304


def test_the_kernel_table_gives_each_kernels_time_per_step_and_share():
    from types import SimpleNamespace

    import torch

    mfu = load_benchmark("mfu")
    cuda, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU
    events = [SimpleNamespace(key="gemm", count=6, self_device_time_total=3000.0, device_type=cuda),
              SimpleNamespace(key="softmax", count=3, self_device_time_total=1000.0, device_type=cuda),
              SimpleNamespace(key="aten::mm", count=6, self_device_time_total=0.0, device_type=cpu),  # a CPU op: left out
              SimpleNamespace(key="copy", count=9, self_device_time_total=0.0, device_type=cuda)]  # no time: left out
    profiler = SimpleNamespace(key_averages=lambda: events)
    kernels, per_step = mfu.top_kernels(profiler, steps=3, cuda=True)
    assert per_step == 1.333  # 4 ms of kernels over 3 steps
    assert kernels == [{"kernel": "gemm", "calls_per_step": 2.0, "ms_per_step": 1.0, "share": 0.75},
                       {"kernel": "softmax", "calls_per_step": 1.0, "ms_per_step": 0.333, "share": 0.25}]


def test_profiled_steps_follow_the_timed_window_and_report_their_kernels():
    rows = load_benchmark("mfu").main(["--model", "gpt2", "--device-check", "--runs", "ours", "--profile-steps", "2"])
    row = rows[0]
    assert "error" not in row, row
    assert row["steps"] == 2  # the profiled steps are not timed
    names = [k["kernel"] for k in row["kernels"]]
    assert any(name in ("aten::mm", "aten::addmm", "aten::linear") for name in names), names
    assert 0 < sum(k["share"] for k in row["kernels"]) <= 1.0001
    assert sum(k["ms_per_step"] for k in row["kernels"]) <= row["kernel_ms_per_step"] + 0.01 * len(names)
