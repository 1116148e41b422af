"""The data side of training: an objective's examples in a fixed, resumable order.

Every example is addressed by a *position* in one long stream over the epochs of a run:
position ``q`` is example ``order_e[q % N]`` of data epoch ``e = q // N`` (``order_e`` a seeded
permutation, or the identity for ordered objectives such as Transformer-XL's ``segments``), and
it is drawn with ``rng_for(seed, e, index)``: masks are re-drawn every epoch, and any example of
any epoch is rebuilt exactly. Micro-step ``s`` takes positions ``[s*G, (s+1)*G)`` of the stream
(``G`` = batch size x world size); rank ``r`` takes the ``r``-th slice of ``batch_size`` of them.
So a run resumed after ``k`` micro-steps starts at position ``k*G`` and sees exactly the batches
the uninterrupted run saw, and a 2-process run sees the same global batches as a 1-process run
with twice the batch size. For ``segments`` the slices are contiguous rows of the ordered stream,
so each rank keeps its own rows' continuity (the memories of Transformer-XL stay valid).
"""

from __future__ import annotations

from collections.abc import Iterator

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

from ..objectives.base import Objective, rng_for
from ..objectives.features import pad_batch


class StreamDataset:
    """``dataset[(epoch, index)]``: example ``index`` of data epoch ``epoch``."""

    def __init__(self, objective: Objective, seed: int):
        self.objective = objective
        self.seed = seed

    def __len__(self) -> int:
        return len(self.objective)

    def __getitem__(self, key: tuple[int, int]) -> dict[str, np.ndarray]:
        epoch, index = key
        return self.objective.example(index, rng_for(self.seed, epoch, index))


class StreamSampler(Sampler):
    """The ``(epoch, index)`` keys of rank ``rank``'s share of micro-steps ``[start_step, steps)``
    (``start_step`` may be a callable, read when iteration starts: after a checkpoint is restored)."""

    def __init__(self, n_examples: int, batch_size: int, steps: int, *, seed: int, shuffle: bool,
                 rank: int = 0, world_size: int = 1, start_step: int = 0):
        if n_examples < 1:
            raise ValueError("the dataset has no examples")
        self.n, self.batch_size, self.steps = n_examples, batch_size, steps
        self.seed, self.shuffle = seed, shuffle
        self.rank, self.world_size, self.start_step = rank, world_size, start_step
        self._orders: dict[int, np.ndarray] = {}

    def _order(self, epoch: int) -> np.ndarray:
        if epoch not in self._orders:
            self._orders = {epoch: (np.random.default_rng([self.seed, epoch, 0x5EED]).permutation(self.n)
                                    if self.shuffle else np.arange(self.n))}
        return self._orders[epoch]

    def key(self, position: int) -> tuple[int, int]:
        epoch, i = divmod(position, self.n)
        return epoch, int(self._order(epoch)[i])

    def __len__(self) -> int:
        # The whole run's length, also when resuming: Lightning counts the restored batches of
        # the epoch plus this iterator's against it, and would otherwise start a new epoch early.
        return self.steps * self.batch_size

    def __iter__(self) -> Iterator[tuple[int, int]]:
        global_batch = self.batch_size * self.world_size
        start = self.start_step() if callable(self.start_step) else self.start_step
        for step in range(start, self.steps):
            first = step * global_batch + self.rank * self.batch_size
            for q in range(first, first + self.batch_size):
                yield self.key(q)


def _generator(seed: int) -> torch.Generator:
    # A DataLoader without its own generator draws its base seed from the global torch RNG on
    # every new iterator, which would make dropout masks depend on how often validation ran.
    g = torch.Generator()
    g.manual_seed(seed)
    return g


class ObjectiveDataModule(pl.LightningDataModule):
    """Train and validation loaders over objectives, resumable at the micro-step the module has reached.

    ``micro_steps_done`` is a callable returning how many micro-batches the LightningModule has
    consumed (restored from the checkpoint before the loaders are built).
    """

    def __init__(self, train: Objective, validation: Objective | None, *, batch_size: int, micro_steps: int,
                 seed: int, pad_id: int, ordered: bool, num_workers: int = 0, eval_batches: int | None = None,
                 micro_steps_done=lambda: 0):
        super().__init__()
        self.train_data = StreamDataset(train, seed)
        self.val_data = StreamDataset(validation, seed) if validation is not None and len(validation) else None
        self.batch_size, self.micro_steps, self.seed = batch_size, micro_steps, seed
        self.pad_id, self.ordered, self.num_workers = pad_id, ordered, num_workers
        self.eval_batches = eval_batches
        self.micro_steps_done = micro_steps_done

    def collate(self, examples):
        batch = pad_batch(examples, self.pad_id)
        # A mask the objective did not set and that masks nothing is dropped: without one the
        # models take their unmasked attention path (causal flash attention on a GPU), which
        # they cannot choose for a mask they would have to read first under torch.compile.
        for ids_key, mask_key in (("input_ids", "attention_mask"), ("decoder_input_ids", "decoder_attention_mask")):
            if mask_key in batch and mask_key not in examples[0] and ids_key in examples[0] \
                    and len({len(e[ids_key]) for e in examples}) == 1:
                del batch[mask_key]
        return batch

    def _pin(self) -> bool:
        """Batches in page-locked memory when training on a CUDA device: their copy to the GPU is
        then queued without the host waiting for it (a copy from ordinary memory waits)."""
        trainer = getattr(self, "trainer", None)
        return trainer is not None and trainer.strategy.root_device.type == "cuda"

    def _world(self) -> tuple[int, int]:
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return 0, 1
        return trainer.global_rank, trainer.world_size

    def train_dataloader(self) -> DataLoader:
        rank, world = self._world()
        sampler = StreamSampler(len(self.train_data), self.batch_size, self.micro_steps, seed=self.seed,
                                shuffle=not self.ordered, rank=rank, world_size=world, start_step=self.micro_steps_done)
        return DataLoader(self.train_data, batch_size=self.batch_size, sampler=sampler, collate_fn=self.collate,
                          num_workers=self.num_workers, generator=_generator(self.seed),
                          persistent_workers=self.num_workers > 0, pin_memory=self._pin())

    def val_dataloader(self) -> DataLoader | list:
        if self.val_data is None:
            return []
        return self.validation_loader(self.eval_batches)

    def validation_loader(self, max_batches: int | None = None, epoch: int = 0) -> DataLoader:
        """Validation examples in their natural order (epoch 0's masks): the same every time.
        In DDP each rank evaluates every ``world``-th batch (ordered objectives: its rows)."""
        rank, world = self._world()
        n = len(self.val_data)
        global_batch = self.batch_size * world
        steps = n // global_batch if self.ordered else -(-n // global_batch)
        if max_batches is not None:
            steps = min(steps, max_batches)
        keys = []
        for step in range(steps):
            first = step * global_batch + rank * self.batch_size
            keys += [(epoch, q) for q in range(first, min(first + self.batch_size, n))]
        return DataLoader(_Keyed(self.val_data, keys), batch_size=self.batch_size, shuffle=False, collate_fn=self.collate,
                          num_workers=0, generator=_generator(self.seed))


class _Keyed:
    def __init__(self, data: StreamDataset, keys: list[tuple[int, int]]):
        self.data, self.keys = data, keys

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: int):
        return self.data[self.keys[i]]
