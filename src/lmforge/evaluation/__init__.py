"""Evaluation: intrinsic (loss, perplexity, bits per byte, against a unigram baseline) and the leaderboard."""
