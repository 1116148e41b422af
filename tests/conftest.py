import os

# Tests never reach the network: Hugging Face libraries must work from local files only.
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
