"""pydantic's plugin lookup without ``importlib.metadata`` where no plugin is installed.

The first validator pydantic builds asks ``pydantic.plugin._loader.get_plugins()``, whose
module imports ``importlib.metadata`` (with email, zipfile, csv, socket and
importlib.resources) and reads the entry points of every installed distribution: ~0.015 s
of every command that validates a spec, and nothing comes of it on an install without
pydantic plugins (issue 32, docs/performance.md). The CLI (never the library) looks for a
``pydantic`` entry point itself first, in the files ``importlib.metadata`` would read:
where no ``entry_points.txt`` on ``sys.path`` so much as mentions pydantic, it stands in
for the loader with the answer pydantic would have given (no plugins); anything it cannot
read the same way (a zip on ``sys.path``, another finder of distributions) leaves pydantic
to look, as before.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any

#: The module pydantic imports ``get_plugins`` from (pydantic/plugin/_schema_validator.py).
LOADER = "pydantic.plugin._loader"


def skip_plugin_scan() -> bool:
    """Stand in for pydantic's plugin loader where no plugin is installed; True if it did."""
    if LOADER in sys.modules or not no_plugins_installed(sys.path):
        return False
    stub = types.ModuleType(LOADER, "gpufabric's stand-in: no pydantic plugin is installed (cli/pydantic_plugins.py).")
    # get_plugins: the one name pydantic imports from it; anything else: the real module (PEP 562).
    vars(stub).update(get_plugins=_no_plugins, __getattr__=_real)
    sys.modules[LOADER] = stub
    return True


def _no_plugins() -> tuple[()]:
    return ()


def _real(name: str) -> Any:
    """An attribute other than ``get_plugins``: from pydantic's own module, imported now.
    The import system's own questions (``__path__``: is it a package?) get the answers of
    a plain module."""
    if name.startswith("__"):
        raise AttributeError(name)
    import importlib

    del sys.modules[LOADER]
    return getattr(importlib.import_module(LOADER), name)


def no_plugins_installed(path: list[str]) -> bool:
    """True when no distribution on ``path`` can declare a ``pydantic`` entry point: none of
    the ``entry_points.txt`` files that importlib.metadata's path finder reads (in
    ``*.dist-info``, ``*.egg-info`` and an egg's ``EGG-INFO``) contains the word, and no
    other finder on ``sys.meta_path`` offers distributions. False where unsure."""
    from importlib.machinery import PathFinder

    if any(f is not PathFinder and hasattr(f, "find_distributions") for f in sys.meta_path):
        return False
    for entry in path:
        directory = entry or "."
        try:
            with os.scandir(directory) as children:
                infos = [c.path for c in children if c.name.lower().endswith((".dist-info", ".egg-info", "egg-info"))]
        except NotADirectoryError:  # a zip: importlib.metadata looks inside it
            return False
        except OSError:  # missing or unreadable: importlib.metadata finds nothing there either
            continue
        for info in infos:
            try:
                with open(os.path.join(info, "entry_points.txt"), "rb") as handle:
                    if b"pydantic" in handle.read():
                        return False
            except FileNotFoundError:
                continue
            except OSError:  # an egg-info file, or unreadable: pydantic looks itself
                if os.path.isdir(info):
                    return False
    return True
