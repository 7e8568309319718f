"""The bundle manifest (``manifest.json``): the one module that writes and reads it.

``config`` writes it last into every bundle; ``audit --config BUNDLE`` reads it to find the
hosts and their roles. It lists every artefact with its mode and secret flag.

Versions (``schema_version``):
    0  a manifest without the key (hand-assembled bundles): the same keys as v1.
    1  ``schema_version``, ``gpufabric_version``, ``kind``, ``spec``, ``design``, ``hosts``, ``files``.
A newer version is refused with a one-line error (exit 2) rather than misread.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufabric import __version__
from gpufabric.boundary import loads_json, read_capped
from gpufabric.configure.paths import check_relative
from gpufabric.errors import InputError
from gpufabric.jsonable import schema_version

MANIFEST = "manifest.json"
#: The version ``Manifest.to_dict`` writes.
MANIFEST_SCHEMA_VERSION = 1
#: The audit reads manifest.json from a directory the user names: bounded like every input
#: (generous: the manifest holds about 100 bytes per generated file).
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
KIND = "gpufabric-config-bundle"
#: An artefact's mode as written: four octal digits.
_MODE = re.compile(r"0[0-7]{3}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestFile:
    path: str  # relative to the bundle root
    mode: int  # permission bits, written as 4 octal digits ("0600")
    secret: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestHost:
    host: str
    role: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    spec: str
    design: dict[str, Any]
    hosts: tuple[ManifestHost, ...]
    files: tuple[ManifestFile, ...]
    gpufabric_version: str = field(default=__version__)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": MANIFEST_SCHEMA_VERSION,
            "gpufabric_version": self.gpufabric_version,
            "kind": KIND,
            "spec": self.spec,
            "design": self.design,
            "hosts": [{"host": h.host, "role": h.role} for h in self.hosts],
            "files": [{"path": f.path, "mode": f"{f.mode:04o}", "secret": f.secret} for f in self.files],
        }

    @classmethod
    def from_dict(cls, data: Any, *, source: str = MANIFEST) -> Manifest:
        """A manifest of any version up to MANIFEST_SCHEMA_VERSION; InputError naming ``source`` otherwise."""
        if not isinstance(data, dict):
            raise InputError(f"{source}: not a gpufabric bundle manifest (not a JSON object)")
        schema_version(data, current=MANIFEST_SCHEMA_VERSION, what="bundle manifest", source=source)
        if data.get("kind", KIND) != KIND:
            raise InputError(f"{source}: kind {data.get('kind')!r} is not {KIND!r}")
        try:
            # Host and role names become directories the audit reads (hosts/NAME, roles/NAME):
            # each must be one plain path component, like every bundle path.
            hosts = tuple(
                ManifestHost(host=check_relative(_component(h["host"])), role=check_relative(_component(h["role"])))
                for h in data.get("hosts", ())
            )
            files = tuple(
                ManifestFile(path=check_relative(_text(f["path"])), mode=_mode(f["mode"]), secret=f["secret"] is True)
                for f in data.get("files", ())
            )
            design = data.get("design") or {}
            if not isinstance(design, dict):
                raise TypeError("design is not an object")
            return cls(
                spec=_text(data.get("spec", "")),
                design=design,
                hosts=hosts,
                files=files,
                gpufabric_version=_text(data.get("gpufabric_version", "")),
            )
        except InputError as exc:
            raise InputError(f"{source}: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{source}: not a gpufabric bundle manifest ({type(exc).__name__}: {exc})") from None


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not a string")
    return value


def _component(value: Any) -> str:
    text = _text(value)
    if "/" in text:
        raise ValueError(f"{text[:120]!r} is not a single name")
    return text


def _mode(value: Any) -> int:
    if not isinstance(value, str) or not _MODE.fullmatch(value):
        raise ValueError(f"mode {value!r} is not four octal digits")
    return int(value, 8)


def read_manifest(root: Path) -> Manifest:
    """The manifest of the bundle at ``root``."""
    path = root / MANIFEST
    try:
        data = loads_json(
            read_capped(path, MAX_MANIFEST_BYTES, "bundle manifest").decode("utf-8", errors="replace"),
            source=str(path),
            what="bundle manifest",
        )
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    return Manifest.from_dict(data, source=str(path))
