"""The ``gpufabric`` command's entry: the console script and ``python -m gpufabric``.

Importing this module runs nothing (the console script imports it, then calls
:func:`main`); a program importing the library never reaches it, so its SIGINT handling is
left alone.
"""


def main() -> None:
    """Ctrl-C exits quietly while the command imports, then the CLI runs (never returns)."""
    paused = pause_collector()
    quiet_until_started()
    from gpufabric.cli.app import run

    run(collector_paused=paused)


def pause_collector() -> bool:
    """Switch the cyclic garbage collector off for the imports; True if this did it.

    Start-up creates ~10^5 long-lived objects (modules, classes, pydantic validators), and
    each allocation threshold crossed runs a collection over them that finds nothing to
    free: ~0.05 s of a `plan`'s ~0.4 s CPU (issue 32, docs/performance.md). The CLI
    (cli/app.py ``_resume_collector``) moves what start-up made to the permanent
    generation (``gc.freeze``) and switches the collector back on before the command runs.
    """
    import gc

    if not gc.isenabled():  # an embedding program's choice: left as it is
        return False
    gc.disable()
    return True


def quiet_until_started() -> None:
    """Ctrl-C while the command line tool is still importing exits 130 without a traceback.

    ``gpufabric.cli.app`` hands Ctrl-C back to Python (KeyboardInterrupt) once its own
    error boundary is in place and the command's models are built (``_end_startup``): a
    KeyboardInterrupt raised inside an import or a pydantic-core build callback is written
    off ("Exception ignored") and the command would go on. A handler that an embedding
    program set is kept.
    """
    # _signal, not signal: the Python module takes milliseconds to import (an enum build),
    # which would itself be a window for a traceback.
    import _signal  # type: ignore[import-not-found]  # typeshed has no stub for the C module behind signal
    import os

    if _signal.getsignal(_signal.SIGINT) is not _signal.default_int_handler:
        return

    def interrupted(signum: int, frame: object) -> None:
        os.write(2, b"gpufabric: interrupted\n")
        os._exit(130)

    interrupted.gpufabric_startup = True  # type: ignore[attr-defined]  # app._end_startup looks for it
    _signal.signal(_signal.SIGINT, interrupted)


if __name__ == "__main__":
    main()
