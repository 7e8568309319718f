"""The results store: every run, test result, metric, raw sample, verdict and artifact in one SQLite file.

Durability (issue 4: "an interrupted run (Ctrl-C or kill -9) keeps all that finished
and the database passes PRAGMA integrity_check"):

* Each ``add_result`` is one explicit transaction, committed before it returns.
  ``add_results`` (ingest, whose results all exist before anything is stored) writes a
  whole batch in one transaction: all of it or, on any error, none of it.
* ``journal_mode=WAL``: a reader (``gpufabric runs`` in another terminal) never blocks
  the writing suite and vice versa, and a killed writer leaves a WAL that the next
  opener replays or discards atomically.
* ``synchronous=FULL``: WAL with NORMAL is already safe against a killed *process*
  (the committed pages are in the OS page cache), but it may lose the last commits on
  an OS crash or power cut, and validation suites are exactly what makes a fresh node
  panic or reset. FULL fsyncs the WAL at every commit; commits happen once per finished
  test (seconds to minutes apart), so the fsync cost (about a millisecond) is noise.
  https://www.sqlite.org/pragma.html#pragma_synchronous

The schema and its migrations live in ``schema.py``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import sqlite3
import stat
import struct
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import compress, repeat, starmap
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpufabric import __version__
from gpufabric.errors import EnvironmentFailure, InputError
from gpufabric.jsonable import to_jsonable
from gpufabric.results import ranks
from gpufabric.results.records import (
    Direction,
    Metric,
    MetricRows,
    Outcome,
    RunInfo,
    RunRecord,
    RunStatus,
    Status,
    TestResult,
    Verdict,
)
from gpufabric.results.schema import STORE_SCHEMA_VERSION, migrate, read_version
from gpufabric.results.sqlconn import (
    PgConnection,
    SqlConnection,
    SqliteConnection,
    display_name,
    is_url,
    network_filesystem,
)

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from gpufabric.results.recorder import Recorder

#: Terminal statuses ``finish_run`` accepts; 'running' is the status of an unfinished run.
RUN_STATUSES = tuple(s.value for s in RunStatus if s is not RunStatus.running)

#: How long a writer waits for another process's write lock before giving up.
BUSY_TIMEOUT_MS = 10_000


class StoreFailure(EnvironmentFailure):
    """The results database could not be written (disk full, read-only, I/O error)."""


class StoreDamaged(EnvironmentFailure):
    """The results database holds a value gpufabric did not write (edited by hand, corrupted):
    one line naming the table and column, exit 1."""


#: Names SQLite does not treat as a file: an in-memory database keeps nothing after the
#: command, a URI may name anything (``file:x?mode=memory``). ``""`` is a private temporary file.
_NOT_A_STORE = (":memory:", "")


def _store_path(path: str | Path | None) -> Path:
    """The store's file path; a name that is not a file is refused (InputError, exit 2)."""
    raw = os.fspath(path) if path is not None else None
    if raw is None:
        env = os.environ.get("GPUFABRIC_DB")
        if env is not None and (env in _NOT_A_STORE or env.startswith("file:")):
            raise InputError(
                f"GPUFABRIC_DB={env!r} is not a results file: an in-memory or URI database would keep nothing"
                " after the command; set it to a file path"
            )
        return Path(default_path())
    if raw in _NOT_A_STORE or raw.startswith("file:"):
        raise InputError(
            f"--db {raw!r} is not a results file: an in-memory or URI database would keep nothing after the"
            " command; give a file path"
        )
    return Path(raw)


def _connect_read_only(target: Path) -> sqlite3.Connection:
    """A read-only connection. A WAL database needs its -shm file: where it cannot be
    created (a read-only mount, a directory of another user) SQLite opens the file only
    as ``immutable`` (https://www.sqlite.org/uri.html#uriimmutable), which is what such
    media are: nobody can write there through the WAL either."""
    uri = target.resolve().as_uri()
    try:
        conn = sqlite3.connect(
            f"{uri}?mode=ro", uri=True, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
        )
        read_version(SqliteConnection(conn))
        return conn
    except sqlite3.OperationalError:
        conn = sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, isolation_level=None, check_same_thread=False)
        return conn


def _newer(name: object, version: int) -> InputError:
    """A store written by a newer gpufabric: refused, never downgraded."""
    return InputError(
        f"{name}: results schema v{version} is newer than this gpufabric ({__version__}, "
        f"schema v{STORE_SCHEMA_VERSION}); upgrade gpufabric"
    )


def _close(conn: sqlite3.Connection | None) -> None:
    if conn is not None:
        conn.close()


def _is_full(exc: BaseException) -> bool:
    # SQLITE_FULL: "database or disk is full"; a failed journal write may surface as an
    # OSError (ENOSPC) from the sqlite3 module instead.
    code = getattr(exc, "sqlite_errorcode", None)
    return code == 13 or "database or disk is full" in str(exc) or getattr(exc, "errno", None) == 28


def default_path() -> Path | str:
    """$GPUFABRIC_DB (a file, or a ``postgresql://`` URL as it is), else <user data dir>/gpufabric/results.db."""
    env = os.environ.get("GPUFABRIC_DB")
    if env:
        return env if is_url(env) else Path(env)
    import platformdirs

    return Path(platformdirs.user_data_dir("gpufabric")) / "results.db"


