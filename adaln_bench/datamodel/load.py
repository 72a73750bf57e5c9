"""The one way a report is read: every command that reads reports comes through here, and gets a validated
`Report` or one line saying why the file is not one (a UserError: exit 2, or skipped by `publish`).

A report is data from elsewhere (a CI artefact, a colleague's run), so nothing in it is trusted: the file
must be a regular file no larger than MAX_REPORT_BYTES (a FIFO or a device would hang or never end), its JSON
no deeper than MAX_DEPTH (Python's parser recurses), its numbers finite and its integers within 64 bits (an
integer of thousands of digits is refused by Python's int-string limit), and the whole must match the schema.
A `kernel-bench` output is read the same way into its own schema (datamodel/kernel_bench.py), older layouts
upgraded on the way (datamodel/kernel_bench_legacy.py): `read_document` gives either kind.
"""
from __future__ import annotations

import json
import math
import os
from typing import Union

from pydantic import ValidationError

from adaln_bench import bounded_read
from adaln_bench.bounded_read import one_line, size_text
from adaln_bench.datamodel.kernel_bench import KERNEL_BENCH_VERSION, KernelBenchReport
from adaln_bench.datamodel.kernel_bench_legacy import layout_of, upgrade
from adaln_bench.errors import NotAReportError
from adaln_bench.datamodel.schema import SCHEMA_VERSION, Report

# What `report` and `diff` read: a harness report, or a kernel-bench output.
Document = Union[Report, KernelBenchReport]

# The largest committed report is 137 KB; a nightly's with every sample of every process kept is a few MB.
# 32 MiB leaves room for that and still fits in memory many times over.
MAX_REPORT_BYTES = 32 * 1024 * 1024
# A report nests about 10 deep (results → mode → candidate → accuracy_latency → T → device_time → reference →
# samples); unknown keys a newer writer adds get room, a JSON bomb does not.
MAX_DEPTH = 32
# Counts, seeds and sizes are 64-bit integers where they come from.
MAX_INT = 2 ** 64


def read_limited(path: str | os.PathLike[str], limit: int = MAX_REPORT_BYTES, what: str = "a report") -> bytes:
    """The bytes of a report file (or of `what`, at most `limit` bytes), or one line saying why not."""
    return bounded_read.read_limited(path, limit, what)


def read_report(path: str | os.PathLike[str]) -> Report:
    """The report in a file, validated; a UserError of one line when it is not one."""
    return parse_report(read_limited(path), one_line(str(path), 400))


class _Refused(ValueError):
    pass


def _refuse_constant(name: str) -> float:
    raise _Refused(f"holds {name}, which is not a number JSON allows")


def load_json(data: str | bytes, origin: str) -> object:
    """JSON within the limits above, or a NotAReportError."""
    if len(data) > MAX_REPORT_BYTES:
        raise NotAReportError(f"{origin}: larger than a report can be ({size_text(MAX_REPORT_BYTES)})")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise NotAReportError(f"{origin}: not UTF-8 text, so not a report") from None
    try:
        value = json.loads(data, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise NotAReportError(f"{origin}: not JSON ({exc.msg} at line {exc.lineno})") from None
    except _Refused as exc:
        raise NotAReportError(f"{origin}: {exc}") from None
    except ValueError:  # Python's int-string limit: an integer of thousands of digits
        raise NotAReportError(f"{origin}: holds an integer of thousands of digits") from None
    except RecursionError:
        raise NotAReportError(f"{origin}: nested deeper than a report can be ({MAX_DEPTH} levels)") from None
    problem = _out_of_bounds(value)
    if problem:
        raise NotAReportError(f"{origin}: {problem}")
    return value


def _out_of_bounds(value: object) -> str:
    """Why `value` cannot be a report's JSON (too deep, a non-finite or huge number), or ''."""
    stack: list[tuple[object, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            return f"nested deeper than a report can be ({MAX_DEPTH} levels) at {one_line(where)}"
        if isinstance(item, dict):
            stack.extend((v, depth + 1, f"{where}.{k}" if where else k) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, depth + 1, f"{where}[{i}]") for i, v in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{one_line(where)}: {item} is not a finite number"
        elif isinstance(item, int) and not isinstance(item, bool) and not -MAX_INT < item < MAX_INT:
            return f"{one_line(where)}: an integer larger than a report holds"
    return ""


def parse_report(data: str | bytes, origin: str) -> Report:
    """A report from its text (a file's bytes, or git show's), validated; `origin` names it in messages."""
    return report_from_json(load_json(data, origin), origin)


def report_from_json(value: object, origin: str) -> Report:
    """A report from JSON that load_json has read (a caller that looks at the JSON first, for its kind)."""
    if not isinstance(value, dict) or "results" not in value or "environment" not in value:
        raise NotAReportError(f"{origin}: not an adaln-bench report (no 'results' and 'environment')")
    _check_schema_version(value.get("schema_version"), origin)
    try:
        return Report.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise NotAReportError(f"{origin}: not a valid report: {one_line(where, 160)}: "
                              f"{one_line(first['msg'], 160)}") from None
    except RecursionError:  # unreachable within MAX_DEPTH; kept so that no limit change can give a traceback
        raise NotAReportError(f"{origin}: nested deeper than a report can be") from None


def read_document(path: str | os.PathLike[str]) -> Document:
    """A report or a kernel-bench output in a file, validated; a UserError of one line when it is neither."""
    return parse_document(read_limited(path), one_line(str(path), 400))


def parse_document(data: str | bytes, origin: str) -> Document:
    return document_from_json(load_json(data, origin), origin)


def document_from_json(value: object, origin: str) -> Document:
    if isinstance(value, dict) and layout_of(value) is not None:
        return kernel_bench_from_json(value, origin)
    return report_from_json(value, origin)


def kernel_bench_from_json(value: dict, origin: str) -> KernelBenchReport:
    """A kernel-bench output of any layout, upgraded to today's and validated."""
    version = value.get("schema_version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or
                                version > KERNEL_BENCH_VERSION):
        raise NotAReportError(f"{origin}: kernel-bench schema_version {one_line(repr(version), 40)} is not one this "
                              f"adaln-bench reads (up to {KERNEL_BENCH_VERSION})")
    try:
        return KernelBenchReport.model_validate(upgrade(value))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise NotAReportError(f"{origin}: not a valid kernel-bench output: {one_line(where, 160)}: "
                              f"{one_line(first['msg'], 160)}") from None
    except (AttributeError, TypeError):  # a layout's part of the wrong type before validation could say so
        raise NotAReportError(f"{origin}: not a valid kernel-bench output (its parts are not of their types)") from None


def _check_schema_version(version: object, origin: str) -> None:
    """A report without a version is RL-Kernel's format, which every version reads (fields are only ever
    added); a newer version than this reader knows may have changed what a field means, so it is refused."""
    if version is None:
        return
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise NotAReportError(f"{origin}: schema_version must be a positive integer, not "
                              f"{one_line(repr(version), 40)}")
    if version > SCHEMA_VERSION:
        raise NotAReportError(f"{origin}: schema_version {version} is newer than this adaln-bench reads "
                              f"(up to {SCHEMA_VERSION}); upgrade adaln-bench to read it")
