"""The bits of a token store's ``flags.bin``: one uint8 per token. The tokenizer stage writes
them, the objectives read them. A leaf module: it imports nothing from lmforge."""

WORD_START = 1  # the token starts a word (the tokenizer's own word boundaries)
SENTENCE_START = 2  # the token starts a sentence
