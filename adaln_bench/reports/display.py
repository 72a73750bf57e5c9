"""A report's strings made fit to show: cut to a length a terminal, a page or a plot label can lay out in no
time, and without control characters (a terminal would obey an escape sequence in a candidate's name).

The readers render the copy `for_display` returns; the file itself is left as it is (publish copies its bytes).
"""
from __future__ import annotations

import hashlib
import re

from adaln_bench.datamodel.schema import Report

# A stderr tail or a reason is shown whole up to this; a 400,000-character word would take rich minutes to fold.
VALUE_CHARS = 2000
# Names (modes, candidates: keys of the report) are cut shorter, with a hash kept so that two long names
# that share their start stay two names.
KEY_CHARS = 120
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _clean(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def clip(text: str, limit: int = VALUE_CHARS) -> str:
    """`text` without control characters (newlines and tabs kept), cut to about `limit` characters."""
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(text) - limit} more characters)"
    return _clean(text)


def clip_name(name: str, limit: int = KEY_CHARS) -> str:
    """A name cut to `limit` characters; a cut one ends in a hash of the whole, so it stays distinct."""
    if len(name) > limit:
        name = f"{name[:limit - 10]}…{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"
    return _clean(name).replace("\n", "\\n").replace("\t", "\\t")


def _needs_clipping(value: object) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if len(item) > VALUE_CHARS or _CONTROL.search(item):
                return True
        elif isinstance(item, dict):
            for k, v in item.items():
                if len(k) > KEY_CHARS or _CONTROL.search(k) or "\n" in k or "\t" in k:
                    return True
                stack.append(v)
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _clipped(value: object) -> object:
    if isinstance(value, str):
        return clip(value)
    if isinstance(value, dict):
        return {clip_name(k): _clipped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clipped(v) for v in value]
    return value


def for_display(report: Report) -> Report:
    """`report` itself when every string is short and clean, else a copy with its strings clipped."""
    data = report.model_dump(mode="python", exclude_unset=True)
    if not _needs_clipping(data):
        return report
    return Report.model_validate(_clipped(data))
