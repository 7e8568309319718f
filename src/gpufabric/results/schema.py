"""Schema of the results store and the migrations that bring an older file up to date.

A store file carries its version in ``meta.schema_version``. ``MIGRATIONS[i]`` takes a
file from version ``i`` to ``i + 1``; a file with no ``meta`` table is version 0 (empty
or never initialised). Migrations only ever append: a released step is never edited,
because files in the field were written by it.

History:
    v1  run, test_result, metric (raw samples inline as JSON text), verdict, artifact.
    v2  samples move to ``sample`` as a float64 BLOB (8 bytes a value instead of ~20
        characters of JSON; a 1M-sample latency log is 8 MB, not 20), and verdicts
        gain unit, k-of-n repeat counts and the SLO source.
    v3  runs gain ``duration_s`` (finish - start, NULL until finished), ``cluster``,
        ``hosts`` (JSON list of the hosts the run measured) and ``job_id`` (Slurm or
        Kubernetes job), so reports and CI can say where and how long.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpufabric.results.sqlconn import SqlConnection

_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE run (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL,
    argv TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    spec_name TEXT NOT NULL DEFAULT '',
    plan TEXT,
    meta TEXT NOT NULL DEFAULT '{}',
    gpufabric_version TEXT NOT NULL DEFAULT ''
);
CREATE TABLE test_result (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    tool TEXT NOT NULL,
    host TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    argv TEXT NOT NULL DEFAULT '[]',
    started_at REAL NOT NULL DEFAULT 0,
    duration_s REAL NOT NULL DEFAULT 0,
    raw_output TEXT NOT NULL DEFAULT '',
    params TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX test_result_run ON test_result(run_id);
CREATE TABLE metric (
    id INTEGER PRIMARY KEY,
    result_id INTEGER NOT NULL REFERENCES test_result(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    value REAL,
    unit TEXT NOT NULL,
    direction TEXT NOT NULL,
    samples TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX metric_result ON metric(result_id);
CREATE TABLE verdict (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    test TEXT NOT NULL,
    metric TEXT NOT NULL,
    host TEXT NOT NULL,
    outcome TEXT NOT NULL,
    measured REAL,
    expected REAL,
    direction TEXT NOT NULL,
    margin REAL,
    reason TEXT NOT NULL DEFAULT '',
    warnings TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX verdict_run ON verdict(run_id);
CREATE TABLE artifact (
    run_id INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    content TEXT NOT NULL,
    PRIMARY KEY (run_id, name)
);
"""


def _v0_to_v1(conn: SqlConnection) -> None:
    # Statement by statement: executescript() would COMMIT and break the migration's transaction.
    for statement in _V1.split(";"):
        if statement.strip():
            conn.execute(statement)


def _v1_to_v2(conn: SqlConnection) -> None:
    conn.execute(
        "CREATE TABLE sample (metric_id INTEGER PRIMARY KEY REFERENCES metric(id) ON DELETE CASCADE,"
        " count INTEGER NOT NULL, data BLOB NOT NULL)"
    )
    rows = conn.execute("SELECT id, samples FROM metric WHERE samples != '[]'").fetchall()
    if rows:  # imported only for samples to move: a new store (every first ingest) needs no numpy (~0.1 s)
        import numpy as np

        for metric_id, text in rows:
            values = np.asarray(json.loads(text), dtype="<f8")
            conn.execute("INSERT INTO sample VALUES (?, ?, ?)", (metric_id, len(values), values.tobytes()))
    # SQLite >= 3.35 drops columns in place; the samples now live in `sample`.
    conn.execute("ALTER TABLE metric DROP COLUMN samples")
    conn.execute("ALTER TABLE verdict ADD COLUMN unit TEXT NOT NULL DEFAULT ''")
    conn.execute("ALTER TABLE verdict ADD COLUMN passed_repeats INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE verdict ADD COLUMN total_repeats INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE verdict ADD COLUMN source TEXT NOT NULL DEFAULT ''")


def _v2_to_v3(conn: SqlConnection) -> None:
    conn.execute("ALTER TABLE run ADD COLUMN duration_s REAL")
    conn.execute("ALTER TABLE run ADD COLUMN cluster TEXT NOT NULL DEFAULT ''")
    conn.execute("ALTER TABLE run ADD COLUMN hosts TEXT NOT NULL DEFAULT '[]'")
    conn.execute("ALTER TABLE run ADD COLUMN job_id TEXT NOT NULL DEFAULT ''")
    # Finished runs of older versions: their duration is already in the row.
    conn.execute("UPDATE run SET duration_s = finished_at - started_at WHERE finished_at IS NOT NULL")


#: MIGRATIONS[i] takes a store from version i to i + 1.
MIGRATIONS: tuple[Callable[[SqlConnection], None], ...] = (_v0_to_v1, _v1_to_v2, _v2_to_v3)

#: The version this code writes.
STORE_SCHEMA_VERSION = len(MIGRATIONS)


_SET_META = "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"


def read_version(conn: SqlConnection) -> int:
    """The schema version of an open store; 0 when it has never been initialised."""
    if not conn.table_exists("meta"):
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: SqlConnection, *, target: int = STORE_SCHEMA_VERSION, writer: str = "") -> int:
    """Apply the missing migrations up to ``target`` in one transaction; returns the old version.

    ``conn`` must be in autocommit mode (``isolation_level=None``): the transaction is
    explicit so that DDL and data moves commit together, and a crash mid-migration
    leaves the file at its old version. It holds the store's write lock (SQLite's, or the
    PostgreSQL advisory lock, ``sqlconn``), so two first opens never both migrate.
    """
    conn.begin_write(conn)
    try:
        old = read_version(conn)  # re-read under the write lock: another process may have migrated
        for step in MIGRATIONS[old:target]:
            step(conn)
        if old < target:
            conn.execute(_SET_META, ("schema_version", str(target)))
            if writer:
                conn.execute(_SET_META, ("migrated_by", writer))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return old
