"""Contextual augmentation: masked words replaced by the masked LM's word-start tokens, labels
and the other words kept, deterministic for a seed; and the fine-tuning option."""

import pytest

from lmforge.finetuning.tasks import Example
from lmforge.inference.augment import augment
from lmforge.inference.loading import InferenceError, load
from lmforge.config.recipes import FinetuneRecipe

EXAMPLES = [Example("Return the value of the parser when it is done.", None, "function", "a"),
            Example("A class that holds the settings of one run of the tool.", None, "class", "b")]


@pytest.mark.parametrize("arch", ["bert", "albert", "ernie"])
def test_replacements_keep_labels_and_the_other_words(models, arch):
    loaded = load(models[arch])
    made = augment(EXAMPLES, loaded, copies=2, rate=0.3, seed=1)
    assert len(made) == 4
    assert [m.label for m in made] == ["function", "class", "function", "class"]
    assert made == augment(EXAMPLES, loaded, copies=2, rate=0.3, seed=1)  # deterministic
    special = {loaded.tokenizer.tokenizer.id_to_token(i) for i in loaded.vocab.special_ids}
    for m, original in zip(made, EXAMPLES * 2):
        old, new = original.text.split(), m.text.split()
        assert len(old) == len(new)
        changed = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
        assert 1 <= len(changed) <= round(0.3 * len(old))
        assert not any(new[i] in special or new[i].startswith("##") for i in changed)
    assert made[0].text != made[2].text  # the copies differ


def test_rates_and_models_are_checked(models):
    with pytest.raises(InferenceError, match="masked LM"):
        augment(EXAMPLES, load(models["gpt"]))
    with pytest.raises(InferenceError, match="rate"):
        augment(EXAMPLES, load(models["bert"]), rate=0.0)
    recipe = FinetuneRecipe(mode="classification", augment={"copies": 2})
    assert recipe.augment.rate == 0.15 and recipe.augment.model == "bert"
    with pytest.raises(ValueError):
        FinetuneRecipe(mode="classification", augment={"model": "gpt"})
