"""The on-disk cache of fitted models: a second process loads what the first fitted, and an
entry that is corrupted, stale or unreadable is refitted, never used."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from stablehlo_perf.analysis import elementwise as ew
from stablehlo_perf.analysis import model_cache as mc

TPU_CSV = Path(ew.__file__).resolve().parent / "data" / "tpu_v4_elementwise.csv"


@pytest.fixture(autouse=True)
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(mc.ENV, raising=False)
    return tmp_path / "cache"


class _Fits:
    """A fit that counts its calls and returns a fresh list each time."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> list[int]:
        self.calls += 1
        return [self.calls, 7]


def _data(tmp_path: Path, text: str = "a,b\n1,2\n") -> Path:
    p = tmp_path / "data.csv"
    p.write_text(text)
    return p


def test_a_second_fit_of_the_same_data_is_loaded_not_refitted(tmp_path: Path) -> None:
    data, fit = _data(tmp_path), _Fits()
    assert mc.fitted("k", data, fit) == [1, 7]
    assert mc.fitted("k", data, fit) == [1, 7]
    assert fit.calls == 1


def test_other_data_other_arguments_or_another_kind_are_fitted_anew(tmp_path: Path) -> None:
    data, fit = _data(tmp_path), _Fits()
    mc.fitted("k", data, fit, (False,))
    mc.fitted("k", data, fit, (True,))
    mc.fitted("other", data, fit, (False,))
    data.write_text("a,b\n1,3\n")
    assert mc.fitted("k", data, fit, (False,)) == [4, 7]
    assert fit.calls == 4


@pytest.mark.parametrize(
    "damage",
    [
        lambda blob: blob[:-1] + bytes([blob[-1] ^ 1]),  # a flipped bit in the payload
        lambda blob: blob[: len(blob) // 2],  # truncated
        lambda blob: b"",  # empty
        lambda blob: b"not a cache entry\n" + blob,  # someone else's file
    ],
)
def test_a_damaged_entry_is_refitted_and_rewritten(tmp_path: Path, damage) -> None:
    data, fit = _data(tmp_path), _Fits()
    mc.fitted("k", data, fit)
    entry = mc.entry_path("k", mc.cache_key("k", data))
    entry.write_bytes(damage(entry.read_bytes()))
    assert mc.fitted("k", data, fit) == [2, 7]
    assert mc.fitted("k", data, fit) == [2, 7]
    assert fit.calls == 2


def test_an_intact_entry_that_does_not_unpickle_is_refitted(tmp_path: Path) -> None:
    data, fit = _data(tmp_path), _Fits()
    entry = mc.entry_path("k", mc.cache_key("k", data))
    entry.parent.mkdir(parents=True)
    payload = b"\x80\x05garbage"
    entry.write_bytes(mc._MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
    assert mc.fitted("k", data, fit) == [1, 7]
    assert fit.calls == 1


def test_data_it_cannot_read_is_left_to_the_fit_to_report(tmp_path: Path) -> None:
    with pytest.raises(ew.CalibrationError, match="cannot read"):
        ew._models_for.__wrapped__(str(tmp_path / "nope.csv"), 0, False)


def test_turned_off_it_fits_every_time_and_writes_nothing(
    tmp_path: Path, cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(mc.ENV, "off")
    data, fit = _data(tmp_path), _Fits()
    mc.fitted("k", data, fit)
    mc.fitted("k", data, fit)
    assert fit.calls == 2
    assert not cache_home.exists()


def test_a_cache_folder_that_cannot_be_written_costs_only_the_refit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    data, fit = _data(tmp_path), _Fits()
    assert mc.fitted("k", data, fit) == [1, 7]
    assert mc.fitted("k", data, fit) == [2, 7]


def test_only_the_newest_entries_of_a_kind_are_kept(tmp_path: Path) -> None:
    data, fit = _data(tmp_path), _Fits()
    for i in range(mc._KEEP + 3):
        mc.fitted("k", data, fit, (i,))
    mc.fitted("other", data, fit)
    folder = mc.entry_path("k", "0").parent
    assert len(list(folder.glob("k-*.pkl"))) == mc._KEEP
    assert len(list(folder.glob("other-*.pkl"))) == 1
    assert not list(folder.glob("*.tmp"))


def test_class_models_loaded_from_the_cache_predict_what_a_fresh_fit_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fresh = ew.fit_class_models(ew.load_measurements(TPU_CSV), lane_padded=True)
    ew._models_for.__wrapped__(str(TPU_CSV), 0, True)
    entry = mc.entry_path("class_models", mc.cache_key("class_models", TPU_CSV, (True,)))
    assert entry.is_file()

    def no_fit(*args: object, **kwargs: object) -> None:
        raise AssertionError("refitted")

    monkeypatch.setattr(ew, "fit_class_models", no_fit)
    loaded = ew._models_for.__wrapped__(str(TPU_CSV), 0, True)
    X = ew.measurement_features(ew.load_measurements(TPU_CSV))
    for cls, model in fresh.items():
        np.testing.assert_array_equal(loaded[cls].predict(X), model.predict(X))
