"""Load the shipped catalog, merge user overrides, validate, locate errors.

The shipped catalog is the YAML files in ``gpufabric/catalog/data``. A user file given
with ``--catalog my.yaml`` has the same shape (sections ``gpus``, ``fabrics``,
``switches``, ``optics``, ``storage``, ``site``, ``rentals``, each a mapping of id to entry). An entry
whose id exists overrides only the fields it names; a new id adds an entry (and must
then be complete). Bare numbers in a user file are tagged ``user`` with the file as
source unless the entry gives its own ``source``/``as_of``/``tag``. Errors are
:class:`~gpufabric.errors.SpecError` located at file:line:column like spec errors.
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar, cast

from pydantic import ValidationError

from gpufabric.catalog.schema import SECTIONS, Entry, Fabric, Gpu, Optic, Rental, Site, Storage, Switch
from gpufabric.errors import CatalogError, SpecError
from gpufabric.spec import cache
from gpufabric.spec.loader import Located, did_you_mean, parse_dotted, parse_yaml, read_text
from gpufabric.spec.types import CATALOG_ID, FieldsError, bounded_repr, pattern_help

DATA_FILES = ("gpus.yaml", "fabrics.yaml", "switches.yaml", "optics.yaml", "storage.yaml", "site.yaml", "rentals.yaml")


@dataclass(frozen=True, slots=True)
class Catalog:
    """Validated catalog: one dict per section, keyed by id."""

    gpus: dict[str, Gpu]
    fabrics: dict[str, Fabric]
    switches: dict[str, Switch]
    optics: dict[str, Optic]
    storage: dict[str, Storage]
    site: Site
    files: tuple[str, ...] = field(default=())
    rentals: dict[str, Rental] = field(default_factory=dict)

    def gpu(self, gpu_id: str) -> Gpu:
        return _get(self.gpus, gpu_id, "GPU")

    def fabric(self, fabric_id: str) -> Fabric:
        return _get(self.fabrics, fabric_id, "fabric")

    def storage_backend(self, storage_id: str) -> Storage:
        return _get(self.storage, storage_id, "storage backend")

    def known_ids(self) -> dict[str, set[str]]:
        """Ids per spec field, for ``load_spec(known_ids=...)``."""
        return {
            "cluster.gpu": set(self.gpus),
            "options.fabrics": set(self.fabrics),
            "options.storage": set(self.storage),
            "options.rentals": set(self.rentals),
        }

    def rental(self, rental_id: str) -> Rental:
        return _get(self.rentals, rental_id, "rental offering")


def _get(table: dict[str, Any], key: str, what: str) -> Any:
    try:
        return table[key]
    except KeyError:
        raise CatalogError(f"unknown {what} id {key!r} ({did_you_mean(key, sorted(table))})") from None


def _is_figure(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _normalise(entry: dict[str, Any], source: str, as_of: str, tag: str) -> dict[str, Any]:
    """Bare numbers -> ``{value, source, as_of, tag}`` with the entry's (or given) defaults."""
    src = entry.get("source") or source
    date = str(entry.get("as_of") or as_of)
    tg = entry.get("tag") or tag
    out = {}
    for key, value in entry.items():
        if _is_figure(value):
            out[key] = {"value": value, "source": src, "as_of": date, "tag": tg}
        elif isinstance(value, dict) and "value" in value:
            out[key] = {"source": src, "as_of": date, "tag": tg, **value}
        else:
            out[key] = value
    return out


