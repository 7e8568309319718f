"""JUnit XML for CI systems (Jenkins, GitLab, GitHub test reporters).

One ``<testcase>`` per verdict (classname = test, name = metric@host), plus one per test
result that no verdict covers (a tool that failed, timed out or was skipped shows up even
without an SLO). Mapping: failed verdict -> ``<failure>``; failed/timed-out tool ->
``<error>``; skipped and noisy -> ``<skipped>`` (noisy is "cannot judge", which must not
fail a pipeline but must stay visible).

The document validates against the Jenkins xUnit plugin's JUnit schema (junit-10.xsd, the
Surefire-derived one Jenkins reads) and its ``<testsuite>`` against Apache Maven Surefire's
surefire-test-report.xsd (both shipped in tests/data/schemas): ``<testsuites>`` carries only
name, time, tests, failures and errors (no ``skipped``); where the run ran (cluster, hosts,
job id) goes into ``<properties>``, as neither schema has attributes for it. Failures come
first; each case's ``time`` is the seconds its results took (repeats summed), the suite's the
run's wall time. A run whose stored status is not ``passed`` always carries a failure or an
error (a ``run status`` case when no test case fails), so the report never says green where
the run and the exit code say otherwise.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from gpufabric.report import common
from gpufabric.results.records import Outcome, RunRecord, RunStatus, Status

#: Characters XML 1.0 forbids even escaped; tool output carries them (sockperf's ANSI colour codes).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(root: ET.Element) -> None:
    for el in root.iter():
        if el.text:
            el.text = _NOT_XML.sub("", el.text)
        for key, value in el.attrib.items():
            el.attrib[key] = _NOT_XML.sub("", value)


def render_junit(run: RunRecord) -> str:
    suite = ET.Element("testsuite", name=f"gpufabric.run{run.id}", timestamp=common.iso(run.started_at))
    props = ET.SubElement(suite, "properties")
    for key, value in (
        ("kind", run.kind),
        ("status", run.status),
        ("argv", " ".join(run.argv)),
        ("gpufabric_version", run.gpufabric_version),
        ("spec", run.spec_name),
        *((label.replace(" ", "_"), text) for label, text in common.run_context(run)),
    ):
        ET.SubElement(props, "property", name=key, value=value)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    durations = common.durations_by_test(run)
    for v in common.verdicts_failures_first(run):
        case = ET.SubElement(
            suite,
            "testcase",
            classname=v.test,
            name=f"{v.metric}@{v.host}" if v.host else v.metric,
            time=f"{durations.get((v.test, v.host), 0.0):.3f}",
        )
        counts["tests"] += 1
        detail = v.reason + "".join(f"\nwarning: {w}" for w in v.warnings)
        if v.outcome in (Outcome.failed, Outcome.not_planned):
            ET.SubElement(
                case,
                "failure",
                message=v.reason[:500] or "SLO not met",
                type="slo" if v.outcome == Outcome.failed else "not_planned_hardware",
            ).text = detail
            counts["failures"] += 1
        elif v.outcome in (Outcome.skipped, Outcome.noisy):
            ET.SubElement(case, "skipped", message=f"{v.outcome.value}: {v.reason}"[:500])
            counts["skipped"] += 1
        elif detail:
            ET.SubElement(case, "system-out").text = detail
    judged = {(v.test, v.host) for v in run.verdicts}
    for r in common.results_failures_first(run):
        if common.is_judged(r, judged):
            continue
        case = ET.SubElement(
            suite,
            "testcase",
            classname=r.name,
            name=f"{r.host or r.tool} {common.param_tag(r)}".strip(),
            time=f"{max(r.duration_s, 0.0):.3f}",
        )
        counts["tests"] += 1
        if r.status in (Status.failed, Status.timeout):
            ET.SubElement(case, "error", message=f"{r.status.value}: {r.reason}"[:500], type=r.status.value).text = (
                r.raw_output[-4000:] or None
            )
            counts["errors"] += 1
        elif r.status == Status.skipped:
            ET.SubElement(case, "skipped", message=r.reason or "skipped")
            counts["skipped"] += 1
        elif r.status == Status.partial:
            ET.SubElement(case, "system-out").text = f"partial: {r.reason or r.params.get('quality_warnings', '')}"
    status = str(run.status)  # a RunStatus from the store, a plain string from older exports
    if status != RunStatus.passed.value and not (counts["failures"] or counts["errors"]):
        # The stored status is the verdict CI must see: a run that failed, broke, was interrupted
        # or never finished fails the report even when no single test case says so.
        case = ET.SubElement(suite, "testcase", classname=f"gpufabric.run{run.id}", name="run status", time="0.000")
        counts["tests"] += 1
        if status == RunStatus.failed.value:
            ET.SubElement(case, "failure", message=f"run {status}", type="run_status")
            counts["failures"] += 1
        else:
            ET.SubElement(case, "error", message=f"run {status}", type="run_status")
            counts["errors"] += 1
    for key, count in counts.items():
        suite.set(key, str(count))
    wall = common.run_seconds(run)
    total = wall if wall is not None else sum(max(r.duration_s, 0.0) for r in run.results)
    suite.set("time", f"{total:.3f}")
    root = ET.Element(
        "testsuites",
        {
            "name": "gpufabric",
            "time": f"{total:.3f}",
            **{k: str(v) for k, v in counts.items() if k != "skipped"},  # the schemas have no skipped here
        },
    )
    root.append(suite)
    _clean(root)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
