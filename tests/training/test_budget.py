"""A pretraining budget in wall-clock minutes: the run stops at the first optimizer step ending
past it and the schedule reaches its floor there; a resumed run counts the time already spent;
``train.budget_minutes`` reaches every recipe's pretraining. A fake clock stands in for the wall
(each optimizer step "takes" a fixed number of seconds), so nothing here depends on the machine's speed."""

from __future__ import annotations

import pytest
import torch

from lmforge.config import load_params
from lmforge.models.layers import ModelOutput
from lmforge.training.budget import WallClockBudget
from lmforge.training.module import LMForgeModule, lr_lambda
from lmforge.config.recipes import BUDGET_STEP_CAP, OptimConfig, load_recipe, size_recipe


class FakeClock:
    """Seconds that advance by ``per_call`` at each reading."""

    def __init__(self, per_call: float):
        self.now, self.per_call = 0.0, per_call

    def __call__(self) -> float:
        self.now += self.per_call
        return self.now


class _Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(()))

    def forward(self, input_ids, **_):
        return ModelOutput(loss=(self.w * input_ids.float().mean()) ** 2)


class _LRs:
    """Records the learning rate after every optimizer step (the one the next step will use)."""

    def __init__(self):
        import lightning.pytorch as pl

        outer = self

        class CB(pl.Callback):
            def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
                outer.rates.append(trainer.optimizers[0].param_groups[0]["lr"])

        self.rates: list[float] = []
        self.callback = CB()


def fit(tmp_path, minutes: float, seconds_per_step: float, *, schedule="linear", warmup=0, ckpt_path=None,
        callbacks=(), max_steps=None):
    import lightning.pytorch as pl

    optim = OptimConfig(budget_minutes=minutes, max_steps=max_steps, batch_size=2, learning_rate=1e-2,
                        schedule=schedule, warmup_steps=warmup)
    # the clock is read once at the start and once per optimizer step (before it)
    budget = WallClockBudget(minutes, clock=FakeClock(seconds_per_step))
    module = LMForgeModule(_Linear(), optim, budget=budget)
    lrs = _LRs()
    data = [{"input_ids": torch.ones(4, dtype=torch.long)} for _ in range(2000)]
    from lightning.pytorch.callbacks import ModelCheckpoint

    saving = any(isinstance(c, ModelCheckpoint) for c in callbacks)
    trainer = pl.Trainer(max_steps=optim.max_steps, logger=False, enable_checkpointing=saving, enable_progress_bar=False,
                         default_root_dir=tmp_path, accelerator="cpu", callbacks=[budget, lrs.callback, *callbacks])
    trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=2), ckpt_path=ckpt_path, weights_only=False)
    return trainer, budget, lrs.rates


def test_the_budget_stops_training_at_the_first_step_past_it_and_the_schedule_ends_at_zero(tmp_path):
    # 1 minute, each step 7 s on the clock: steps end at 7, 14, ..., 56, 63 s: the 9th is the first past 60
    trainer, budget, rates = fit(tmp_path, 1.0, 7.0)
    assert trainer.global_step == 9
    assert budget.used == pytest.approx(63.0)
    assert rates[-1] == 0.0                      # the schedule reached its floor where training stopped
    assert all(r > 0 for r in rates[:-1])        # and not before
    assert rates == sorted(rates, reverse=True)  # linear decay over the budget's time


def test_a_budget_that_stops_the_run_leaves_no_validation_pass_after_it(tmp_path):
    import lightning.pytorch as pl

    optim = OptimConfig(budget_minutes=1.0, batch_size=2, learning_rate=1e-2, schedule="linear")
    budget = WallClockBudget(1.0, clock=FakeClock(7.0))
    validated: list[int] = []

    class Module(LMForgeModule):
        def validation_step(self, batch, batch_idx):
            validated.append(self.global_step)
            return super().validation_step(batch, batch_idx)

    data = [{"input_ids": torch.ones(4, dtype=torch.long)} for _ in range(200)]
    loader = torch.utils.data.DataLoader(data, batch_size=2)
    trainer = pl.Trainer(max_steps=-1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         default_root_dir=tmp_path, accelerator="cpu", callbacks=[budget], val_check_interval=5,
                         num_sanity_val_steps=0, limit_val_batches=2)
    trainer.fit(Module(_Linear(), optim, budget=budget), loader, loader)
    assert trainer.global_step == 9
    # the scheduled pass at step 5 ran (2 batches); none at the stop, step 9
    assert validated == [5, 5]