class _Merged:
    """Raw merged data plus, per (section, id), the file the entry's last change came from."""

    def __init__(self) -> None:
        self.data: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in SECTIONS}
        self.origin: dict[tuple[str, str], Located] = {}
        self.field_origin: dict[tuple[str, str, str], Located] = {}

    def add(self, located: Located, *, user: bool) -> None:
        data = located.data
        if data is None:
            return
        if not isinstance(data, dict):
            raise located.error((), "expected a mapping of catalog sections", f"sections: {', '.join(SECTIONS)}")
        defaults = (located.file, "user", "user") if user else ("", "", "U")
        for section, entries in data.items():
            if section not in SECTIONS:
                fix = did_you_mean(section, list(SECTIONS), "sections")
                raise located.error((section,), f"unknown catalog section {section!r}", fix)
            if not isinstance(entries, dict):
                raise located.error((section,), "expected a mapping of id to entry")
            for entry_id, entry in entries.items():
                if not re.fullmatch(CATALOG_ID, str(entry_id)):
                    raise located.error(
                        (section, entry_id),
                        f"catalog id {bounded_repr(str(entry_id))} is not allowed",
                        f"allowed: {pattern_help(CATALOG_ID)}",
                    )
                if not isinstance(entry, dict):
                    raise located.error((section, entry_id), "expected a mapping of fields")
                norm = _normalise(entry, *defaults)
                target = self.data[section].setdefault(str(entry_id), {})
                if user and target:
                    # Keep the shipped entry-level defaults; they describe the shipped figures.
                    norm = {k: v for k, v in norm.items() if k not in ("source", "as_of", "tag")}
                target.update(norm)
                self.origin[(section, str(entry_id))] = located
                for key in norm:
                    self.field_origin[(section, str(entry_id), key)] = located

    def validate(self) -> dict[str, dict[str, Entry]]:
        out: dict[str, dict[str, Entry]] = {}
        for section, model in SECTIONS.items():
            out[section] = {}
            for entry_id, raw in self.data[section].items():
                try:
                    out[section][entry_id] = model.model_validate(raw)
                except ValidationError as exc:
                    raise self._error(exc, section, entry_id, model) from None
        self._check_references(out)
        return out

    def _error(self, exc: ValidationError, section: str, entry_id: str, model: type[Entry]) -> SpecError:
        err = exc.errors(include_url=False)[0]
        loc = tuple(str(p) for p in err["loc"])
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, FieldsError):
            loc = (*loc, *(str(p) for p in parse_dotted(cause.fields[0])))
        key = loc[0] if loc else ""
        located = self.field_origin.get((section, entry_id, key)) or self.origin[(section, entry_id)]
        path = (section, entry_id, *loc)
        message = err["msg"].removeprefix("Value error, ")
        fix = ""
        if err["type"] == "extra_forbidden":
            import difflib  # on an error only: start-up does not pay for it

            close = difflib.get_close_matches(key, list(model.model_fields), n=1)
            message = f"unknown field {key!r}"
            fix = f"did you mean {close[0]!r}?" if close else ""
        elif err["type"] == "missing":
            message = "required field is missing"
            info = model.model_fields.get(key)
            fix = f"add it: {info.description}" if info and info.description else "add it"
        elif "input" in err and not isinstance(err["input"], dict):
            message = f"{message}, got {bounded_repr(err['input'])}"
        return located.error(path, message, fix)

    def _check_references(self, out: dict[str, dict[str, Entry]]) -> None:
        for fabric_id, fabric in out["fabrics"].items():
            for key, section in (
                ("switch", "switches"),
                ("nic_optic", "optics"),
                ("switch_optic", "optics"),
                ("fiber", "optics"),
            ):
                ref = getattr(fabric, key)
                if ref not in out[section]:
                    located = self.field_origin.get(("fabrics", fabric_id, key)) or self.origin[("fabrics", fabric_id)]
                    fix = did_you_mean(ref, sorted(out[section]))
                    raise located.error(("fabrics", fabric_id, key), f"unknown {section} id {ref!r}", fix)
        for rental_id, entry in out["rentals"].items():
            rental = cast(Rental, entry)
            refs = [("gpu", "gpus", rental.gpu), ("fabric", "fabrics", rental.fabric)]
            refs += [(f"storage[{i}]", "storage", s) for i, s in enumerate(rental.storage)]
            for key, section, ref in refs:
                if ref not in out[section]:
                    located = (
                        self.field_origin.get(("rentals", rental_id, key.split("[")[0]))
                        or self.origin[("rentals", rental_id)]
                    )
                    raise located.error(
                        ("rentals", rental_id, key.split("[")[0]),
                        f"unknown {section} id {ref!r}",
                        did_you_mean(ref, sorted(out[section])),
                    )
        if "default" not in out["site"]:
            raise SpecError(file="catalog", field="site.default", message="the catalog needs a site entry 'default'")


