"""Hypothesis strategies that mutate the shipped examples into hostile inputs (issue 9 item 9).

Reusable by every fuzz test (plan, simulate, ingest here; config in its own module):

* :func:`hostile_values` - the values a careless or hostile user writes: wrong types,
  out-of-range and non-finite numbers, huge integers, unicode, newlines, shell and nft
  metacharacters, path traversal.
* :func:`mutated_spec` - a shipped example with one to three fields replaced, deleted or
  added, as a dict; :func:`spec_text` renders it as YAML, sometimes with raw-text damage
  (an alias bomb, a non-UTF-8 byte, truncation).
* :func:`mutated_tool_output` - an authentic tool output from ``tests/data`` with JSON
  values mutated or text damaged, for ``ingest``.
* :func:`json_numbers_finite` - the invariant every JSON document gpufabric prints obeys.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
DATA = ROOT / "tests" / "data"

#: Strings that mean something to a shell, nftables, OpenSM, YAML or a path resolver.
METACHARACTERS = (
    "$(id)",
    "`id`",
    "; touch /tmp/sf-pwned",
    "a\nb",
    "a\r\nb",
    '"; drop',
    "'",
    "\\",
    "${IFS}",
    "|",
    "&&",
    "} accept; {",
    "# comment",
    "@set",
    '"quoted"',
    "../",
    "../../etc/passwd",
    "/etc/shadow",
    "a/b",
    ".",
    "..",
    "",
    " ",
    "\t",
    "\x00",
    "\x1b[31m",
    "-rf",
    "--help",
    "*",
    "?",
    "~root",
    "%n%s",
    "{{ 7*7 }}",
    "{% raw %}",
    "nqn.2014-08.org.nvmexpress:uuid:$(id)",
    "mlx5_0:1;id",
    "eth0:1",
    "x" * 300,
)
UNICODE = ("ünïcødé", "名前", "\u202e", "\ufeff", "e\u0301", "🙂", "\u2028", "Ⅻ")
NUMBERS = (
    math.nan,
    math.inf,
    -math.inf,
    0,
    -1,
    -0.0,
    1e-320,
    1e308,
    10**30,
    -(10**30),
    2**63,
    2**64 + 1,
    0.5,
    1.5,
    True,
    False,
)


def hostile_values() -> st.SearchStrategy[Any]:
    """A single hostile scalar, list or mapping."""
    scalars = st.one_of(
        st.sampled_from(METACHARACTERS),
        st.sampled_from(UNICODE),
        st.sampled_from(NUMBERS),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=40),
        st.none(),
    )
    return st.one_of(
        scalars,
        st.lists(scalars, max_size=4),
        st.dictionaries(st.sampled_from(["name", "x", "hosts", "../k", "$(id)"]), scalars, max_size=3),
    )


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path in a YAML document (mappings and lists), leaves and inner nodes."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            out += _paths(value, (*prefix, index))
    return out


def _set(doc: Any, path: tuple, value: Any, *, delete: bool = False) -> None:
    for part in path[:-1]:
        doc = doc[part]
    if delete:
        del doc[path[-1]]
    else:
        doc[path[-1]] = value


def load_example(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


#: Field paths that reach artefacts or file names; mutated more often than the rest.
SECURITY = {
    "planes": [
        {"name": "mgmt", "kind": "management", "cidr": "10.10.0.0/24", "interface": "mgmt0"},
        {"name": "data", "kind": "compute-data", "cidr": "10.30.0.0/24", "interface": "data0", "hcas": ["mlx5_0:1"]},
        {"name": "stor", "kind": "storage", "cidr": "10.40.0.0/24", "interface": "stor0", "pkey": 64},
    ],
    "roles": [
        {"name": "compute", "kind": "compute", "hosts": ["node-1", "node-2"]},
        {"name": "storage", "kind": "storage", "count": 1},
    ],
    "flows": [
        {"src": "compute", "dst": "storage", "plane": "stor", "proto": "tcp", "ports": [4420], "purpose": "NVMe/TCP"},
    ],
}


@st.composite
def mutated_spec(draw: st.DrawFn, *, max_mutations: int = 3) -> dict:
    """A shipped example (sometimes with a security section) with 1-3 hostile mutations."""
    doc = load_example(draw(st.sampled_from(EXAMPLES)))
    if draw(st.booleans()):
        doc["security"] = json.loads(json.dumps(SECURITY))
    for _ in range(draw(st.integers(min_value=1, max_value=max_mutations))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add"]))
        if action == "delete":
            _set(doc, path, None, delete=True)
        elif action == "add":
            parent = doc
            for part in path[:-1]:
                parent = parent[part]
            if isinstance(parent, dict):
                parent[draw(st.sampled_from(["description", "extra", "hosts", "$(id)"]))] = draw(hostile_values())
            else:
                _set(doc, path, draw(hostile_values()))
        else:
            _set(doc, path, draw(hostile_values()))
    return doc


def _dump(doc: Any) -> str:
    # allow_unicode: the YAML carries the characters themselves, as a user's editor would.
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)


BOMB = "".join(
    f"{chr(97 + i)}: &{chr(97 + i)} [{', '.join([f'*{chr(96 + i)}'] * 10) if i else 'x, x, x, x, x'}]\n"
    for i in range(9)
)


@st.composite
def spec_bytes(draw: st.DrawFn) -> bytes:
    """A mutated spec as file bytes, sometimes with raw-text damage on top."""
    text = _dump(draw(mutated_spec()))
    damage = draw(st.sampled_from(["none", "none", "none", "bomb", "latin1", "truncate", "tabs", "dup"]))
    if damage == "bomb":
        text = BOMB + text
    elif damage == "latin1":
        return text.encode() + b"\ndescription: caf\xe9\n"
    elif damage == "truncate":
        text = text[: draw(st.integers(min_value=0, max_value=len(text)))]
    elif damage == "tabs":
        text = text.replace("  ", "\t", 1)
    elif damage == "dup":
        text += text.splitlines()[0] + "\n" if text else ""
    return text.encode("utf-8", errors="surrogatepass")


#: (tool, sample file) pairs ingest accepts, from authentic captured outputs.
TOOL_SAMPLES = tuple(
    (tool, path)
    for tool, pattern in (
        ("fio", "fio/*.json"),
        ("iperf3", "iperf3/*.json"),
        ("perftest", "perftest/*.json"),
        ("nccl-tests", "nccl-tests/*.json"),
        ("nccl-tests", "nccl-tests/*.txt"),
        ("sockperf", "sockperf/pingpong_*.txt"),
    )
    for path in sorted(DATA.glob(pattern))
)


@st.composite
def mutated_tool_output(draw: st.DrawFn, *, json_values: bool = True, text: bool = True) -> tuple[str, bytes]:
    """(tool, file bytes): an authentic output with JSON values (any type) or text lines mutated."""
    tool, path = draw(st.sampled_from(TOOL_SAMPLES))
    raw = path.read_bytes()
    if path.suffix == ".json" and json_values and (not text or draw(st.booleans())):
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        if doc is not None:
            for _ in range(draw(st.integers(min_value=1, max_value=3))):
                paths = _paths(doc)
                if not paths:
                    break
                _set(doc, draw(st.sampled_from(paths)), draw(hostile_values()))
            return tool, json.dumps(doc, default=str).encode()
    text = raw.decode("utf-8", errors="replace")
    lines = text.splitlines(keepends=True) or [""]
    index = draw(st.integers(min_value=0, max_value=len(lines) - 1))
    word = str(draw(st.sampled_from((*METACHARACTERS, *UNICODE, "nan", "inf", "-1", "1e999", "N/A"))))
    action = draw(st.sampled_from(["insert", "replace", "truncate", "number"]))
    if action == "insert":
        lines.insert(index, word + "\n")
    elif action == "replace":
        lines[index] = word + "\n"
    elif action == "truncate":
        lines = lines[:index]
    else:
        parts = lines[index].split()
        if parts:
            parts[draw(st.integers(min_value=0, max_value=len(parts) - 1))] = word
            lines[index] = " ".join(parts) + "\n"
    return tool, "".join(lines).encode("utf-8", errors="surrogatepass")


def json_numbers_finite(text: str) -> bool:
    """True when ``text`` is JSON whose every number is finite (no NaN/Infinity tokens)."""

    def refuse(token: str) -> float:
        raise ValueError(f"non-finite number {token} in JSON output")

    doc = json.loads(text, parse_constant=refuse)

    def walk(value: Any) -> bool:
        if isinstance(value, float):
            return math.isfinite(value)
        if isinstance(value, dict):
            return all(walk(v) for v in value.values())
        if isinstance(value, list):
            return all(walk(v) for v in value)
        return True

    return walk(doc)