def _dumps(value: Any) -> str:
    if type(value) is dict and all(type(k) is str and type(v) is str for k, v in value.items()):
        # A result's params are text (ingest: ~10 tool_* keys per result, 10,617 results per
        # 100 MB log), which to_jsonable would return unchanged, one call per value.
        return json.dumps(value, sort_keys=True)
    return json.dumps(to_jsonable(value), sort_keys=True)


#: Stored text of each Status and Direction, for a dict lookup instead of an enum call per
#: row (a 100 MB ingest converts 680,000 directions; the calls took 0.6 s).
_STATUSES = {s.value: s.value for s in Status}
_DIRECTIONS = {d.value: d.value for d in Direction}


#: Metric fields, read by ``map`` over a result's metrics (add_results).
_NAME, _VALUE, _UNIT, _DIRECTION, _SAMPLES = map(attrgetter, ("name", "value", "unit", "direction", "samples"))


def _stored_values(values: list[Any]) -> list[float | None]:
    """``values`` as SQLite gets them: floats as they are (nearly always), anything else
    through float() (a numpy integer would not bind); None stays None."""
    if set(map(type, values)) <= {float}:
        return values
    return [_float(v) for v in values]


def _stored_directions(directions: list[Any]) -> list[str]:
    """The stored text of each direction; ValueError (as Direction(x) raises) for one that
    is none."""
    if not set(directions) <= _DIRECTIONS.keys():
        for d in directions:
            _value(_DIRECTIONS, Direction, d)
    return list(map(_DIRECTIONS.__getitem__, directions))


def _value(known: dict[str, str], enum_type: type[Status] | type[Direction], member: str) -> str:
    """The stored text of ``member`` (an enum member or its text); anything else raises
    ValueError as the enum call does."""
    found = known.get(member)
    return found if found is not None else enum_type(member).value


#: Bound parameters per statement: 999 is the lowest limit any SQLite has had
#: (SQLITE_MAX_VARIABLE_NUMBER before 3.32).
_MAX_PARAMS = 999


#: Page cache of a bulk write, KiB (PRAGMA cache_size's negative form); pages are allocated
#: only as the transaction dirties them.
_BULK_CACHE_KIB = 128 * 1024


