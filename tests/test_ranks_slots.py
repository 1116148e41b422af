"""``lmforge.ranks`` (which process of a launch this is) and ``lmforge.slots.visible_gpus`` (the
GPUs this process may use), each on the environment a launcher sets."""

from __future__ import annotations

import pytest
import torch

from lmforge import ranks, slots

RANK_VARIABLES = ("RANK", "SLURM_PROCID", "LOCAL_RANK")


@pytest.fixture(autouse=True)
def _no_launch(monkeypatch):
    for var in (*RANK_VARIABLES, "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize("environment, zero", [
    ({}, True),  # not launched: the only process
    ({"RANK": "0"}, True), ({"RANK": "3"}, False), ({"RANK": " 1 "}, False),
    ({"SLURM_PROCID": "2"}, False), ({"LOCAL_RANK": "1"}, False), ({"LOCAL_RANK": "0"}, True),
    ({"RANK": "0", "LOCAL_RANK": "1"}, True),  # the global rank decides: rank 0 on node 0
    ({"RANK": "4", "LOCAL_RANK": "0"}, False),  # the first process of the second node is not rank 0
    ({"SLURM_PROCID": "0", "LOCAL_RANK": "2"}, True), ({"RANK": "1", "SLURM_PROCID": "0"}, False),
    ({"RANK": "", "SLURM_PROCID": "5"}, False),  # an empty variable is not set
    ({"RANK": "first", "LOCAL_RANK": "1"}, False),  # not a number: the next variable decides
    ({"RANK": "first"}, True),
])
def test_is_rank_zero_follows_the_first_rank_variable_set(monkeypatch, environment, zero):
    for var, value in environment.items():
        monkeypatch.setenv(var, value)
    assert ranks.is_rank_zero() is zero


def test_visible_gpus_are_cuda_visible_devices_where_set(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)  # never asked when the variable is set
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4, 6,,7 ")
    assert slots.visible_gpus() == ["4", "6", "7"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1a2b,GPU-3c4d")  # UUIDs are kept as written
    assert slots.visible_gpus() == ["GPU-1a2b", "GPU-3c4d"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # set and empty: no GPU at all
    assert slots.visible_gpus() == []


def test_visible_gpus_are_every_cuda_device_otherwise(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    assert slots.visible_gpus() == ["0", "1", "2"]
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert slots.visible_gpus() == []
    # and the slots follow: two GPUs per training on three GPUs is one slot of GPUs 0 and 1
    gpus = ["0", "1", "2"]
    assert slots.slot_count(0, gpus, 2) == 1 and slots.slot_gpus(0, gpus, 2) == ["0", "1"]
