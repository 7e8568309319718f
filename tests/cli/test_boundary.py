"""The CLI's one boundary for OS errors, huge numbers and Ctrl-C (issue 9 item 6)."""

from __future__ import annotations

import gc
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpufabric.errors import EnvironmentFailure
from gpufabric.results.records import Status, TestResult
from gpufabric.results.store import Store, StoreFailure
from tests.conftest import EXAMPLES, ROOT, needs_root

#: Every module defining pydantic models (spec.security through spec.models).
MODEL_MODULES = (
    "gpufabric.catalog.schema",
    "gpufabric.spec.models",
    "gpufabric.spec.security",
    "gpufabric.spec.inference",
    "gpufabric.bench.slo",
)

LAB = EXAMPLES / "lab-2node.yaml"
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def gpufabric(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpufabric", *args], capture_output=True, text=True, env=ENV, timeout=120, **kwargs
    )


def test_output_to_dev_full_is_one_line_exit_1():
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "gpufabric", "plan", str(LAB), "--format", "json"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
            timeout=120,
        )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "gpufabric: failed: No space left on device (free some space, or point the output elsewhere)"
    ]


def test_closed_stdout_is_quiet():
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpufabric", "schema"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV
    )
    proc.stdout.close()  # like `gpufabric schema | head -c0`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1
    assert "Traceback" not in err and "Exception ignored" not in err, err


def test_name_too_long_is_a_user_error(cli, tmp_path):
    code, _, err = cli("init", tmp_path / ("x" * 300 + ".yaml"))
    assert code == 2 and "File name too long" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["predict", "collective", "--nodes", str(10**30)], "--nodes"),
        (["predict", "collective", "--gpus-per-node", "0"], "--gpus-per-node"),
        (["predict", "collective", "--bytes", "1e300"], "--bytes"),
        (["simulate", "--ranks", str(10**30)], "--ranks"),
        (["simulate", "--ranks", "8", "--seed", str(10**30)], "--seed"),
        (["simulate", "--ranks", "8", "--ring-steps", str(10**30), "--comm-latency", "const:1us"], "--ring-steps"),
        (["runs", "--limit", str(10**30)], "--limit"),
    ],
)
def test_huge_integers_are_range_checked(cli, args, flag):
    code, out, err = cli(*args)
    assert code == 2 and flag in err and "Traceback" not in err and out == ""
    assert len(err.strip().splitlines()) == 1


def test_overflow_anywhere_is_exit_2(cli):
    code, _, err = cli("predict", "collective", "--bytes", "1e400")
    assert code == 2 and err.startswith("gpufabric: error: a number is too large")


def test_brute_force_refuses_what_cannot_fit(cli):
    code, _, err = cli("simulate", "--ranks", str(1 << 31), "--brute-force", "--steps", "10")
    assert code == 2 and "--brute-force draws every rank needs about" in err and "GiB" in err


def test_reading_commands_refuse_db_in_missing_directory(cli, tmp_path):
    db = tmp_path / "no" / "such" / "dir" / "results.db"
    for args in (["runs"], ["report", "latest"], ["compare", "1", "2"]):
        code, _, err = cli(*args, "--db", db)
        assert code == 2 and "does not exist" in err, (args, err)
    assert not (tmp_path / "no").exists()  # nothing was created


# The console script's entry (gpufabric.__main__.main) first installs the quiet handler; '@'
# is written once it is in place, so the signal lands in what the entry runs after it (main's
# own call is then a no-op: the handler is no longer Python's).
SYNC = (
    "import os, sys; sys.argv = ['gpufabric', 'plan', {spec!r}]; import gpufabric.__main__ as m;"
    " m.quiet_until_started(); os.write(2, b'@'); m.main()"
)