def test_the_decay_follows_time_not_steps(tmp_path):
    """With linear decay and no warmup, the rate after the step ending at t seconds is
    peak x (1 - t / budget): the same fraction of the budget gives the same rate at any speed."""
    _, _, fast = fit(tmp_path / "a", 1.0, 3.0)
    _, _, slow = fit(tmp_path / "b", 1.0, 6.0)
    assert len(fast) == 20 and len(slow) == 10
    assert fast[9] == pytest.approx(1e-2 * (1 - 30 / 60))
    assert slow[4] == pytest.approx(fast[9])      # both at 30 s
    assert fast[-1] == slow[-1] == 0.0


def test_the_warmup_is_in_steps_and_the_decay_starts_where_it_ends(tmp_path):
    _, budget, rates = fit(tmp_path, 1.0, 5.0, warmup=4, schedule="cosine")
    assert rates[:3] == pytest.approx([1e-2 * 2 / 4, 1e-2 * 3 / 4, 1e-2 * 4 / 4])
    assert budget.warmup_end == pytest.approx(20 / 60)   # the 4th step ended at 20 s
    assert rates[-1] == pytest.approx(0.0, abs=1e-12)


def test_max_steps_caps_a_budgeted_run(tmp_path):
    trainer, _, _ = fit(tmp_path, 1.0, 1.0, max_steps=5)
    assert trainer.global_step == 5


def test_a_resumed_run_counts_the_time_already_spent(tmp_path):
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint

    ckpt = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=3, save_top_k=-1, filename="s{step}")
    fit(tmp_path / "first", 1.0, 7.0, callbacks=[ckpt])
    saved = tmp_path / "ckpt" / "sstep=3.ckpt"
    assert saved.exists()
    # the fake clock reads 7 at the start and 7 more at each reading: steps 1-3 end at 7, 14, 21 s
    # used, and the checkpoint written after the 3rd reads 28 s: the time really spent by then
    trainer, budget, rates = fit(tmp_path / "second", 1.0, 7.0, ckpt_path=str(saved))
    assert budget.before == pytest.approx(28.0)
    assert trainer.global_step == 3 + 5        # 28 + 5 x 7 = 63 s: the 5th step after the resume passes 60
    assert rates[-1] == 0.0


def test_train_budget_minutes_reaches_every_recipe_and_is_refused_for_fine_tuning(tmp_path):
    from lmforge.config import ConfigError
    from lmforge.config.recipes import FinetuneOptimConfig

    params = load_params(None, ["train.budget_minutes=2.5"])
    for arch in ("bert", "gpt", "t5"):
        pre = size_recipe(params, load_recipe(params, arch)).pretrain
        assert pre.budget_minutes == 2.5 and pre.max_steps == BUDGET_STEP_CAP
    capped = load_params(None, ["train.budget_minutes=2.5", "train.max_steps=40"])
    assert size_recipe(capped, load_recipe(capped, "bert")).pretrain.max_steps == 40
    with pytest.raises(ValueError, match="budget_minutes is a pretraining budget"):
        FinetuneOptimConfig(epochs=1, batch_size=2, learning_rate=1e-3, budget_minutes=1)
    with pytest.raises(ConfigError, match="budget_minutes"):
        load_params(None, ["train.budget_minutes=0"])


def test_the_schedule_without_a_budget_is_unchanged():
    o = OptimConfig(max_steps=100, batch_size=2, learning_rate=1.0, warmup_steps=10, schedule="linear")
    f = lr_lambda(o)
    assert f(9) == 1.0 and f(55) == pytest.approx(0.5) and f(100) == 0.0
