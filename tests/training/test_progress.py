"""The training stages' progress lines: the step count of the run's total, the last logged loss
and the tokens per second, from a real Trainer; a closing line at the end."""

from __future__ import annotations

import io
import re

import lightning.pytorch as pl
import torch

from lmforge.models.registry import build_model
from lmforge.training.module import LMForgeModule
from lmforge.training.progress import TrainingProgress
from lmforge.config.recipes import OptimConfig
from lmforge.training.run import History


def test_a_line_per_interval_with_the_step_the_loss_and_the_tokens_per_second(tmp_path):
    torch.manual_seed(0)
    model = build_model("gpt-tiny", head="lm", vocab_size=200, n_positions=32)
    module = LMForgeModule(model, OptimConfig(max_steps=6, batch_size=4, learning_rate=1e-3))
    data = [{"input_ids": x, "labels": x} for x in torch.randint(0, 200, (24, 32))]
    history, out = History(log_every=2), io.StringIO()
    progress = TrainingProgress("pretrain gpt", history, every=0, stream=out)
    trainer = pl.Trainer(max_steps=6, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         default_root_dir=tmp_path, accelerator="cpu", callbacks=[history, progress])
    trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=4))
    lines = out.getvalue().splitlines()
    # steps 1 to 5 as they end (every=0: each), then the closing line at 6 of 6
    assert [re.match(r"pretrain gpt: (\d+)/6 steps", line).group(1) for line in lines] == ["1", "2", "3", "4", "5", "6"]
    assert all(re.search(r"steps/s.*elapsed\) loss \d+\.\d{3}, [\d,]+ tokens/s$", line) for line in lines), lines
    assert "left" in lines[2] and "left" not in lines[-1]
    last_logged = history.last("train/loss")
    assert lines[-1].split(" loss ")[1].startswith(f"{last_logged:.3f}")
