"""gpufabric: plan, simulate, configure, secure and validate GPU-cluster fabrics."""

__version__ = "0.1.0"

#: Version of every machine-readable artefact gpufabric writes (JSON output, result
#: store, manifests). Bump when a key is renamed or removed; adding keys is free.
SCHEMA_VERSION = 1


def _exit_quietly_on_early_interrupt() -> None:
    """Ctrl-C while the command line tool is still importing exits 130 without a traceback.

    Only for the ``gpufabric`` command (console script or ``python -m gpufabric``), never
    for a program importing the library; ``gpufabric.cli.app.main`` restores Python's
    handler once its own error boundary is in place.
    """
    # _signal, not signal: the Python module takes milliseconds to import (an enum build),
    # which would itself be a window for a traceback.
    import _signal  # type: ignore[import-not-found]  # typeshed has no stub for the C module behind signal
    import os
    import sys

    # The console script (argv[0] .../gpufabric) or `python -m gpufabric` exactly: not
    # `python -m gpufabric.bench.probes.worker`, whose ranks handle SIGINT themselves.
    orig = list(getattr(sys, "orig_argv", ()))
    run_as_module = "-m" in orig and orig[orig.index("-m") + 1 :][:1] == ["gpufabric"]
    script = bool(sys.argv) and os.path.basename(sys.argv[0]) == "gpufabric"
    if not (run_as_module or script) or _signal.getsignal(_signal.SIGINT) is not _signal.default_int_handler:
        return

    def interrupted(signum: int, frame: object) -> None:
        os.write(2, b"gpufabric: interrupted\n")
        os._exit(130)

    _signal.signal(_signal.SIGINT, interrupted)
    sys.modules[__name__].__dict__["_startup_sigint_handler"] = interrupted


_startup_sigint_handler = None
_exit_quietly_on_early_interrupt()
