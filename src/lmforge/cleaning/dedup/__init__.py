"""The clean stage's cross-document passes, one module each: URL dedup (``urls.py``), line or
sentence-span dedup (``lines.py``), MinHash near-duplicate dedup (``minhash.py``, its XXH64
hashing vectorised in ``xxh64.py``), and dedup against earlier clean outputs (``prior.py``, with
the exact-content hashes of ``exact.py``). Each is a map over shards and a reduce over on-disk
partitions, run by ``cleaning/stage.py``."""
