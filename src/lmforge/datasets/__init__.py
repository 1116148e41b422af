"""An objective over the token stores: opened as a dataset (``open.py``), and the dataset stage
that measures it and, in static mode, writes its examples to disk (``stage.py``)."""
