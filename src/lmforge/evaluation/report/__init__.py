"""The leaderboard report over every evaluated architecture: did pretraining learn (validation
loss below its start and a unigram baseline) and does the model transfer (fine-tuned accuracy
above the majority-class and bag-of-words baselines)?

``run_report`` (``stage.py``) is the report stage: it reads the evaluations and ``write_report``
(``write.py``) writes it all; the numbers are in ``leaderboard.py``, its Markdown in
``leaderboard_markdown.py``, the charts in ``charts.py``.
"""

from .leaderboard import COLUMNS, leaderboard, load_evaluations, tasks
from .leaderboard_markdown import format_leaderboard
from .write import read_history, write_report

__all__ = ["COLUMNS", "format_leaderboard", "leaderboard", "load_evaluations", "read_history", "tasks", "write_report"]
