"""Hostile reports for the fuzz tests: a committed report with one field at a time replaced by a value of the
wrong type, and whole files no report can be. The readers are run in this process through the CLI's `main`;
an exception that escapes it is a crash (a traceback for the user), anything else is an answer.

Run as a script to count crashes without pytest: `python tests/report_fuzz.py [loader|readers] [N]`.
"""
from __future__ import annotations

import contextlib
import io
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

ROOT = Path(__file__).resolve().parents[1]
# Found by name: results/ is being reorganised, the files keep their names.
BASE_NAME = "norm_modulate.h200.7a100a7.h3.plain.json"
PRIOR_ART_NAME = "norm_modulate.b200.prior-art.json"

# Text spliced into the JSON for values json.dumps cannot write (or writes too slowly) itself.
HUGE_INT = "9" * 5000
DEEP = "[" * 5000 + "]" * 5000
_PLACEHOLDER = "\u0001fuzz-{}\u0001"


def find_result(name: str) -> Path:
    return next((ROOT / "results").rglob(name))


def base_data() -> dict:
    return json.loads(find_result(BASE_NAME).read_text(encoding="utf-8"))


def _nested(depth: int) -> dict:
    value: object = 1.0
    for _ in range(depth):
        value = {"x": value}
    return value  # type: ignore[return-value]


# Every value a field is replaced by: each type JSON has, the edges of numbers, strings a renderer chokes on.
VALUES: dict[str, object] = {
    "null": None,
    "true": True,
    "string": "x",
    "mathtext": r"$\foo$ <b>&amp;</b> | `x` **y** [z](javascript:1)",
    "slashes": "a/../../b" + "/x" * 150,
    "long_word": "w" * 400_000,
    "negative": -1,
    "zero": 0,
    "int_2^70": 2 ** 70,
    "huge_int": _PLACEHOLDER.format("huge_int"),
    "float_max": 1.7976931348623157e308,
    "inf": float("inf"),
    "-inf": float("-inf"),
    "nan": float("nan"),
    "empty_dict": {},
    "empty_list": [],
    "list_of_str": ["x", "y"],
    "dict_nested_40": _nested(40),
    "deep_5000": _PLACEHOLDER.format("deep"),
}
_SPLICE = {json.dumps(_PLACEHOLDER.format("huge_int")): HUGE_INT, json.dumps(_PLACEHOLDER.format("deep")): DEEP}


def dumps(data: object) -> str:
    text = json.dumps(data, allow_nan=True)
    for placeholder, raw in _SPLICE.items():
        text = text.replace(placeholder, raw)
    return text


Path_ = tuple  # a path into the report: dict keys and list indexes


def field_paths(data: object, prefix: Path_ = (), list_items: int = 2) -> Iterator[Path_]:
    """Every dict, list and leaf of the report; of a list only its first `list_items` items (the samples'
    lists are long and alike)."""
    yield prefix
    if isinstance(data, dict):
        for key, value in data.items():
            yield from field_paths(value, prefix + (key,), list_items)
    elif isinstance(data, list):
        for i, value in enumerate(data[:list_items]):
            yield from field_paths(value, prefix + (i,), list_items)


def _replaced(data: object, path: Path_, value: object) -> object:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(data, dict):
        return {k: (_replaced(v, rest, value) if k == head else v) for k, v in data.items()}
    return [(_replaced(v, rest, value) if i == head else v) for i, v in enumerate(data)]  # type: ignore[union-attr]


@dataclass(frozen=True)
class Case:
    path: Path_
    label: str

    def text(self, data: dict) -> str:
        return dumps(_replaced(data, self.path, VALUES[self.label]))

    def __str__(self) -> str:
        return "/".join(map(str, self.path)) + f" := {self.label}"


def all_cases(data: dict) -> list[Case]:
    return [Case(p, label) for p in field_paths(data) for label in VALUES]


def sample(cases: list[Case], n: int, seed: int = 40) -> list[Case]:
    return random.Random(seed).sample(cases, min(n, len(cases)))


# Whole files that are no report: written by the caller under a temporary folder, each named as a report.
def whole_file_texts(data: dict) -> dict[str, str | bytes]:
    return {
        "deep_5000": DEEP,
        "deep_object_5000": '{"a":' * 5000 + "1" + "}" * 5000,
        "huge_int": HUGE_INT,
        "huge_int_field": dumps({**data, "wall_s": _PLACEHOLDER.format("huge_int")}),
        "nan_literal": json.dumps({**data, "wall_s": float("nan")}),
        "not_utf8": b"\xff\xfe{\"kind\": 1}",
        "empty": "",
        "list": "[]",
        "number": "1e400",
        "prior_art_no_version": json.dumps({k: v for k, v in data.items() if k != "schema_version"}),
    }


