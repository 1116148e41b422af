"""The whole machine: with ``orchestrate.executor: multiprocess`` a Dagster run executes
independent steps at once (seen in the run's event log), while trainings take turns on the
training slots (never two on one slot); the slot locks themselves."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading

import pytest
from dagster import DagsterEventType, DagsterInstance
from dagster_project.summary import step_seconds

from lmforge.slots import slot_count, slot_gpus, training_slot
from tests.training.conftest import REPO
from tests.waiting import wait_for

from .test_dagster import make_project


def step_spans(instance: DagsterInstance, run_id: str) -> dict[str, tuple[float, float]]:
    """Step key -> (start, end) timestamps, from the run's event log."""
    starts, ends = {}, {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None or not event.step_key:
            continue
        if event.event_type == DagsterEventType.STEP_START:
            starts[event.step_key] = entry.timestamp
        elif event.event_type in (DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE):
            ends[event.step_key] = entry.timestamp
    return {k: (starts[k], ends[k]) for k in starts if k in ends}


def overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    return min(a[1], b[1]) - max(a[0], b[0])


@pytest.mark.slow
def test_independent_steps_run_at_once_and_trainings_take_turns_on_one_slot(tmp_path):
    root = make_project(tmp_path / "project", tokenizer={"kinds": ["bpe", "wordpiece"]},
                        train={"architectures": ["gpt", "transformer_xl"]},
                        orchestrate={"dvc_commit": False, "executor": "multiprocess", "max_concurrent": 3,
                                     "training_slots": 1})
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_project" / "dagster.yaml", home / "dagster.yaml")
    trainings = ["finetune_scratch_gpt_task", "finetune_scratch_transformer_xl_task"]
    select = ["clean", "tokenizer_bpe", "tokenizer_wordpiece", *trainings]
    env = {**os.environ, "DAGSTER_HOME": str(home), "LMFORGE_PROJECT": str(root)}
    done = subprocess.run([sys.executable, "-m", "dagster_project.run", "--select", ",".join(select)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    with DagsterInstance.from_config(str(home)) as instance:
        (run,) = instance.get_runs()
        spans = step_spans(instance, run.run_id)
        materialized = [e.dagster_event.event_specific_data.materialization
                        for e in instance.all_logs(run.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION)]
        slots = {m.asset_key.to_user_string(): m.metadata["training_slot"].value
                 for m in materialized if m.asset_key.to_user_string() in trainings}
        took = step_seconds(instance.all_logs(run.run_id))
    # the closing summary's step times are the event log's spans
    assert took == pytest.approx({k: end - start for k, (start, end) in spans.items()})
    assert f"steps: {len(spans)}, " in done.stdout and "wall time: " in done.stdout
    # Dagster's own step events stay in the instance (the multiprocess executor's engine still
    # prints its step-worker lines)
    chatter = [line for line in (done.stdout + done.stderr).splitlines() if " - DEBUG - " in line]
    assert not [line for line in chatter if "STEP_WORKER_" not in line], chatter
    assert set(select) <= set(spans)  # (the asset checks are steps too)
    # the two tokenizers depend only on clean: their steps ran at the same time, in two processes
    assert overlap(spans["tokenizer_bpe"], spans["tokenizer_wordpiece"]) > 0, spans
    # ... and both after clean
    assert min(spans["tokenizer_bpe"][0], spans["tokenizer_wordpiece"][0]) >= spans["clean"][1]
    # the two trainings could have run at once, but there is one training slot: one after the other
    assert overlap(spans[trainings[0]], spans[trainings[1]]) <= 0, spans
    assert slots == {t: 0 for t in trainings}


def test_training_slots_hand_out_each_slot_once_and_wait_when_all_are_taken(tmp_path):
    events: list[tuple[str, int]] = []
    release = threading.Event()

    def hold(name: str) -> None:
        with training_slot(tmp_path, 2, log=lambda m: events.append((f"{name} waits", -1)), poll=0.05) as slot:
            events.append((name, slot))
            release.wait(120)

    first, second = threading.Thread(target=hold, args=("a",)), threading.Thread(target=hold, args=("b",))
    first.start(), second.start()
    wait_for(lambda: len(events) >= 2, "both holders in a slot")
    assert sorted(slot for _, slot in events) == [0, 1]  # two holders, two different slots
    third = threading.Thread(target=hold, args=("c",))
    third.start()
    wait_for(lambda: ("c waits", -1) in events, "the third holder saying it waits", alive=third.is_alive)
    assert not any(name == "c" for name, _ in events)  # it found both slots taken: no slot of its own
    release.set()
    for t in (first, second, third):
        t.join(120)
    assert not any(t.is_alive() for t in (first, second, third))
    assert [slot for name, slot in events if name == "c"] in ([0], [1])


def test_slot_count_and_gpus_follow_the_machine():
    gpus = ["0", "1", "2", "3", "4", "5", "6", "7"]
    assert slot_count(0, gpus, 1) == 8 and slot_count(0, gpus, 2) == 4 and slot_count(0, [], 1) == 1
    assert slot_count(3, gpus, 1) == 3
    assert [slot_gpus(s, gpus, 2) for s in range(4)] == [["0", "1"], ["2", "3"], ["4", "5"], ["6", "7"]]
    assert slot_gpus(0, [], 1) == []
    assert slot_gpus(1, ["4", "6"], 1) == ["6"]  # CUDA_VISIBLE_DEVICES=4,6: slot 1 is GPU 6


def test_trainings_per_gpu_deals_consecutive_slots_the_same_gpus():
    gpus = ["0", "1"]
    assert slot_count(0, gpus, 1, share=3) == 6 and slot_count(0, [], 1, share=3) == 1  # the CPU: one slot
    assert [slot_gpus(s, gpus, 1, share=3) for s in range(6)] == [["0"]] * 3 + [["1"]] * 3
    assert [slot_gpus(s, ["0", "1", "2", "3"], 2, share=2) for s in range(4)] == [["0", "1"], ["0", "1"], ["2", "3"], ["2", "3"]]
    assert [slot_gpus(s, gpus, 1) for s in range(2)] == [["0"], ["1"]]  # share 1: a GPU is never shared
