"""``python -m lmforge.cli``: the ``lmforge`` command (torchrun launches it so, once per device)."""

from . import main

if __name__ == "__main__":
    main()
