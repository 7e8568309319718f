"""One SQL code path for the results store over SQLite (a file) and PostgreSQL (a fleet's server).

The store and its migrations write SQL once, in the subset both engines run: ``?``
placeholders, ``INSERT ... ON CONFLICT (...) DO UPDATE`` upserts, ``RETURNING id``
(SQLite >= 3.35), SQLite's type names in DDL. :class:`PgConnection` translates the few
differences on the way to psycopg 3 (``%s`` placeholders; ``BIGINT``/``DOUBLE PRECISION``/
``BYTEA``; ids as identity columns) and gives PostgreSQL SQLite's write discipline: a
write transaction holds one advisory lock, as ``BEGIN IMMEDIATE`` holds SQLite's write lock,
so concurrent writers (many CI runners ingesting into one history) queue instead of
colliding on the ids ``add_results`` assigns inside the transaction.

A ``postgresql://`` (or ``postgres://``) URL selects PostgreSQL; its credentials come from
the URL, ``PGPASSWORD``/``PGPASSFILE`` (``~/.pgpass``) or a libpq service file
(``postgresql:///?service=NAME``), as libpq reads them; :func:`display_name` strips the
password from every message.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from gpufabric.errors import EnvironmentFailure

URL_SCHEMES = ("postgresql://", "postgres://")
#: Key of the advisory lock every PostgreSQL write transaction holds (any constant: the
#: store's writers only have to agree on it). ASCII "gpufabri".
WRITE_LOCK_KEY = 0x67707566616272


#: Filesystem types of /proc/mounts that are shared over a network. SQLite's WAL keeps its
#: index in shared memory that only processes of one host share: "WAL does not work over
#: a network filesystem" (https://www.sqlite.org/wal.html, "Disadvantages").
NETWORK_FILESYSTEMS = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "lustre", "gpfs", "beegfs", "afs", "9p",
        "fuse.sshfs", "fuse.glusterfs", "fuse.s3fs", "fuse.juicefs", "fuse.gcsfuse", "fuse.ceph",
    }
)  # fmt: skip


def network_filesystem(path: str | os.PathLike[str], mounts: str | None = None) -> str | None:
    """The network filesystem type ``path`` lives on (``nfs4``, ``lustre``, ...), or None.

    ``mounts``: the text of /proc/mounts (read when None; None where it cannot be read).
    """
    if mounts is None:
        try:
            with open("/proc/mounts", encoding="utf-8", errors="replace") as fh:
                mounts = fh.read(1 << 20)
        except OSError:
            return None
    where = os.path.realpath(os.fspath(path))
    best, best_type = "", ""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = where == point or where.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best):
            best, best_type = point, fields[2]
    return best_type if best_type in NETWORK_FILESYSTEMS else None


class DatabaseUnavailable(EnvironmentFailure):
    """The results server cannot be reached or refused the connection."""


def is_url(target: str) -> bool:
    return target.startswith(URL_SCHEMES)


def display_name(target: str) -> str:
    """``target`` as messages show it: a URL without its password."""
    if not is_url(target):
        return target
    parts = urlsplit(target)
    if parts.password is None:
        return target
    host = parts.hostname or ""
    netloc = f"{parts.username}@{host}" if parts.username else host
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class SqliteConnection:
    """The store's view of a sqlite3 connection (autocommit mode: transactions are explicit)."""

    dialect = "sqlite"
    write_errors: tuple[type[BaseException], ...] = (sqlite3.OperationalError, sqlite3.DatabaseError, OSError)
    integrity_errors: tuple[type[BaseException], ...] = (sqlite3.IntegrityError,)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.raw = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.raw.execute(sql, params)

    def cursor(self) -> Any:
        return self.raw.cursor()

    def begin_write(self, cur: Any) -> None:
        cur.execute("BEGIN IMMEDIATE")

    @property
    def in_transaction(self) -> bool:
        return self.raw.in_transaction

    def table_exists(self, name: str) -> bool:
        return (
            self.raw.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone()
            is not None
        )

    def close(self) -> None:
        self.raw.close()


_PG_TYPES = (
    # Autoincrementing ids (run, verdict) become identity columns; explicit ids (add_results
    # assigns test_result and metric ids itself) are still accepted BY DEFAULT.
    (re.compile(r"\bid INTEGER PRIMARY KEY\b"), "id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    (re.compile(r"\bINTEGER\b"), "BIGINT"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    (re.compile(r"\bBLOB\b"), "BYTEA"),
)


@functools.lru_cache(maxsize=512)
def pg_sql(sql: str) -> str:
    """The store's SQL as PostgreSQL runs it (cached: the store runs a few dozen distinct statements)."""
    if sql.lstrip().upper().startswith(("CREATE", "ALTER")):
        for pattern, replacement in _PG_TYPES:
            sql = pattern.sub(replacement, sql)
    # The store's statements hold no '?' or '%' other than placeholders (no LIKE, no quoted
    # text with either), so placeholders map one to one.
    return sql.replace("?", "%s")


class _PgCursor:
    def __init__(self, cur: Any, name: str) -> None:
        self._cur, self._name = cur, name

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _PgCursor:
        with self._lost():
            self._cur.execute(pg_sql(sql), tuple(params))
        return self

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._lost():
            self._cur.executemany(pg_sql(sql), rows)

    @contextlib.contextmanager
    def _lost(self) -> Iterator[None]:
        """A server gone mid-command (restart, network, idle timeout) is the environment's failure."""
        import psycopg

        try:
            yield
        except psycopg.OperationalError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DatabaseUnavailable(f"{self._name}: lost the connection: {first}") from None

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cur.fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cur)


class PgConnection:
    """The store's view of a psycopg 3 connection (autocommit: transactions are explicit)."""

    dialect = "postgresql"

    def __init__(self, conn: Any, name: str) -> None:
        import psycopg

        self.raw, self.name = conn, name
        self._idle = psycopg.pq.TransactionStatus.IDLE
        self.write_errors: tuple[type[BaseException], ...] = (
            DatabaseUnavailable,
            psycopg.OperationalError,
            psycopg.DataError,
            OSError,
        )
        self.integrity_errors: tuple[type[BaseException], ...] = (psycopg.IntegrityError,)

    @classmethod
    def connect(cls, url: str) -> PgConnection:
        try:
            import psycopg
        except ImportError as exc:
            raise DatabaseUnavailable(
                f"{display_name(url)}: a PostgreSQL store needs psycopg 3 (pip install 'gpufabric[fleet]')"
            ) from exc
        try:
            conn = psycopg.connect(url, autocommit=True, connect_timeout=10, application_name="gpufabric")
        except psycopg.Error as exc:
            # libpq's message names host and user, never the password.
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DatabaseUnavailable(f"{display_name(url)}: cannot connect: {first}") from None
        return cls(conn, display_name(url))

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _PgCursor:
        return self.cursor().execute(sql, params)

    def cursor(self) -> _PgCursor:
        return _PgCursor(self.raw.cursor(), self.name)

    def begin_write(self, cur: Any) -> None:
        cur.execute("BEGIN")
        cur.execute("SELECT pg_advisory_xact_lock(?)", (WRITE_LOCK_KEY,))

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != self._idle

    def table_exists(self, name: str) -> bool:
        # pg_tables through the statement's snapshot, not to_regclass: its catalog cache may
        # not yet see a table another writer committed while this one waited for the lock.
        row = self.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = ?)",
            (name,),
        ).fetchone()
        return bool(row[0])

    def close(self) -> None:
        self.raw.close()


SqlConnection = SqliteConnection | PgConnection