@pytest.mark.parametrize("delay_s", [0.0, 0.01, 0.02, 0.04, 0.08, 0.12, 0.2, 0.3])
def test_ctrl_c_during_start_up_exits_130_without_traceback(delay_s):
    # The child writes '@' once Python has found and imported the gpufabric package (the
    # interpreter's own start-up and module lookup come before any of our code and are not
    # ours to guard); SIGINT then lands in our imports, the app building or the command.
    proc = subprocess.Popen(
        [sys.executable, "-c", SYNC.format(spec=str(EXAMPLES / "llama3-405b-16k.yaml"))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    assert proc.stderr.read(1) == b"@"
    time.sleep(delay_s)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err and b"Exception ignored" not in err, err.decode()
    assert proc.returncode == 130 or (proc.returncode == 0 and out), (proc.returncode, err.decode())
    assert err.strip() in (b"", b"gpufabric: interrupted")


def test_every_pydantic_model_module_is_in_the_start_up_list():
    """A module defining pydantic models that the list misses would be built after Ctrl-C is
    handed back; found by reading every module's source for model classes."""
    import re

    defines = re.compile(r"^class \w+\((?:BaseModel|StrictModel|SpecModel)\b", re.MULTILINE)
    src = ROOT / "src"
    found = {
        ".".join(path.relative_to(src).with_suffix("").parts)
        for path in (src / "gpufabric").rglob("*.py")
        if defines.search(path.read_text())
    }
    assert found == set(MODEL_MODULES) | {"gpufabric.spec.types"}  # spec.types: the base classes


#: Per module: None = not imported; True = imported, every model class in it built.
BUILT = (
    "import sys, gpufabric.cli.app as a; end = a._end_startup\n"
    "def state(m):\n"
    "    if m not in sys.modules: return None\n"
    "    ns = vars(sys.modules[m])\n"
    "    return all(v.__pydantic_complete__ for v in ns.values() if isinstance(v, type)"
    " and hasattr(v, '__pydantic_complete__') and v.__module__ == m)\n"
    "def seen():\n"
    "    from gpufabric.catalog import loader\n"
    "    print([state(m) for m in {modules!r}], loader._load_shipped.cache_info().currsize, file=sys.stderr)\n"
    "    end()\n"
    "a._end_startup = seen; sys.exit(a.main({argv!r}))"
)


@pytest.mark.parametrize(
    ("argv", "built", "catalogs"),
    [
        (  # a training spec: no inference spec models (cli/plan.py models_for)
            ["plan", str(EXAMPLES / "lab-2node.yaml")],
            {
                **dict.fromkeys(MODEL_MODULES, True),
                "gpufabric.catalog.schema": None,
                "gpufabric.bench.slo": None,
                "gpufabric.spec.inference": None,
            },
            1,
        ),
        (
            ["plan", str(EXAMPLES / "lab-2node.yaml"), "--catalog", str(EXAMPLES / "lab-2node.yaml")],
            {**dict.fromkeys(MODEL_MODULES, True), "gpufabric.bench.slo": None, "gpufabric.spec.inference": None},
            1,
        ),
        (
            ["plan", str(EXAMPLES / "serving" / "llama3-70b-serving.yaml")],
            {**dict.fromkeys(MODEL_MODULES, True), "gpufabric.catalog.schema": None, "gpufabric.bench.slo": None},
            1,
        ),
        (["predict", "collective", "--bytes", "1M"], {**dict.fromkeys(MODEL_MODULES, None)}, 1),
        (  # a plain import builds nothing (cli/ingest.py models_for)
            ["ingest", "--tool", "nccl-tests", str(ROOT / "tests/data/nccl-tests/all_reduce_8gpu.txt"), "--dry-run"],
            {**dict.fromkeys(MODEL_MODULES, None)},
            0,  # and no catalog
        ),
        (  # --thresholds: the SLO file's models, and only those (built before the file is read,
            # so a file they refuse, exit 2, shows it as well as a valid one)
            [
                *("ingest", "--tool", "nccl-tests", str(ROOT / "tests/data/nccl-tests/all_reduce_8gpu.txt")),
                *("--dry-run", f"--thresholds={ROOT / 'tests/data/nccl-tests/all_reduce_8gpu.txt'}"),
            ],
            {**dict.fromkeys(MODEL_MODULES, None), "gpufabric.bench.slo": True},
            0,
        ),
    ],
)
def test_pydantic_models_are_built_before_ctrl_c_is_handed_back(argv, built, catalogs, tmp_path):
    """A KeyboardInterrupt raised while pydantic-core builds validators is written off as
    "Exception ignored" and lost, so the models a command declares (its module's MODELS)
    are built while the quiet start-up handler is still in place (CI caught a lost Ctrl-C
    once the spec models became lazy). The shipped catalog is loaded then too (from its
    cache: the catalog models are built only to validate, here for a --catalog file), and
    predict builds no spec model (its start-up stays short)."""
    modules = sorted(built)
    probe = BUILT.format(modules=modules, argv=argv)
    env = {**ENV, "XDG_CACHE_HOME": str(tmp_path)}
    warm = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert warm.returncode == done.returncode, warm.stderr
    states = [built[m] for m in modules]
    if "gpufabric.catalog.schema" in modules and built["gpufabric.catalog.schema"] is None:
        states[modules.index("gpufabric.catalog.schema")] = False  # imported (the cached objects' classes), not built
    assert done.stderr.splitlines()[0] == f"{states} {catalogs}", done.stderr
    # the first run (a miss) wrote the catalog's cache, where the command loads the catalog
    assert len(list(tmp_path.glob("gpufabric/catalog-*.pickle"))) == catalogs


def test_the_entry_installs_the_quiet_handler_and_the_library_does_not():
    code = (
        "import signal, gpufabric.__main__ as m; before = signal.getsignal(signal.SIGINT);"
        " m.quiet_until_started(); after = signal.getsignal(signal.SIGINT);"
        " print(before is signal.default_int_handler, getattr(after, 'gpufabric_startup', False))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=60)
    assert done.stdout.split() == ["True", "True"], done.stderr


#: Runs the entry with a command (``--version``, after start-up) and prints, while the command
#: runs, whether the collector is on and how many objects start-up froze.
COLLECTOR = (
    "import gc, sys, gpufabric.__main__ as m, gpufabric.cli.app as a\n"
    "{setup}\n"
    "def shown(value):\n"
    "    import gc, sys\n"
    "    if value: print(gc.isenabled(), gc.get_freeze_count(), file=sys.stderr); raise SystemExit(0)\n"
    "a._version.__code__ = shown.__code__  # the --version callback, as typer holds it\n"
    "sys.argv = ['gpufabric', '--version']; m.main()"
)


def test_the_collector_is_off_for_the_imports_and_on_for_the_command():
    """The entry switches the garbage collector off while the command imports (its
    collections over start-up's objects were ~0.05 s of a `plan`, docs/performance.md) and
    the command runs with it on, start-up's objects frozen out of its collections."""
    done = subprocess.run(
        [sys.executable, "-c", COLLECTOR.format(setup="")], capture_output=True, text=True, env=ENV, timeout=60
    )
    enabled, frozen = done.stderr.split()
    assert (enabled, done.returncode) == ("True", 0), done.stderr
    assert int(frozen) > 10_000  # modules, classes, functions


def test_a_collector_switched_off_by_an_embedding_program_stays_off():
    done = subprocess.run(
        [sys.executable, "-c", COLLECTOR.format(setup="gc.disable()")],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
    )
    assert done.stderr.split() == ["False", "0"], done.stderr


def test_importing_the_library_leaves_sigint_alone():
    code = "import signal, gpufabric.cli.app; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=60)
    assert done.stdout.strip() == "True"


@pytest.fixture
def small_fs(tmp_path):
    """A 2 MiB ext4 filesystem on a loop device (root only)."""
    if os.geteuid() != 0 or not shutil.which("mkfs.ext4") or not Path("/dev/loop-control").exists():
        pytest.skip("needs root, mkfs.ext4 and loop devices")
    image, mount = tmp_path / "sf.img", tmp_path / "mnt"
    mount.mkdir()
    with open(image, "wb") as handle:
        handle.truncate(2 * 1024 * 1024)
    subprocess.run(["mkfs.ext4", "-q", "-m", "0", str(image)], check=True)  # -m 0: no blocks kept for root
    if subprocess.run(["mount", "-o", "loop", str(image), str(mount)], capture_output=True).returncode:
        pytest.skip("cannot loop-mount here")
    try:
        yield mount
    finally:
        gc.collect()  # a traceback kept by pytest.raises may still hold a closed store's objects
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(mount)], check=False)
        attached = subprocess.run(["losetup", "-j", str(image)], capture_output=True, text=True).stdout
        for line in attached.splitlines():
            subprocess.run(["losetup", "-d", line.split(":", 1)[0]], check=False)


@needs_root
def test_full_disk_marks_the_run_failed_with_one_line(small_fs):
    db = small_fs / "results.db"
    store = Store.open(db)
    run_id = store.begin_run(kind="bench", argv=["bench"], fingerprint={})
    blob = os.urandom(256 * 1024).hex()  # incompressible, 512 KB of text per result
    with pytest.raises(StoreFailure, match="no space left on device; the run is marked failed") as info:
        for i in range(100):
            store.add_result(run_id, TestResult(name=f"t{i}", tool="fio", host="h", status=Status.ok, raw_output=blob))
    assert isinstance(info.value, EnvironmentFailure)
    store.close()
    with Store.open(db) as again:
        assert again.get_run(run_id).status == "failed"


@needs_root
def test_full_disk_in_one_batch_stores_none_of_it_and_marks_the_run_failed(small_fs):
    db = small_fs / "results.db"
    store = Store.open(db)
    run_id = store.begin_run(kind="ingest", argv=["ingest"], fingerprint={})
    blob = os.urandom(256 * 1024).hex()
    batch = [TestResult(name=f"t{i}", tool="fio", host="h", status=Status.ok, raw_output=blob) for i in range(100)]
    with pytest.raises(StoreFailure, match="no space left on device; the run is marked failed"):
        store.add_results(run_id, batch)
    store.close()
    with Store.open(db) as again:
        run = again.get_run(run_id)
        assert run.status == "failed" and run.results == ()


@needs_root
def test_full_disk_from_the_cli_is_exit_1(small_fs, cli):
    for n, chunk in enumerate((65536, 512, 1)):  # fill to the last byte
        with pytest.raises(OSError), open(small_fs / f"filler{n}", "wb", buffering=0) as handle:
            while True:
                handle.write(b"x" * chunk)
    code, _, err = cli("init", small_fs / "spec.yaml")
    assert code == 1 and "No space left on device" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["calibrate", "latest", "--fabric", "ib-xdr9"], "unknown fabric id 'ib-xdr9' (did you mean 'ib-xdr'?)"),
        (["calibrate", "latest", "--fabric", "ib-ndr", "--storage", "nfs\nx"], "unknown storage backend id"),
        (["predict", "collective", "--fabric", "ib-xdr9"], "did you mean 'ib-xdr'?"),
    ],
)
def test_catalog_ids_on_the_command_line_are_checked(cli, tmp_path, args, message):
    code, _, err = cli(*args, *(["--db", tmp_path / "r.db"] if args[0] == "calibrate" else []))
    assert code == 2 and message in err


def test_config_checks_catalog_ids_in_the_spec(cli, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(LAB.read_text().replace("fabrics: [ib-ndr,", "fabrics: [ib-xdr9,"))
    code, _, err = cli("config", spec, "--dry-run")
    assert code == 2 and "options.fabrics[0]: unknown catalog id 'ib-xdr9' (did you mean 'ib-xdr'?)" in err
