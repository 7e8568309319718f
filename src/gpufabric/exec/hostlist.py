"""Host names of the allocation a launch runs in: Slurm hostlists, PBS node files, MPI hostfiles.

``expand_hostlist`` follows Slurm's own expansion (``scontrol show hostnames``, src/common/
hostlist.c, as_of slurm-wlm 22.05): top-level commas separate entries, a bracket holds
comma-separated numbers and ``lo-hi`` ranges whose zero padding is the width of ``lo``, and
several brackets in one entry multiply (``r[1-2]n[1-2]`` -> r1n1 r1n2 r2n1 r2n2). PBS/Torque
writes ``$PBS_NODEFILE`` with one line per slot (the same host repeated); an Open MPI
hostfile has ``NAME [slots=N]`` lines and ``#`` comments (mpirun(1), "Specifying Hosts").

Every name is checked against the same host-name pattern as ``--hosts`` (it reaches mpirun
and ssh as an argument), and expansions are capped so a hostile ``[0-999999999]`` cannot
exhaust memory.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpufabric.errors import InputError

#: The most hosts one allocation may expand to (Slurm's MAX_SLURM_NODES is 100k; a fleet
#: of 64k nodes is already beyond any single training job today).
MAX_HOSTS = 65_536
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


def valid_hostname(name: str) -> bool:
    """An RFC 1123 host name: never starts with '-', so it cannot become an option."""
    return len(name) <= 253 and bool(_HOSTNAME.fullmatch(name))


@dataclass(frozen=True, slots=True, kw_only=True)
class Allocation:
    """The hosts a launch may use and where they were read from (for messages and records)."""

    hosts: tuple[str, ...]
    source: str  # "--hosts", "--hostfile PATH", "SLURM_JOB_NODELIST=gpu[07-08]", "PBS_NODEFILE=PATH"


def expand_hostlist(text: str, *, what: str = "hostlist") -> list[str]:
    """``gpu[07-08]`` -> ["gpu07", "gpu08"]; ``a[1-3,5],b01`` -> ["a1", "a2", "a3", "a5", "b01"]."""
    out: list[str] = []
    for entry in _split_top(text, what):
        names = [""]
        rest = entry
        while rest:
            head, bracket, tail = rest.partition("[")
            names = [n + head for n in names]
            if not bracket:
                break
            body, close, rest = tail.partition("]")
            if not close:
                raise InputError(f"{what} {text!r}: '[' without ']' in {entry!r}")
            numbers = _numbers(body, text, what)
            if len(names) * len(numbers) + len(out) > MAX_HOSTS:
                raise InputError(f"{what} {text!r}: expands to more than {MAX_HOSTS} hosts")
            names = [n + num for n in names for num in numbers]
        for name in names:
            if not valid_hostname(name):
                raise InputError(f"{what} {text!r}: {name!r} is not a host name")
        out += names
    if not out:
        raise InputError(f"{what} is empty")
    return out  # duplicates stay, as scontrol prints them (an allocation never has any)


def _split_top(text: str, what: str) -> list[str]:
    """Split at commas outside brackets."""
    entries, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise InputError(f"{what} {text!r}: nested '['")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise InputError(f"{what} {text!r}: ']' without '['")
        elif ch == "," and depth == 0:
            entries.append(text[start:i].strip())
            start = i + 1
    entries.append(text[start:].strip())
    return [e for e in entries if e]


def _numbers(body: str, text: str, what: str) -> list[str]:
    out: list[str] = []
    for part in body.split(","):
        m = _RANGE.fullmatch(part.strip())
        if not m:
            raise InputError(f"{what} {text!r}: {part!r} in brackets is not N or LO-HI")
        lo_text, hi_text = m.group(1), m.group(2) or m.group(1)
        lo, hi = int(lo_text), int(hi_text)
        if hi < lo:
            raise InputError(f"{what} {text!r}: range {part!r} runs backwards")
        if hi - lo + 1 + len(out) > MAX_HOSTS:
            raise InputError(f"{what} {text!r}: expands to more than {MAX_HOSTS} hosts")
        width = len(lo_text)  # Slurm pads to the width of the lower bound ("07-10" -> 07 08 09 10)
        out += [str(n).zfill(width) for n in range(lo, hi + 1)]
    return out


def read_pbs_nodefile(path: Path) -> list[str]:
    """Hosts of ``$PBS_NODEFILE`` in first-seen order (the file repeats a host once per slot)."""
    return _unique(_lines(path, "PBS_NODEFILE"), path, "PBS_NODEFILE")


def read_hostfile(path: Path) -> list[str]:
    """Hosts of an Open MPI hostfile (``NAME [slots=N] [max_slots=N]``, ``#`` comments)."""
    names = []
    for lineno, line in enumerate(_lines(path, "--hostfile"), 1):
        words = line.split()
        for word in words[1:]:
            key, eq, value = word.partition("=")
            if key not in ("slots", "max_slots", "max-slots") or not eq or not value.isdigit():
                raise InputError(f"{path}:{lineno}: {word!r}: a hostfile line is NAME [slots=N] [max_slots=N]")
        names.append((lineno, words[0]))
    return _unique([n for _, n in names], path, "--hostfile", linenos=[i for i, _ in names])


def _lines(path: Path, what: str) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot read it ({exc.strerror})") from exc
    return [s for s in (line.split("#", 1)[0].strip() for line in text.splitlines()) if s]


def _unique(names: list[str], path: Path, what: str, linenos: list[int] | None = None) -> list[str]:
    for i, name in enumerate(names):
        if not valid_hostname(name):
            where = f"{path}:{linenos[i]}" if linenos else f"{what} {path}"
            raise InputError(f"{where}: {name!r} is not a host name")
    if len(set(names)) > MAX_HOSTS:
        raise InputError(f"{what} {path}: more than {MAX_HOSTS} hosts")
    if not names:
        raise InputError(f"{what} {path} names no host")
    return list(dict.fromkeys(names))


def allocation(environ: Mapping[str, str]) -> Allocation | None:
    """The hosts of the Slurm or PBS allocation this process runs in, or None outside one."""
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if nodelist:
        return Allocation(
            hosts=tuple(expand_hostlist(nodelist, what="SLURM_JOB_NODELIST")),
            source=f"SLURM_JOB_NODELIST={nodelist}",
        )
    nodefile = environ.get("PBS_NODEFILE")
    if nodefile:
        return Allocation(hosts=tuple(read_pbs_nodefile(Path(nodefile))), source=f"PBS_NODEFILE={nodefile}")
    return None


if __name__ == "__main__":
    # `python -m gpufabric.exec.hostlist first LIST`: the first host, for shells without scontrol.
    if len(sys.argv) == 3 and sys.argv[1] in ("first", "all"):
        try:
            names = expand_hostlist(sys.argv[2])
        except InputError as exc:
            sys.exit(f"gpufabric: {exc}")
        sys.stdout.write("\n".join(names[:1] if sys.argv[1] == "first" else names) + "\n")
        sys.exit(0)
    sys.exit("usage: python -m gpufabric.exec.hostlist first|all HOSTLIST")
