"""``gpufabric config`` as an application service: a typed request in, a typed outcome out.

:func:`run` picks the design (``--design``, a saved plan, or what the planner recommends),
renders the bundle, writes it (or, for a dry run, writes it to a scratch directory so the
same checks run) and checks every file in its consumer. The outcome owns the versioned
JSON and the exit status; ``cli/config.py`` declares the options and renders the text.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpufabric.errors import InputError
from gpufabric.results import document

if TYPE_CHECKING:
    from gpufabric.catalog import Catalog
    from gpufabric.configure.bundle import Bundle
    from gpufabric.configure.design import Design
    from gpufabric.configure.verify import CheckReport
    from gpufabric.spec.models import Spec

#: The planner, given by the caller (plan/ is beside configure/ in the layers): ``make_plan``.
#: Its Plan is read by attribute (recommended, candidates, binding, rationale, get).
Recommend = Callable[["Spec", "Catalog"], Any]

#: Bundles larger than this are summarised per directory instead of listed file by file.
MAX_LISTED = 80
#: Why the planner left ``recommended`` None, by its ``binding`` (plan/recommend.py).
_NO_RECOMMENDATION = {"memory": "no layout fits in GPU memory", "model_output": "no design has finite model outputs"}


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigRequest:
    """What to configure and where to write it."""

    spec_path: Path
    plan: Path | None = None  # a `gpufabric plan --format json` file: its recommended design
    design_text: str | None = None  # "fabric=ID,storage=ID": this design instead of the planner's
    out: Path | None = None  # the bundle's directory (required unless dry_run)
    seed: str | None = None  # secrets reproducible from this seed (tests only)
    key_file: Path | None = None  # secrets reproducible from this file's bytes
    dry_run: bool = False  # render and check, write nothing
    catalog_files: tuple[Path, ...] = ()  # catalog overrides, later wins


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigOutcome:
    """The written (or, dry run, checked) bundle; or why no design could be configured."""

    request: ConfigRequest
    failure: str = ""  # no design to configure: the reason and the way out (exit 1)
    spec_name: str = ""
    design: Design | None = None
    bundle: Bundle | None = None
    checks: CheckReport | None = None

    @property
    def exit_code(self) -> int:
        return 1 if self.failure else 0

    def payload(self) -> dict[str, Any]:
        """The JSON document's keys (before the envelope)."""
        design, bundle, checks = self.design, self.bundle, self.checks
        assert design is not None and bundle is not None and checks is not None  # not a failure
        out = self.request.out
        return {
            "spec": self.spec_name,
            "dry_run": self.request.dry_run,
            "out": str(out) if out else None,
            "design": {
                "fabric": design.fabric,
                "storage": design.storage,
                "fabric_kind": design.fabric_kind,
                "source": design.source,
            },
            "policy_source": bundle.policy_source,
            "notes": bundle.notes,
            "files": bundle.file_list(),
            "checks": {"passed": checks.checked, "skipped": checks.skipped},
        }

    def to_json(self) -> str:
        """The versioned JSON document (``schema_version`` first)."""
        return document.dumps(self.payload())

    def text_lines(self) -> list[tuple[str, bool]]:
        """The text report as (line, to stderr): the design, the policy, the checks (files not
        checked go to stderr), then the files, listed or summarised per directory."""
        design, bundle, checks = self.design, self.bundle, self.checks
        assert design is not None and bundle is not None and checks is not None  # not a failure
        dry_run, out = self.request.dry_run, self.request.out
        lines: list[tuple[str, bool]] = []

        def echo(line: str, err: bool = False) -> None:
            lines.append((line, err))

        artefacts = bundle.sorted_artefacts()
        verb = "would write" if dry_run else "wrote"
        secret = sum(a.secret for a in artefacts)
        echo(f"design: fabric {design.fabric} ({design.fabric_kind}), storage {design.storage}; from {design.source}")
        echo(f"policy: {bundle.policy_source}")
        for note in bundle.notes:
            echo(f"note: {note}")
        echo(f"checked: {len(checks.checked)} files load in their consumer (bash -n, sh -n, nft -c)")
        for skipped in checks.skipped:
            echo(f"warning: not checked: {skipped}", err=True)
        echo(f"{verb} {len(artefacts)} files{' to ' + str(out) if out else ''} ({secret} secret, mode 0600):")
        if len(artefacts) <= MAX_LISTED:
            for a in artefacts:
                echo(f"  {a.mode:04o} {a.path}{'  (secret)' if a.secret else ''}")
        else:
            groups: dict[str, list[int]] = {}
            for a in artefacts:
                top = "/".join(a.path.split("/")[:2]) if a.path.startswith("roles/") else a.path.split("/")[0]
                counts = groups.setdefault(top, [0, 0])
                counts[0] += 1
                counts[1] += a.secret
            for top, (count, secrets) in sorted(groups.items()):
                echo(f"  {top}: {count} file{'s' if count != 1 else ''}" + (f" ({secrets} secret)" if secrets else ""))
            echo("  (every file with its mode is listed in manifest.json and README.md)")
        if not dry_run:
            echo(f"next: read {out}/README.md for what goes where, then `gpufabric audit --config {out}`")
        return lines


