"""Feature converters: padding a list of examples into a batch of tensors.

Objectives return unpadded examples (dicts of NumPy arrays); how they are padded depends on
the key, not on the objective: ids pad with the pad id, labels with -100 (ignored by the
loss), masks with 0, ``perm_mask`` with 1 (a padded position can see nothing and is seen by
nothing that matters). 2-D keys pad along both axes. Keys that are per-example scalars
(``next_sentence_label``) are stacked. ``attention_mask`` (and ``decoder_attention_mask``) are
added when an example does not carry its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..chars import PAD_CHAR
from .base import IGNORE_INDEX

# pad value per key; "pad" means the vocabulary's pad id
PAD_VALUES: dict[str, int | str] = {
    "input_ids": "pad",
    "decoder_input_ids": "pad",
    "labels": IGNORE_INDEX,
    "backward_labels": IGNORE_INDEX,
    "attention_mask": 0,
    "decoder_attention_mask": 0,
    "token_type_ids": 0,
    "perm_mask": 1,
    "target_mapping": 0,
    "char_ids": PAD_CHAR,  # 0 is a real byte in the bilm scheme; padded tokens are all padding characters
    "special_tokens_mask": 1,
}


def pad_batch(examples: Sequence[dict[str, np.ndarray]], pad_id: int, pad_to_multiple_of: int | None = None):
    """Stack examples into a dict of ``torch.Tensor`` (int64), padding ragged keys."""
    import torch

    if not examples:
        raise ValueError("pad_batch: no examples")
    # attention masks that an objective did not set: 1 over each example's real tokens
    for ids_key, mask_key in (("input_ids", "attention_mask"), ("decoder_input_ids", "decoder_attention_mask")):
        if ids_key in examples[0] and mask_key not in examples[0]:
            examples = [{**e, mask_key: np.ones(len(e[ids_key]), dtype=np.int64)} for e in examples]
    keys = examples[0].keys()
    batch = {}
    for key in keys:
        arrays = [np.asarray(e[key]) for e in examples]
        if arrays[0].ndim == 0:  # one value per example: a class id, or a regression target (kept a float)
            stacked = np.stack(arrays)
            batch[key] = torch.as_tensor(stacked).float() if stacked.dtype.kind == "f" else torch.as_tensor(stacked).long()
            continue
        shape = np.max([a.shape for a in arrays], axis=0)
        if pad_to_multiple_of:
            shape = -(-shape // pad_to_multiple_of) * pad_to_multiple_of
        value = PAD_VALUES.get(key, 0)
        fill = pad_id if value == "pad" else value
        out = np.full((len(arrays), *shape), fill, dtype=np.int64)
        for i, a in enumerate(arrays):
            out[(i, *tuple(slice(0, n) for n in a.shape))] = a
        batch[key] = torch.from_numpy(out)
    return batch