def _insert_rows(cur: Any, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
    """INSERT ``rows`` (tuples of equal width) into ``table`` ("name (columns)"): _insert_columns
    of their columns."""
    if rows:
        _insert_columns(cur, table, [list(col) for col in zip(*rows, strict=True)])


def _insert_columns(cur: Any, table: str, cols: Sequence[Sequence[Any]]) -> None:
    """INSERT the rows whose columns are ``cols`` (of equal length) into ``table``, many rows
    per statement: SQLite runs a statement's program (open the table and index cursors, set
    up the foreign-key checks) once per execution, and ``executemany`` runs it once per row
    (docs/performance.md: the 100 MB ingest's 1 million rows). The parameters are the
    columns interleaved by slice assignment into one flat list (no tuple per row), and each
    statement binds one slice of it."""
    rows = len(cols[0]) if cols else 0
    if not rows:
        return
    width = len(cols)
    flat: list[Any] = [None] * (rows * width)
    for k, col in enumerate(cols):
        flat[k::width] = col
    per = _MAX_PARAMS // width
    one = "(" + ", ".join("?" * width) + ")"
    full = f"INSERT INTO {table} VALUES " + ", ".join([one] * per)
    for start in range(0, rows, per):
        count = min(per, rows - start)
        sql = full if count == per else f"INSERT INTO {table} VALUES " + ", ".join([one] * count)
        cur.execute(sql, flat[start * width : (start + count) * width])


def _float(value: float | None) -> float | None:
    # SQLite stores NaN as NULL; keep None distinct from a measured NaN on the way back.
    return None if value is None else float(value)


#: Two samples packed at once: an nccl-tests size's out-of-place and in-place times (ingest
#: stores 340,000 of them per 100 MB log).
_PACK_PAIR = struct.Struct("<2d").pack


def _sample_columns(ids: Sequence[int], samples: list[tuple[float, ...]]) -> list[list[Any]]:
    """The sample table's columns (metric id, count, little-endian doubles) of the metrics
    with samples; pairs packed by one precompiled struct over the column (map), other counts
    one by one."""
    kept_ids = list(compress(ids, samples))
    kept = list(filter(None, samples))
    if set(map(len, kept)) == {2}:
        return [kept_ids, [2] * len(kept), list(starmap(_PACK_PAIR, kept))]
    return [kept_ids, list(map(len, kept)), [struct.pack(f"<{len(s)}d", *s) for s in kept]]


def _insert_results(cur: Any, run_id: int, batch: Sequence[TestResult]) -> list[int]:
    """INSERT ``batch`` (results, metrics, samples) of run ``run_id`` inside the caller's write transaction."""
    # Ids assigned here, inside the write transaction (SQLite's BEGIN IMMEDIATE, the
    # PostgreSQL advisory lock: no other writer until COMMIT), so
    # samples name their metric without a lastrowid round trip per row. MAX(id)+1 is
    # what SQLite itself picks for an INTEGER PRIMARY KEY without AUTOINCREMENT.
    result_id = cur.execute("SELECT COALESCE(MAX(id), 0) FROM test_result").fetchone()[0]
    metric_id = cur.execute("SELECT COALESCE(MAX(id), 0) FROM metric").fetchone()[0]
    first_metric = metric_id
    result_rows: list[tuple[Any, ...]] = []
    # The metric table's columns but its id (a range): an ingest stores 680,000 metrics,
    # extended result by result with map (C speed; a Python statement per metric took 0.8 s,
    # a tuple per row 0.2 s; docs/performance.md).
    result_ids: list[int] = []
    names: list[str] = []
    values: list[Any] = []
    units: list[str] = []
    directions: list[Any] = []
    samples: list[tuple[float, ...]] = []
    ids = []
    # A file's results share most of their params (an ingest's 10,617 results: the same file,
    # tool_* keys and warnings): each distinct set is encoded once (sorted keys, as _dumps).
    params_json: dict[tuple[tuple[str, str], ...], str] = {}
    for result in batch:
        result_id += 1
        ids.append(result_id)
        params = {**result.params, **ranks.to_params(result.ranks)}
        key = tuple(params.items()) if all(type(k) is str and type(v) is str for k, v in params.items()) else None
        if key is None:
            encoded = _dumps(params)
        else:
            known = params_json.get(key)
            encoded = params_json[key] = _dumps(params) if known is None else known
        result_rows.append(
            (
                result_id,
                run_id,
                result.name,
                result.tool,
                result.host,
                _value(_STATUSES, Status, result.status),
                result.reason,
                _dumps(list(result.argv)) if result.argv else "[]",
                result.started_at,
                result.duration_s,
                result.raw_output,
                encoded,
            )
        )
        metrics = result.metrics
        if not metrics:
            continue
        metric_id += len(metrics)
        result_ids += repeat(result_id, len(metrics))
        if type(metrics) is MetricRows:  # the parser's own columns: no attribute look-up per metric
            cols = metrics.columns
            names += cols[0]
            values += cols[1]
            units += cols[2]
            directions += cols[3]
            samples += cols[4]
            continue
        names += map(_NAME, metrics)
        values += map(_VALUE, metrics)
        units += map(_UNIT, metrics)
        directions += map(_DIRECTION, metrics)
        samples += map(_SAMPLES, metrics)
    # checked and converted once for the whole batch (not once per result)
    values = _stored_values(values)
    directions = _stored_directions(directions)
    _insert_rows(
        cur,
        "test_result (id, run_id, name, tool, host, status, reason, argv, started_at, duration_s, raw_output, params)",
        result_rows,
    )
    metric_ids = range(first_metric + 1, metric_id + 1)
    _insert_columns(
        cur,
        "metric (id, result_id, name, value, unit, direction)",
        [metric_ids, result_ids, names, values, units, directions],
    )
    _insert_columns(cur, "sample (metric_id, count, data)", _sample_columns(metric_ids, samples))
    return ids


def _insert_results_checked(cur: Any, run_id: int, batch: Sequence[TestResult]) -> list[int]:
    """_insert_results where SQLite does not check foreign keys (Store._bulk_write): every
    reference is still sound. The run is looked up inside the write transaction (no other
    writer can delete it before COMMIT), and the result, metric and sample rows refer only
    to ids _insert_results assigns in the same transaction."""
    if cur.execute("SELECT 1 FROM run WHERE id=?", (run_id,)).fetchone() is None:
        raise sqlite3.IntegrityError("FOREIGN KEY constraint failed")  # what the check would have raised
    return _insert_results(cur, run_id, batch)


def _insert_verdicts(cur: Any, run_id: int, verdicts: Sequence[Verdict]) -> None:
    """INSERT ``verdicts`` of run ``run_id`` inside the caller's write transaction."""
    cur.executemany(
        "INSERT INTO verdict (run_id, test, metric, host, outcome, measured, expected, direction, margin,"
        " reason, warnings, unit, passed_repeats, total_repeats, source)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                run_id,
                v.test,
                v.metric,
                v.host,
                Outcome(v.outcome).value,
                _float(v.measured),
                _float(v.expected),
                Direction(v.direction).value,
                _float(v.margin),
                v.reason,
                _dumps(list(v.warnings)),
                v.unit,
                v.passed_repeats,
                v.total_repeats,
                v.source,
            )
            for v in verdicts
        ],
    )


