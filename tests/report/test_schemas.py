"""JUnit against the Jenkins xUnit and Maven Surefire schemas, SARIF against the OASIS SARIF 2.1.0
schema (issue 23, Deliver 7). The schema files are in tests/data/schemas (provenance:
tests/data/README.md); nothing is fetched."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET

import jsonschema
import pytest
import xmlschema

from gpufabric.audit import checks_bundle  # noqa: F401  (registers the checks the findings name)
from gpufabric.audit.findings import REGISTRY, finding
from gpufabric.audit.runner import AuditReport
from gpufabric.audit.sarif import to_sarif
from gpufabric.report import render
from gpufabric.results.records import Direction, Metric, Outcome, RunRecord, Status, TestResult, Verdict
from tests.conftest import DATA

SCHEMAS = DATA / "schemas"


@pytest.fixture(scope="module")
def jenkins():
    return xmlschema.XMLSchema(str(SCHEMAS / "jenkins-xunit-junit-10.xsd"))


@pytest.fixture(scope="module")
def surefire():
    return xmlschema.XMLSchema(str(SCHEMAS / "surefire-test-report.xsd"))


def _verdict(outcome: Outcome, metric: str, host: str = "node1") -> Verdict:
    return Verdict(
        test="fio.ckpt_$RANK_$SIZE",
        metric=metric,
        host=host,
        outcome=outcome,
        measured=1.0,
        expected=2.0,
        direction=Direction.higher,
        margin=-0.5,
        reason=f"{outcome.value} \x1b[31mred\x1b[0m",
        warnings=("cv high",) if outcome == Outcome.noisy else (),
    )


def _result(status: Status, name: str, seconds: float = 0.0) -> TestResult:
    return TestResult(
        name=name,
        tool="fio",
        host="node1",
        status=status,
        duration_s=seconds,
        reason="" if status in (Status.ok, Status.partial) else f"{status.value}: \x07 bell",
        raw_output="out\x00put",
        metrics=(Metric(name="write_bw_gbps", value=1.0, unit="GB/s"),),
    )


def _run() -> RunRecord:
    return RunRecord(
        id=7,
        kind="bench",
        status="failed",
        started_at=1.7e9,
        finished_at=1.7e9 + 75.5,
        argv=("gpufabric", "bench", "--suite", "x"),
        fingerprint={},
        meta={"cluster": "lab-a", "hosts": ["node1", "node2"], "job_id": "slurm:4242"},
        results=(
            _result(Status.ok, "fio.ckpt_$RANK_$SIZE", 12.5),
            _result(Status.ok, "fio.ckpt_$RANK_$SIZE", 10.0),
            _result(Status.failed, "iperf3.data", 3.0),
            _result(Status.timeout, "sockperf.data"),
            _result(Status.skipped, "perftest.ib"),
            _result(Status.partial, "nccl.all_reduce", 1.0),
        ),
        verdicts=(
            _verdict(Outcome.passed, "a"),
            _verdict(Outcome.noisy, "b"),
            _verdict(Outcome.failed, "write_bw_gbps"),
            _verdict(Outcome.skipped, "c"),
            _verdict(Outcome.not_planned, "d"),
        ),
    )


def test_junit_is_valid_against_jenkins_and_surefire(jenkins, surefire):
    xml = render(_run(), "junit")
    jenkins.validate(xml)
    root = ET.fromstring(xml)
    assert root.tag == "testsuites" and "skipped" not in root.attrib
    suite = root.find("testsuite")
    surefire.validate(ET.tostring(suite, encoding="unicode"))
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "9",
        "2",
        "2",
        "3",
    )
    assert root.get("failures") == "2" and root.get("errors") == "2"
    assert suite.get("time") == "75.500"  # the run's wall time
    cases = suite.findall("testcase")
    assert cases[0].find("failure") is not None and cases[1].find("failure") is not None  # failures first
    times = {c.get("name"): c.get("time") for c in cases if c.get("classname") == "fio.ckpt_$RANK_$SIZE"}
    assert times["write_bw_gbps@node1"] == "22.500"  # two repeats summed
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["cluster"] == "lab-a" and props["hosts"] == "node1, node2" and props["job_id"] == "slurm:4242"
    assert "\x1b" not in xml and "\x07" not in xml and "\x00" not in xml


def test_the_schemas_reject_what_the_old_renderer_wrote(jenkins, surefire):
    xml = render(_run(), "junit").replace('<testsuites name="gpufabric"', '<testsuites name="gpufabric" skipped="3"')
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        jenkins.validate(xml)
    suite = ET.fromstring(xml).find("testsuite")
    del suite.attrib["skipped"]
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        surefire.validate(ET.tostring(suite, encoding="unicode"))


@pytest.fixture(scope="module")
def sarif_schema():
    return json.loads((SCHEMAS / "sarif-schema-2.1.0.json").read_text())


def _report() -> AuditReport:
    ids = sorted(REGISTRY)
    report = AuditReport(source="live:node1")
    report.findings.append(finding(ids[0], "node1", "port 9200/tcp open to every source"))  # a live finding: no file
    report.findings.append(finding(ids[1], "compute", "weak key", location="roles/compute/etc/nvme/tls-keys"))
    return report


def test_sarif_is_valid_and_every_result_has_a_location(sarif_schema):
    doc = to_sarif(_report())
    jsonschema.Draft4Validator(sarif_schema).validate(doc)
    (run,) = doc["runs"]
    assert len(run["results"]) == 2
    for result in run["results"]:
        (loc,) = result["locations"]
        assert loc.get("physicalLocation") or loc.get("logicalLocations")
        assert result["partialFingerprints"]
    live, bundle = run["results"]
    assert live["locations"][0]["logicalLocations"][0]["name"] == "node1"
    assert bundle["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("tls-keys")
    for rule in run["tool"]["driver"]["rules"]:
        assert rule["help"]["text"] and "security" in rule["properties"]["tags"]
        score = float(rule["properties"]["security-severity"])
        assert 0.0 <= score <= 10.0
        spec = REGISTRY[rule["id"]]
        band = {"critical": (9.0, 10.0), "high": (7.0, 8.9), "medium": (4.0, 6.9), "low": (0.1, 3.9), "info": (0, 0)}
        lo, hi = band[spec.severity.value]
        assert lo <= score <= hi


def test_the_sarif_schema_catches_a_broken_document(sarif_schema):
    doc = to_sarif(_report())
    doc["runs"][0]["results"][0]["locations"] = "node1"  # not an array of location objects
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(sarif_schema).validate(doc)


@pytest.mark.parametrize("status", ["failed", "error", "interrupted", "running"])
def test_a_run_that_did_not_pass_never_gives_a_green_junit(jenkins, status):
    # e.g. a bench whose failing checks are not verdicts: the stored status decides
    run = RunRecord(
        id=9,
        kind="bench",
        status=status,
        started_at=1.7e9,
        finished_at=None,
        argv=(),
        fingerprint={},
        results=(_result(Status.ok, "fio.x", 1.0),),
    )
    xml = render(run, "junit")
    jenkins.validate(xml)
    suite = ET.fromstring(xml).find("testsuite")
    assert int(suite.get("failures")) + int(suite.get("errors")) == 1
    passed = dataclasses.replace(run, status="passed", finished_at=1.7e9 + 1)
    suite = ET.fromstring(render(passed, "junit")).find("testsuite")
    assert (suite.get("failures"), suite.get("errors"), suite.get("tests")) == ("0", "0", "1")
