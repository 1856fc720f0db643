"""Fitted models kept on disk between runs, so a process loads what an earlier one fitted.

The host's learned models are fitted from their calibration CSVs when a process first
prices an op: 17 class models and the fused-loop model, boosted trees, 3.5 s of the 6.2 s a
`stablehlo-perf-opt --target host` run took on a two-op module (the project's Xeon VM,
2026-12-02; loading them back: 20 ms). A fit is deterministic (fixed seeds), so the model
fitted from the same bytes, with the same arguments, by the same code and libraries is
the same model: those four make the entry's key. An entry carries the sha256 of its
payload; one that is corrupted, truncated or does not unpickle is refitted and rewritten,
never used. `STABLEHLO_PERF_MODEL_CACHE=off` turns the cache off; a cache folder that
cannot be written costs the refit and nothing else.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import sys
import tempfile
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import TypeVar

from stablehlo_perf.analysis.calibration_files import cache_dir

__all__ = ["ENV", "cache_key", "entry_path", "fitted"]

ENV = "STABLEHLO_PERF_MODEL_CACHE"
_MAGIC = b"stablehlo-perf fitted model v1 sha256="
_KEEP = 8  # entries of one kind kept: the current data's and a few earlier versions'
T = TypeVar("T")


@functools.cache
def _code_digest() -> str:
    """sha256 of the analysis layer's source (features, regressors and fits live there) and
    the library versions a pickled estimator depends on."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for v in (sys.version, *map(version, ("numpy", "scipy", "scikit-learn"))):
        h.update(v.encode() + b"\0")
    return h.hexdigest()


def cache_key(kind: str, data: Path, args: tuple[object, ...] = ()) -> str:
    """The key of `kind` fitted from the file `data` with `args` by this code."""
    h = hashlib.sha256()
    for part in (kind.encode(), data.read_bytes(), repr(args).encode(), _code_digest().encode()):
        h.update(part + b"\0")
    return h.hexdigest()


def entry_path(kind: str, key: str) -> Path:
    """Where the entry of `kind` under `key` lives."""
    return cache_dir() / "models" / f"{kind}-{key[:20]}.pkl"


def _load(path: Path) -> tuple[bool, object]:
    """(True, model) from an intact entry; (False, None) when absent, corrupted or unreadable."""
    try:
        blob = path.read_bytes()
    except OSError:
        return False, None
    head, _, payload = blob.partition(b"\n")
    if not head.startswith(_MAGIC):
        return False, None
    if hashlib.sha256(payload).hexdigest().encode() != head[len(_MAGIC) :]:
        return False, None
    try:
        return True, pickle.loads(payload)
    except Exception:  # noqa: BLE001 (an intact file from an incompatible pickle: refit)
        return False, None


def _store(kind: str, path: Path, model: object) -> None:
    """Write the entry atomically (a reader sees the old file or the whole new one) and keep
    the kind's `_KEEP` newest entries; a folder that cannot be written is left alone."""
    payload = pickle.dumps(model, protocol=pickle.HIGHEST_PROTOCOL)
    blob = _MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        same = sorted(path.parent.glob(f"{kind}-*.pkl"), key=lambda p: p.stat().st_mtime_ns)
        for old in same[:-_KEEP]:
            old.unlink(missing_ok=True)


def fitted(kind: str, data: Path, fit: Callable[[], T], args: tuple[object, ...] = ()) -> T:
    """The model `fit()` returns for `kind` fitted from `data` with `args`: loaded from the
    cache when an intact entry has its key, else fitted and stored."""
    if os.environ.get(ENV, "").lower() in ("0", "off", "false", "no"):
        return fit()
    try:
        path = entry_path(kind, cache_key(kind, data, args))
    except OSError:  # unreadable data: the fit reports it in its own words
        return fit()
    ok, model = _load(path)
    if ok:
        return model  # type: ignore[return-value]
    model = fit()
    _store(kind, path, model)
    return model
