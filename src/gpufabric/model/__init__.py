"""Analytic models (formulas and sources: docs/models.md): collectives, topology, step, tail, storage,
reliability, cost."""
