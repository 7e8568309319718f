"""Command-line interface: the only place that prints or exits."""
