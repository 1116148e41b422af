"""The errors lmforge raises for bad input: one base class, so the command line (and any caller)
can catch every one of them and print its message as one line.

A leaf module: it imports nothing from lmforge, so every layer may import it.
"""

from __future__ import annotations


class LmforgeError(Exception):
    """A problem with the user's input, configuration or files, with a message that names it."""


class ConfigError(LmforgeError, ValueError):
    """A configuration problem: an unknown key or option, a bad value, an incompatible
    combination, an unknown preset. The message names the offending key."""
