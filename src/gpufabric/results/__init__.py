"""Results: records, the SQLite store, statistics, SLO verdicts and comparison."""