@lru_cache(maxsize=1)
def _shipped() -> tuple[Located, ...]:
    """The shipped files, parsed once per process."""
    from importlib import resources  # ~2 ms with tempfile and shutil: on a cache miss only

    base = resources.files("gpufabric.catalog").joinpath("data")
    return tuple(parse_yaml(base.joinpath(name).read_text(encoding="utf-8"), f"catalog/{name}") for name in DATA_FILES)


def load_catalog(extra: Sequence[str | Path] = ()) -> Catalog:
    """The shipped catalog merged with the user files in ``extra`` (later files win).

    Raises:
        SpecError: a file is unreadable, not YAML, or an entry is invalid (located).
    """
    if not extra:
        return _load_shipped()
    return _build([*(_shipped()), *(_read(p) for p in extra)], n_shipped=len(DATA_FILES))


@lru_cache(maxsize=1)
def _load_shipped() -> Catalog:
    """The shipped catalog: validated once per content, then read from the user's cache.

    Parsing and validating the YAML files was ~0.08 s CPU of every command's start-up
    (docs/performance.md); the pickled result is keyed by everything that shapes it (the
    data files, the modules defining its classes, the versions of gpufabric, pydantic and
    Python), so an edit to any of them validates afresh. An unreadable, foreign or corrupt
    cache, or an unwritable cache directory, falls back to validating, silently.
    """
    key = _cache_key()
    path = cache.cache_path("catalog", key) if key else None
    cached = _cache_read(path) if path else None
    if cached is not None:
        return cached
    catalog = _build(list(_shipped()), n_shipped=len(DATA_FILES))
    if path:
        cache.write(path, catalog)
    return catalog


def _cache_key() -> str | None:
    import pydantic

    from gpufabric import __version__
    from gpufabric.catalog import schema
    from gpufabric.spec import types

    digest = hashlib.sha256(f"{__version__} {pydantic.VERSION} {sys.version_info[:2]}".encode())
    data = Path(__file__).parent / "data"
    try:
        for path in (
            *(data / name for name in DATA_FILES),
            Path(__file__),
            Path(schema.__file__),
            Path(types.__file__),
        ):
            digest.update(path.read_bytes())
    except (OSError, TypeError):  # a zipped or source-less install: validate every time
        return None
    return digest.hexdigest()[:32]


def _cache_read(path: Path) -> Catalog | None:
    catalog = cache.read(path)
    return catalog if isinstance(catalog, Catalog) else None


def _read(path: str | Path) -> Located:
    return parse_yaml(read_text(path, "catalog"), str(path))


def _build(files: list[Located], *, n_shipped: int) -> Catalog:
    merged = _Merged()
    for index, located in enumerate(files):
        merged.add(located, user=index >= n_shipped)
    out = merged.validate()
    return Catalog(
        gpus=_section(out, "gpus", Gpu),
        fabrics=_section(out, "fabrics", Fabric),
        switches=_section(out, "switches", Switch),
        optics=_section(out, "optics", Optic),
        storage=_section(out, "storage", Storage),
        site=_section(out, "site", Site)["default"],
        files=tuple(f.file for f in files),
        rentals=_section(out, "rentals", Rental),
    )


_E = TypeVar("_E", bound=Entry)


def _section(out: dict[str, dict[str, Entry]], name: str, model: type[_E]) -> dict[str, _E]:
    """``out[name]`` typed as its model: validate() built every entry with SECTIONS[name]."""
    entries = out[name]
    typed = {entry_id: entry for entry_id, entry in entries.items() if isinstance(entry, model)}
    if len(typed) != len(entries):
        raise TypeError(f"catalog section {name} holds an entry that is not a {model.__name__}")
    return typed
