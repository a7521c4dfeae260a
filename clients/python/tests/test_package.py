"""The package itself: what it exports, its version, and the two clients
keeping the same methods."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import herenow

ROOT = Path(__file__).resolve().parent.parent


def test_version_matches_pyproject() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1) == herenow.__version__


def test_it_is_typed_and_exports_what_it_says() -> None:
    assert (Path(herenow.__file__).parent / "py.typed").exists()
    for name in herenow.__all__:
        assert getattr(herenow, name) is not None, name


def test_the_async_client_has_every_method_of_the_sync_one() -> None:
    def public(cls: type) -> dict:
        return {
            name: inspect.signature(fn)
            for name, fn in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_") and name not in ("close",)
        }

    sync, aio = public(herenow.Client), public(herenow.AsyncClient)
    assert set(sync) == set(aio) - {"aclose"}
    for name, signature in sync.items():
        assert list(signature.parameters) == list(aio[name].parameters), name
        if name not in ("events", "watch", "iter_online", "iter_spaces"):
            assert inspect.iscoroutinefunction(getattr(herenow.AsyncClient, name)), name
