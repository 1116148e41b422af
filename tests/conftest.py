import os

# pytest-xdist's workers share the machine's cores: each gets its share of intra-op threads (and
# so do the processes it starts), where torch's default of one thread per core would run
# workers x cores busy threads on the cores and slow every one of them.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    _share = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ.setdefault("OMP_NUM_THREADS", str(_share))
    os.environ.setdefault("MKL_NUM_THREADS", str(_share))

# Tests never reach the network: Hugging Face libraries must work from local files only.
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def load_benchmark(name: str):
    """The module of ``benchmarks/<name>.py`` (the benchmarks are scripts, not a package)."""
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module



def pytest_collection_modifyitems(config, items):
    """The tests marked ``slow`` (the end-to-end runs, up to minutes each) first, each group in
    its collected order: pytest-xdist hands tests out in this order, so the workers start on the
    long ones together and the short ones fill in at the end, instead of one worker finishing a
    long test alone while the other has nothing left."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