# --- running a case ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    code: Optional[int]  # None: an exception escaped (a crash)
    error: str = ""


def run_main(argv: list[str]) -> Outcome:
    """The CLI in this process, its output swallowed: the exit code, or the exception that escaped."""
    from adaln_bench.cli import main

    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            main(argv)
    except SystemExit as exc:
        return Outcome(exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1))
    except BaseException as exc:  # noqa: BLE001 - anything else is what the fuzz is looking for
        return Outcome(None, f"{type(exc).__name__}: {str(exc)[:200]}")
    return Outcome(0)


def check_loader(text: str, origin: str = "fuzz.json") -> Outcome:
    """The shared loader on a report's text: read (exit 0) or refused with a UserError (exit 2)."""
    from adaln_bench.errors import UserError
    from adaln_bench.datamodel.io import parse_report

    try:
        parse_report(text, origin)
    except UserError as exc:
        if "\n" in str(exc):
            return Outcome(None, f"a message of several lines: {str(exc)[:200]}")
        return Outcome(2)
    except BaseException as exc:  # noqa: BLE001
        return Outcome(None, f"{type(exc).__name__}: {str(exc)[:200]}")
    return Outcome(0)


# Each reader as argv, given the mutated report's path, a sound report of the same operator and a folder to
# write in. `plot` and `publish` write there; the others only print.
READERS: dict[str, Callable[[Path, Path, Path], list[str]]] = {
    "report": lambda bad, good, tmp: ["report", str(bad)],
    "report --markdown": lambda bad, good, tmp: ["report", "--markdown", str(bad)],
    "diff": lambda bad, good, tmp: ["diff", str(good), str(bad)],
    "diff --json": lambda bad, good, tmp: ["diff", "--json", str(bad), str(good)],
    "diff --markdown": lambda bad, good, tmp: ["diff", "--markdown", str(good), str(bad)],
    "fidelity": lambda bad, good, tmp: ["fidelity", str(find_result(PRIOR_ART_NAME)), str(bad)],
    "plot": lambda bad, good, tmp: ["plot", str(bad), str(good), "--out", str(tmp / "p.png")],
    "publish": lambda bad, good, tmp: ["publish", str(bad), str(good), "--out", str(tmp / "site")],
}
ANSWERS = (0, 1, 2, 3)


def run_reader(reader: str, text: str | bytes, tmp: Path) -> Outcome:
    bad = tmp / "report.json"
    if isinstance(text, bytes):
        bad.write_bytes(text)
    else:
        bad.write_text(text, encoding="utf-8")
    good = tmp / "sound" / BASE_NAME
    if not good.exists():
        good.parent.mkdir(exist_ok=True)
        good.write_bytes(find_result(BASE_NAME).read_bytes())
    outcome = run_main(READERS[reader](bad, good, tmp))
    if outcome.code is not None and outcome.code not in ANSWERS:
        return Outcome(None, f"exit {outcome.code}")
    return outcome


def _main(argv: list[str]) -> int:
    import tempfile
    import time
    from collections import Counter

    what = argv[0] if argv else "loader"
    n = int(argv[1]) if len(argv) > 1 else 0
    data = base_data()
    cases = all_cases(data)
    chosen = sample(cases, n) if n else cases
    crashes: Counter[str] = Counter()
    start = time.monotonic()
    total = 0
    if what == "loader":
        for case in chosen:
            total += 1
            out = check_loader(case.text(data))
            if out.code is None:
                crashes[out.error.split(":")[0] + ": " + out.error.split(":", 1)[-1][:60]] += 1
    else:
        readers = [what] if what in READERS else list(READERS)
        for reader in readers:
            for case in chosen:
                total += 1
                with tempfile.TemporaryDirectory() as tmp:
                    out = run_reader(reader, case.text(data), Path(tmp))
                if out.code is None:
                    crashes[f"{reader}: {out.error[:100]}"] += 1
    print(f"{total} cases in {time.monotonic() - start:.1f} s, {sum(crashes.values())} crashes, "
          f"{len(crashes)} distinct")
    for error, count in crashes.most_common():
        print(f"{count:6d}  {error}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(_main(sys.argv[1:]))