class Store:
    """A handle on one results store (a SQLite file or a PostgreSQL database). Thread-safe;
    use as a context manager or call ``close``.

    ``path`` names the store in messages: the file, or the URL without its password.
    """

    def __init__(self, conn: SqlConnection, path: Path | str) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self.path = path
        self._open_runs: set[int] = set()

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self._conn.dialect

    @classmethod
    def open(cls, path: str | Path | None = None, *, create: bool = True) -> Store:
        """Open (creating, or migrating from an older schema) the store at ``path``.

        ``path`` is a SQLite file, or a ``postgresql://`` URL (``results.sqlconn``): the same
        schema, migrations and queries on a server many clusters and CI runners share.

        Args:
            create: False for reading commands (runs, report, compare): a path whose
                directory does not exist is an error naming it (a typo in --db), not a
                new directory tree with an empty database in it.

        Raises:
            InputError: the directory does not exist (``create=False``), the file is not
                a SQLite database, or was written by a newer gpufabric.
        """
        given = os.fspath(path) if path is not None else os.environ.get("GPUFABRIC_DB", "")
        if is_url(given):
            return cls._open_server(given)
        target = _store_path(path)
        if str(target).startswith(("postgresql:", "postgres:")):
            # What Path() makes of a URL ('postgresql://u@h/db' -> 'postgresql:/u@h/db'): never a file name.
            raise InputError(f"{target}: not a results store: a PostgreSQL URL is postgresql://USER@HOST/DB")
        if not create and not target.parent.is_dir():
            raise InputError(
                f"{target}: no results database (directory {target.parent} does not exist);"
                " check --db or $GPUFABRIC_DB, or record a run first (gpufabric bench / ingest)"
            )
        fs_type = network_filesystem(target.parent) if target.parent.is_dir() else None
        if fs_type:
            logging.getLogger("gpufabric").warning(
                "warning: %s is on a network filesystem (%s): SQLite's WAL does not work there (concurrent"
                " writers can corrupt it); keep the file on local disk, or share a PostgreSQL store"
                " (--db postgresql://USER@HOST/DB)",
                target,
                fs_type,
            )
        try:
            kind = target.stat().st_mode
        except OSError:
            kind = None  # absent (created below) or unreadable (the open reports it)
        if kind is not None and not stat.S_ISREG(kind):
            what = "a directory" if stat.S_ISDIR(kind) else "not a regular file"
            raise InputError(f"{target}: is {what}, not a results database; give a file path to --db")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if exc.errno in (errno.ENOTDIR, errno.EEXIST, errno.ENAMETOOLONG):
                raise InputError(f"{target}: cannot create the results directory: {exc.strerror}") from exc
            raise StoreFailure(f"{target}: cannot create the results directory: {exc.strerror}") from exc
        # a reading command (create=False) on a file it may not write opens it read-only:
        # listing a database on a read-only mount or owned by another user still works
        read_only = not create and target.exists() and not os.access(target, os.W_OK)
        conn: sqlite3.Connection | None = None
        try:
            if read_only:
                conn = _connect_read_only(target)
            else:
                conn = sqlite3.connect(
                    target, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
                )
            conn.execute("PRAGMA foreign_keys=ON")
            if not read_only:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
            version = read_version(SqliteConnection(conn))
        except sqlite3.OperationalError as exc:  # cannot open: no permission, full disk, read-only mount ...
            _close(conn)
            raise StoreFailure(f"{target}: cannot open the results database: {exc}") from exc
        except sqlite3.DatabaseError as exc:  # opened, but the bytes are not SQLite
            _close(conn)
            raise InputError(f"{target}: not a gpufabric results database ({exc})") from exc
        except ValueError as exc:  # meta.schema_version is not a number
            _close(conn)
            raise StoreDamaged(
                f"{target}: table meta, column value (key schema_version) does not hold a version number ({exc});"
                " was the database edited by hand? restore a copy"
            ) from exc
        if version > STORE_SCHEMA_VERSION:
            conn.close()
            raise _newer(target, version)
        if version < STORE_SCHEMA_VERSION:
            if read_only:
                conn.close()
                raise StoreFailure(
                    f"{target}: results schema v{version} needs migrating to v{STORE_SCHEMA_VERSION}, but the file"
                    " is read-only; open it once with write access"
                )
            try:
                migrate(SqliteConnection(conn), writer=f"gpufabric {__version__}")
            except (sqlite3.OperationalError, OSError) as exc:
                conn.close()
                raise StoreFailure(f"{target}: cannot migrate the results database: {exc}") from exc
        return cls(SqliteConnection(conn), target)

    @classmethod
    def _open_server(cls, url: str) -> Store:
        """A PostgreSQL store: connect, create or migrate the schema, refuse a newer one."""
        conn = PgConnection.connect(url)
        name = display_name(url)
        try:
            version = read_version(conn)
            if version > STORE_SCHEMA_VERSION:
                raise _newer(name, version)
            if version < STORE_SCHEMA_VERSION:
                migrate(conn, writer=f"gpufabric {__version__}")
        except ValueError as exc:  # meta.schema_version is not a number
            conn.close()
            raise StoreDamaged(
                f"{name}: table meta, column value (key schema_version) does not hold a version number ({exc});"
                " was the database edited by hand?"
            ) from exc
        except BaseException:
            conn.close()
            raise
        return cls(conn, name)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        with self._lock:
            return read_version(self._conn)

    def _write(self, fn, *args):
        """Run ``fn(cursor, *args)`` in one committed transaction.

        A full disk (or any other write failure) becomes :class:`StoreFailure` with one
        readable line, after the runs this handle began are marked failed where the disk
        still allows it, so none is left 'running' forever.
        """
        try:
            with self._lock:
                cur = self._conn.cursor()
                self._conn.begin_write(cur)
                try:
                    out = fn(cur, *args)
                    cur.execute("COMMIT")
                except BaseException:
                    if self._conn.in_transaction:
                        cur.execute("ROLLBACK")
                    raise
                return out
        except self._conn.write_errors as exc:
            if isinstance(exc, self._conn.integrity_errors):
                raise
            self._mark_open_runs_failed()
            if _is_full(exc):
                raise StoreFailure(
                    f"{self.path}: no space left on device; the run is marked failed (free some space and run again)"
                ) from exc
            raise StoreFailure(f"{self.path}: cannot write the results database: {exc}") from exc

    def _mark_open_runs_failed(self) -> None:
        """Best effort: an UPDATE of existing rows often still fits when an INSERT did not."""
        if not self._open_runs:
            return
        try:
            with self._lock:
                marks = ",".join("?" * len(self._open_runs))
                self._conn.execute(
                    f"UPDATE run SET status='failed', finished_at=? WHERE id IN ({marks})",
                    (time.time(), *sorted(self._open_runs)),
                )
                # Hand the WAL's space back (a failed add_results may have filled the disk with
                # frames of the rolled-back transaction): the update lands in the database
                # file, and the next open finds no WAL to replay on a full disk.
                if self._conn.dialect == "sqlite":
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except self._conn.write_errors:
            pass

    # -- writing ---------------------------------------------------------------

    def begin_run(
        self,
        *,
        kind: str,
        argv: Sequence[str],
        fingerprint: Mapping[str, Any],
        spec_name: str = "",
        plan: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        started_at: float | None = None,
    ) -> int:
        """Record a new run with status 'running'; returns its id. ``started_at`` (unix s, default
        now) lets a probe recorded after it ran keep its real start, so its duration is right."""

        def insert(cur: Any) -> int:
            row = cur.execute(
                "INSERT INTO run (kind, status, started_at, argv, fingerprint, spec_name, plan, meta, gpufabric_version)"
                " VALUES (?, 'running', ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    kind,
                    time.time() if started_at is None else started_at,
                    _dumps(list(argv)),
                    _dumps(dict(fingerprint)),
                    spec_name,
                    None if plan is None else _dumps(dict(plan)),
                    _dumps(dict(meta or {})),
                    __version__,
                ),
            ).fetchone()
            return int(row[0])

        run_id = self._write(insert)
        self._open_runs.add(run_id)
        return run_id

    def add_result(self, run_id: int, result: TestResult) -> int:
        """Store one test result with its metrics and raw samples, committed before returning."""
        return self.add_results(run_id, (result,))[0]

    def add_results(self, run_id: int, results: Iterable[TestResult]) -> list[int]:
        """Store many results in ONE committed transaction (all or none); their ids, in order.

        For ingest, whose results all exist before anything is stored: a 100 MB nccl-tests
        log is 10,617 results with 680,000 metrics, and a transaction per result fsynced
        the WAL 10,617 times (synchronous=FULL) and ran one statement per metric and per
        sample (docs/performance.md). The suite keeps ``add_result`` per finished test, so
        an interrupted run keeps what finished.
        """
        batch = tuple(results)
        self._require_run(run_id)
        if len(batch) > 1 and self._conn.dialect == "sqlite":
            # Everything committed so far goes into the database file first, so that if the
            # batch fills the disk, the WAL holds nothing but the batch and the failure mark
            # (_mark_open_runs_failed) can still be checkpointed into existing pages.
            # PASSIVE: never waits for a reader (`gpufabric runs` in another terminal).
            with self._lock, contextlib.suppress(*self._conn.write_errors):  # best effort, as is that mark
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            return self._bulk_write(_insert_results_checked, run_id, batch)
        return self._write(_insert_results, run_id, batch)

    def _bulk_write(self, fn, *args):
        """``_write`` with SQLite's foreign-key checks off for the transaction: one lookup of
        the parent row per inserted row, 1 million of them for a 100 MB nccl-tests log
        (0.5 s of its 2 s store; docs/performance.md). ``fn`` guarantees the references
        itself (_insert_results_checked). The pragma is a no-op inside a transaction, so it is
        set before ``_write`` begins one, and restored after it, whatever happened."""
        with self._lock:
            self._conn.execute("PRAGMA foreign_keys=OFF")
            # A page cache the size of the batch (at most _BULK_CACHE_KIB): the default 2 MB
            # spills the metric index's pages to the WAL and reads them back many times over
            # (the 100 MB ingest's store: ~1.4 -> ~1.3 s CPU in one process).
            cache = self._conn.execute("PRAGMA cache_size").fetchone()[0]
            self._conn.execute(f"PRAGMA cache_size=-{_BULK_CACHE_KIB}")
        try:
            return self._write(fn, *args)
        finally:
            with self._lock:
                self._conn.execute("PRAGMA foreign_keys=ON")
                self._conn.execute(f"PRAGMA cache_size={int(cache)}")

    def add_verdicts(self, run_id: int, verdicts: Sequence[Verdict]) -> None:
        """Store verdicts (appended to any already stored for the run), in one transaction."""

        self._require_run(run_id)
        self._write(_insert_verdicts, run_id, verdicts)

    def add_artifact(self, run_id: int, name: str, content: str) -> None:
        """Store (or replace) a named text artifact of the run, e.g. a generated sbatch script."""
        self._require_run(run_id)
        self._write(
            lambda cur: cur.execute(
                "INSERT INTO artifact VALUES (?, ?, ?) ON CONFLICT (run_id, name) DO UPDATE SET content = excluded.content",
                (run_id, name, content),
            )
        )

    def import_run(self, run: RunRecord) -> int:
        """Store a whole run read from another store's export (``results.codec``) in ONE
        transaction: its provenance, status and times as they were, its results with samples,
        verdicts and artifacts. Returns its id here (ids are per store); the id it had is kept
        in ``meta.imported_from_id``."""

        def insert(cur: Any) -> int:
            row = cur.execute(
                "INSERT INTO run (kind, status, started_at, finished_at, argv, fingerprint, spec_name, plan, meta,"
                " gpufabric_version, duration_s, cluster, hosts, job_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    run.kind,
                    RunStatus(run.status).value,
                    run.started_at,
                    run.finished_at,
                    _dumps(list(run.argv)),
                    _dumps(dict(run.fingerprint)),
                    run.spec_name,
                    None if run.plan is None else _dumps(dict(run.plan)),
                    _dumps({**run.meta, "imported_from_id": run.meta.get("imported_from_id", run.id)}),
                    run.gpufabric_version,
                    run.duration_s,
                    run.cluster,
                    _dumps(list(run.hosts)),
                    run.job_id,
                ),
            ).fetchone()
            run_id = int(row[0])
            _insert_results(cur, run_id, run.results)
            _insert_verdicts(cur, run_id, run.verdicts)
            cur.executemany("INSERT INTO artifact VALUES (?, ?, ?)", [(run_id, k, v) for k, v in run.artifacts.items()])
            return run_id

        return self._write(insert)

    def update_fingerprint(self, run_id: int, fingerprint: Mapping[str, Any]) -> None:
        """Replace a running run's fingerprint: a probe learns its rank placement only from the
        ranks, after the run was opened (it is opened first so an interruption is recorded)."""
        self._require_run(run_id)
        self._write(
            lambda cur: cur.execute("UPDATE run SET fingerprint=? WHERE id=?", (_dumps(dict(fingerprint)), run_id))
        )

    def finish_run(self, run_id: int, status: RunStatus | str, info: RunInfo | None = None) -> None:
        """Mark a run finished with one of RUN_STATUSES; ``duration_s`` is finish - start.

        ``info``: where it ran (cluster, hosts, job id), stored with it when given.
        """
        if status not in RUN_STATUSES:
            raise InputError(f"run status {status!r} is not one of {', '.join(RUN_STATUSES)}")
        value = RunStatus(status).value
        self._require_run(run_id)
        now = time.time()

        def update(cur: Any) -> None:
            # CASE, not MAX(0, x): SQLite's two-argument MAX is PostgreSQL's GREATEST.
            cur.execute(
                "UPDATE run SET status=?, finished_at=?,"
                " duration_s = CASE WHEN ? > started_at THEN ? - started_at ELSE 0 END WHERE id=?",
                (value, now, now, now, run_id),
            )
            if info is not None:
                cur.execute(
                    "UPDATE run SET cluster=?, hosts=?, job_id=? WHERE id=?",
                    (info.cluster, _dumps(list(info.hosts)), info.job_id, run_id),
                )

        self._write(update)
        self._open_runs.discard(run_id)

    def recording(
        self, kind: str, argv: Sequence[str], fingerprint: Mapping[str, Any], **provenance: Any
    ) -> AbstractContextManager[Recorder]:
        """``with store.recording(kind, argv, fingerprint) as rec:``: see ``results.recorder``."""
        from gpufabric.results.recorder import recording

        return recording(self, kind, argv, fingerprint, **provenance)

    # -- reading ---------------------------------------------------------------

    def _require_run(self, run_id: int) -> None:
        with self._lock:
            found = self._conn.execute("SELECT 1 FROM run WHERE id=?", (run_id,)).fetchone()
        if not found:
            raise InputError(f"no run {run_id} in {self.path}")

    def resolve(self, ref: int | str) -> int:
        """A run id from ``ref``: an id, 'latest', or 'latest~N' (N runs before the latest)."""
        text = str(ref).strip()
        if text.isdigit():
            run_id = int(text)
            self._require_run(run_id)
            return run_id
        back = None
        if text == "latest":
            back = 0
        elif text.startswith("latest~") and text[7:].isdigit():
            back = int(text[7:])
        if back is None:
            raise InputError(f"bad run reference {text!r}: use a run id, 'latest' or 'latest~N'")
        with self._lock:
            row = self._conn.execute("SELECT id FROM run ORDER BY id DESC LIMIT 1 OFFSET ?", (back,)).fetchone()
        if row is None:
            raise InputError(f"no run {text!r} in {self.path} (it holds {self._count_runs()} runs)")
        return int(row[0])

    def _count_runs(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM run").fetchone()[0])

    @contextlib.contextmanager
    def _decoding(self, what: str, run_ids: Sequence[int], tables: tuple[str, ...] = ()) -> Iterator[None]:
        """Rows that do not decode (JSON columns, enum values) or a number column holding
        text mean a database edited by hand or corrupted: one line naming the table and
        column (StoreDamaged, exit 1), never a traceback nor a wrong number downstream."""
        try:
            yield
        except (ValueError, KeyError, TypeError, RecursionError) as exc:  # JSONDecodeError is a ValueError
            where = self._damage(run_ids, tables=tables) or "a row gpufabric cannot read"
            raise StoreDamaged(
                f"{self.path}: {what}: {where} ({str(exc)[:200]}); was the database edited by hand?"
            ) from exc
        damaged = self._damage(run_ids, numbers_only=True, tables=tables)
        if damaged:
            raise StoreDamaged(f"{self.path}: {what}: {damaged}; was the database edited by hand?")

    def _damage(
        self, run_ids: Sequence[int], *, numbers_only: bool = False, tables: tuple[str, ...] = ()
    ) -> str | None:
        """The first column of these runs' rows holding what gpufabric never writes, as
        "table t, column c (row n): value"; None when every checked column is sound. Each
        query is bounded by the run index, so a clean read pays milliseconds."""
        if not run_ids or self._conn.dialect != "sqlite":
            # PostgreSQL's column types already refuse text in a number column (the checks
            # below are SQLite's typeof/json_valid); a broken JSON text still fails to decode.
            return None
        marks = ",".join("?" * len(run_ids))
        for table, column, test in _DAMAGE_CHECKS:
            if (numbers_only and not test.startswith("typeof")) or (tables and table not in tables):
                continue
            scope = _DAMAGE_SCOPE[table].format(marks=marks)
            with self._lock:
                row = self._conn.execute(
                    f"SELECT x.rowid, x.{column} FROM {table} x WHERE {scope} AND NOT ({test.format(c='x.' + column)})"
                    " LIMIT 1",
                    tuple(run_ids),
                ).fetchone()
            if row is not None:
                return f"table {table}, column {column} (row {row[0]}) holds {str(row[1])[:60]!r}"
        return None

    def get_run(self, ref: int | str) -> RunRecord:
        """The full run: provenance, results with metrics and samples, verdicts, artifacts."""
        run_id = self.resolve(ref)
        with self._decoding(f"run {run_id}", [run_id]):
            return self._read_run(run_id)

    def _read_run(self, run_id: int) -> RunRecord:
        import numpy as np  # here, not at the top: writing a run (ingest) needs no numpy (~0.1 s)

        with self._lock:
            conn = self._conn
            row = conn.execute(_RUN_SELECT + " WHERE r.id=?", (run_id,)).fetchone()
            counts = self._verdict_counts([run_id])
            samples = {
                metric_id: tuple(np.frombuffer(blob, dtype="<f8").tolist())
                for metric_id, blob in conn.execute(
                    "SELECT s.metric_id, s.data FROM sample s JOIN metric m ON m.id=s.metric_id"
                    " JOIN test_result t ON t.id=m.result_id WHERE t.run_id=?",
                    (run_id,),
                )
            }
            metrics: dict[int, list[Metric]] = {}
            for metric_id, result_id, name, value, unit, direction in conn.execute(
                "SELECT m.id, m.result_id, m.name, m.value, m.unit, m.direction FROM metric m"
                " JOIN test_result t ON t.id=m.result_id WHERE t.run_id=? ORDER BY m.id",
                (run_id,),
            ):
                metrics.setdefault(result_id, []).append(
                    Metric(
                        name=name,
                        value=float("nan") if value is None else value,
                        unit=unit,
                        direction=Direction(direction),
                        samples=samples.get(metric_id, ()),
                    )
                )
            results = tuple(
                TestResult(
                    name=name,
                    tool=tool,
                    host=host,
                    status=Status(status),
                    reason=reason,
                    argv=tuple(json.loads(argv)),
                    started_at=started_at,
                    duration_s=duration_s,
                    raw_output=raw_output,
                    ranks=per_rank,
                    params=rest,
                    metrics=tuple(metrics.get(rid, ())),
                )
                for rid, name, tool, host, status, reason, argv, started_at, duration_s, raw_output, params in conn.execute(
                    "SELECT id, name, tool, host, status, reason, argv, started_at, duration_s, raw_output, params"
                    " FROM test_result WHERE run_id=? ORDER BY id",
                    (run_id,),
                )
                for per_rank, rest in [ranks.from_params(json.loads(params))]
            )
            verdicts = tuple(
                Verdict(
                    test=v[0],
                    metric=v[1],
                    host=v[2],
                    outcome=Outcome(v[3]),
                    measured=v[4],
                    expected=v[5],
                    direction=Direction(v[6]),
                    margin=v[7],
                    reason=v[8],
                    warnings=tuple(json.loads(v[9])),
                    unit=v[10],
                    passed_repeats=v[11],
                    total_repeats=v[12],
                    source=v[13],
                )
                for v in conn.execute(
                    "SELECT test, metric, host, outcome, measured, expected, direction, margin, reason, warnings,"
                    " unit, passed_repeats, total_repeats, source FROM verdict WHERE run_id=? ORDER BY id",
                    (run_id,),
                )
            )
            artifacts = dict(conn.execute("SELECT name, content FROM artifact WHERE run_id=? ORDER BY name", (run_id,)))
        return _run_record(row, counts.get(run_id, {}), results=results, verdicts=verdicts, artifacts=artifacts)

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        """The newest ``limit`` runs, newest first, with counts but without results (fast)."""
        with self._lock:
            rows = self._conn.execute(_RUN_SELECT + " ORDER BY r.id DESC LIMIT ?", (limit,)).fetchall()
            counts = self._verdict_counts([row[0] for row in rows])
        with self._decoding("the run list", [row[0] for row in rows], tables=("run",)):  # the list reads runs only
            return [_run_record(row, counts.get(row[0], {})) for row in rows]

    def _verdict_counts(self, run_ids: Sequence[int]) -> dict[int, dict[str, int]]:
        """run id -> outcome -> count, for ``run_ids`` (called under the lock)."""
        out: dict[int, dict[str, int]] = {}
        for start in range(0, len(run_ids), _MAX_PARAMS):
            chunk = list(run_ids[start : start + _MAX_PARAMS])
            marks = ", ".join("?" * len(chunk))
            for run_id, outcome, n in self._conn.execute(
                f"SELECT run_id, outcome, COUNT(*) FROM verdict WHERE run_id IN ({marks}) GROUP BY run_id, outcome",
                chunk,
            ):
                out.setdefault(int(run_id), {})[outcome] = int(n)
        return out


_NUMBER = "typeof({c}) IN ('integer', 'real')"
_NUMBER_OR_NULL = "typeof({c}) IN ('integer', 'real', 'null')"
_JSON = "json_valid({c})"
_JSON_OR_NULL = "({c} IS NULL OR json_valid({c}))"
#: (table, column, SQL test every row must pass): what gpufabric writes in each column.
_DAMAGE_CHECKS = (
    ("run", "started_at", _NUMBER),
    ("run", "finished_at", _NUMBER_OR_NULL),
    ("run", "argv", _JSON),
    ("run", "fingerprint", _JSON),
    ("run", "plan", _JSON_OR_NULL),
    ("run", "meta", _JSON),
    ("run", "status", "{c} IN (" + ", ".join(f"'{s.value}'" for s in RunStatus) + ")"),
    ("test_result", "started_at", _NUMBER),
    ("test_result", "duration_s", _NUMBER),
    ("test_result", "argv", _JSON),
    ("test_result", "params", _JSON),
    ("test_result", "status", "{c} IN (" + ", ".join(f"'{s.value}'" for s in Status) + ")"),
    ("metric", "value", _NUMBER_OR_NULL),
    ("metric", "direction", "{c} IN (" + ", ".join(f"'{d.value}'" for d in Direction) + ")"),
    ("verdict", "measured", _NUMBER_OR_NULL),
    ("verdict", "expected", _NUMBER_OR_NULL),
    ("verdict", "margin", _NUMBER_OR_NULL),
    ("verdict", "passed_repeats", _NUMBER),
    ("verdict", "total_repeats", _NUMBER),
    ("verdict", "warnings", _JSON),
    ("verdict", "outcome", "{c} IN (" + ", ".join(f"'{o.value}'" for o in Outcome) + ")"),
    ("verdict", "direction", "{c} IN (" + ", ".join(f"'{d.value}'" for d in Direction) + ")"),
)
_DAMAGE_SCOPE = {
    "run": "x.id IN ({marks})",
    "test_result": "x.run_id IN ({marks})",
    "verdict": "x.run_id IN ({marks})",
    "metric": "x.result_id IN (SELECT id FROM test_result WHERE run_id IN ({marks}))",
}

_RUN_SELECT = (
    "SELECT r.id, r.kind, r.status, r.started_at, r.finished_at, r.argv, r.fingerprint, r.spec_name, r.plan, r.meta,"
    " r.gpufabric_version,"
    " (SELECT COUNT(*) FROM test_result t WHERE t.run_id=r.id),"
    " r.duration_s, r.cluster, r.hosts, r.job_id"
    " FROM run r"
)


def _run_record(row: tuple, verdict_counts: dict[str, int], **loaded: Any) -> RunRecord:
    (
        run_id,
        kind,
        status,
        started_at,
        finished_at,
        argv,
        fingerprint,
        spec_name,
        plan,
        meta,
        version,
        n_results,
        duration_s,
        cluster,
        hosts,
        job_id,
    ) = row
    return RunRecord(
        id=run_id,
        kind=kind,
        status=RunStatus(status),
        started_at=started_at,
        finished_at=finished_at,
        argv=tuple(json.loads(argv)),
        fingerprint=json.loads(fingerprint),
        spec_name=spec_name,
        plan=None if plan is None else json.loads(plan),
        meta=json.loads(meta),
        gpufabric_version=version,
        result_count=n_results,
        verdict_counts=verdict_counts,
        duration_s=duration_s,
        cluster=cluster,
        hosts=tuple(str(h) for h in json.loads(hosts)),
        job_id=job_id,
        **loaded,
    )
