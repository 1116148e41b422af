"""Using trained models: the commands ``lmforge generate``, ``fill-mask``, ``embed``, ``predict``
and ``export``, one module each, over a model folder loaded by ``loading``.

A layer above the models, the tokenizers and the fine-tuning inputs; the command line calls it.
"""
