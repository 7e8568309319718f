"""SIGTERM is handled like Ctrl-C in every command (issue 24): a real SIGTERM delivered while
the command works (``signal.raise_signal`` at a chosen point) exits 143 and leaves no
half-state: an ingest run is not left `running`, a bundle's staging tree is not left
beside --out."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from gpufabric.results.store import Store
from tests.conftest import EXAMPLES

DATA = Path(__file__).resolve().parents[1] / "data"


def _sigterm_once(real):
    fired = []

    def wrapper(*args, **kwargs):
        if not fired:
            fired.append(True)
            signal.raise_signal(signal.SIGTERM)  # the handler runs here, in the main thread
        return real(*args, **kwargs)

    return wrapper


def test_sigterm_during_ingest_marks_the_run_interrupted(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(Store, "add_results", _sigterm_once(Store.add_results))
    db = tmp_path / "r.db"
    code, _, err = cli("ingest", "--tool", "fio", next((DATA / "fio").glob("*.json")), "--db", db)
    assert code == 143 and "terminated" in err
    with Store.open(db) as store:
        run = store.get_run("latest")
    assert run.status == "interrupted"  # not `running`
    assert [v.reason for v in run.verdicts if v.metric == "run"] == [
        "interrupted by SIGTERM; 0 finished result(s) kept"
    ]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # main() put the handler back


def test_sigterm_during_config_leaves_no_staging_tree(cli, tmp_path, monkeypatch):
    from gpufabric.configure import bundle

    monkeypatch.setattr(bundle, "make_parents", _sigterm_once(bundle.make_parents))
    out = tmp_path / "bundle"
    code, _, err = cli("config", EXAMPLES / "llama3-70b-1k.yaml", "--out", out)
    assert code == 143, err
    assert list(tmp_path.iterdir()) == []  # neither --out nor its staging sibling


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_outside_any_run_exits_as_a_shell_reports_it(cli, monkeypatch, signum):
    import gpufabric.plan
    from gpufabric.plan import make_plan

    monkeypatch.setattr(gpufabric.plan, "make_plan", lambda *a, **k: signal.raise_signal(signum) or make_plan(*a, **k))
    code, _, err = cli("plan", EXAMPLES / "llama3-70b-1k.yaml")
    assert code == 128 + signum, err
