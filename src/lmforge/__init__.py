"""lmforge: an orchestrated pretraining pipeline for the transformer LM family."""
__version__ = "0.1.0"
