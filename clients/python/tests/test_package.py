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


README = ROOT / "README.md"
GUIDE = ROOT.parent.parent / "docs" / "CLIENTS.md"


def python_section(text: str) -> str:
    """The "## Python" section of docs/CLIENTS.md."""
    start = text.index("\n## Python\n")
    return text[start : text.index("\n## ", start + 1)]


def test_the_readmes_name_only_calls_that_exist() -> None:
    import importlib

    text = README.read_text() + python_section(GUIDE.read_text())
    # "Every call of the API is a method: `heartbeat`, `heartbeats`, …"
    listed = text[text.index("Every call of the API is a method") :].split("Durations")[0]
    methods = re.findall(r"`([a-z_]+)`", listed)
    assert len(methods) >= 30
    for name in methods:
        assert callable(getattr(herenow.Client, name, None)), name
    # (Not the template variable {{ herenow.count.users }}.)
    for dotted in set(re.findall(r"(?<!\{\{ )\bherenow((?:\.[A-Za-z_]+)+)", text)):
        parts = dotted.strip(".").split(".")
        obj: object = herenow
        for i, part in enumerate(parts):
            if not hasattr(obj, part):
                obj = importlib.import_module("herenow." + ".".join(parts[: i + 1]))
            else:
                obj = getattr(obj, part)
        assert obj is not None, dotted
    for name in re.findall(r"`(?:tracker|hn)\.([a-z_]+)\(", text):
        owner = herenow.PresenceTracker if name in ("close", "stats", "track", "flush") else herenow.Client
        assert callable(getattr(owner, name, None)), name


def test_the_readmes_template_tags_exist() -> None:
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure(INSTALLED_APPS=["herenow.django"])
        django.setup()
    from herenow.django.templatetags import herenow as tags

    text = README.read_text() + python_section(GUIDE.read_text())
    used = set(re.findall(r"\{% (\w+)", text)) - {"load", "if", "endif", "for", "endfor", "else"}
    assert {"whos_online", "herenow_seen", "herenow_last_seen", "herenow_online"} <= used
    for name in used:
        assert name in tags.register.tags, name
    for name in re.findall(r"\|(herenow_\w+)", text):
        assert name in tags.register.filters, name