def closest(result: Any) -> Any:
    """The recommended candidate, else the one nearest to fitting (the planner's own ranking otherwise).

    The planner leaves ``recommended`` None when no layout fits in GPU memory or no design has
    finite model outputs; the user still needs the nearest design's id and what it violates.
    """
    if result.recommended is not None:
        return result.get(result.recommended)
    if not result.candidates:
        return None
    if result.binding == "memory":  # same choice as plan.recommend's "Closest:" sentence
        return min(result.candidates, key=lambda c: c.memory_gb - c.memory_capacity_gb)
    return result.candidates[0]


def run(request: ConfigRequest, *, warn: Callable[[str], None], recommend: Recommend) -> ConfigOutcome:
    """Configure the design; ``warn`` gets each warning line as it arises (for stderr);
    ``recommend`` plans the spec when neither --design nor --plan names the design.

    Raises:
        InputError: --out missing or unusable, --plan with --design, an unknown design.
    """
    from gpufabric.catalog import load_catalog
    from gpufabric.configure import KeySource, render_bundle, write_bundle
    from gpufabric.configure.verify import verify_tree
    from gpufabric.spec import load_spec

    if request.out is None and not request.dry_run:
        raise InputError("--out DIR is required (or pass --dry-run)")
    keys = KeySource.from_options(seed=request.seed, key_file=request.key_file)
    if request.seed is not None:
        warn("warning: --seed makes every secret derivable from the seed; use it for tests only")
    if request.plan is not None and request.design_text is not None:
        raise InputError("give --plan or --design, not both")
    catalog = load_catalog(list(request.catalog_files))
    spec = load_spec(request.spec_path, known_ids=catalog.known_ids()).spec
    design = _design(request, spec, catalog, recommend)
    if isinstance(design, str):
        return ConfigOutcome(request=request, failure=design)
    _check_out(request.out)
    bundle = render_bundle(spec, design, keys)
    reports: list[CheckReport] = []

    def verify(root: Path, paths: list[str]) -> None:
        reports.append(verify_tree(root, paths))

    if not request.dry_run and request.out is not None:
        write_bundle(bundle, request.out, verify=verify)
    else:
        with tempfile.TemporaryDirectory(prefix="gpufabric-config-") as scratch:
            write_bundle(bundle, Path(scratch) / "bundle", verify=verify)
    return ConfigOutcome(request=request, spec_name=spec.name, design=design, bundle=bundle, checks=reports[0])


def _design(request: ConfigRequest, spec: Spec, catalog: Catalog, recommend: Recommend) -> Design | str:
    """The design to configure, or why there is none (the failure line, exit 1)."""
    from gpufabric.configure import design_from_plan
    from gpufabric.configure.design import design_from_candidate, design_from_option

    if request.design_text is not None:
        return design_from_option(request.design_text, catalog)
    if request.plan is not None:
        return design_from_plan(request.plan, catalog.known_ids())
    # Without --plan or --design, configure what `gpufabric plan` would recommend.
    result = recommend(spec, catalog)
    best = closest(result)
    if best is None:  # no candidate at all (every design filtered out before evaluation)
        return (
            f"the planner evaluated no design for {request.spec_path}: {result.rationale}; "
            f"pass --design fabric=...,storage=... to configure one anyway"
        )
    design = design_from_candidate(
        fabric=best.fabric, storage=best.storage, candidate_id=best.id, rented=best.capacity == "rent"
    )
    if result.recommended is None or not best.meets_requirements:
        why = "; ".join(best.violations) or result.rationale
        head = (
            "no design meets every requirement"
            if result.recommended is not None
            else f"no design is recommended ({_NO_RECOMMENDATION.get(result.binding or '', result.binding)})"
        )
        return (
            f"{head} for {request.spec_path}: closest {best.id}: {why}; "
            f"pass --design fabric=...,storage=... to configure one anyway "
            f"(the closest is --design fabric={design.fabric},storage={design.storage})"
        )
    return design


def _check_out(out: Path | None) -> None:
    """InputError for an --out that is a link, a file, or a non-empty directory without a bundle."""
    from gpufabric.configure.bundle import MANIFEST

    if out is not None and out.is_symlink():
        raise InputError(f"--out {out} is a symbolic link; give the real directory")
    if out is not None and out.exists():
        if not out.is_dir():
            raise InputError(f"--out {out} is not a directory")
        if any(out.iterdir()) and not (out / MANIFEST).exists():
            raise InputError(f"--out {out} is not empty and holds no gpufabric bundle; choose an empty directory")
