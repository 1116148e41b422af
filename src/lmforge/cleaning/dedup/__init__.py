"""The clean stage's cross-document passes, one module each: URL dedup (``urls.py``), line or
sentence-span dedup (``lines.py``) and MinHash near-duplicate dedup (``minhash.py``). Each is a
map over shards and a reduce over on-disk partitions, run by ``cleaning/stage.py``."""
