"""Where a run's reports go: one per operator under `<out>/<op>/`, named by everything that makes two
reports incomparable, and a small run index beside them (docs/spec.md#9-the-report)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from adaln_bench.shape import SYMBOLS, Shape

RUN_INDEX_KIND = "adaln_bench_run_index"
# An interrupted or failed run's report (and run index) ends so, beside the complete `<name>.json` it must never
# replace; whatever picks reports takes these for what they are (docs/reports.md).
INCOMPLETE_SUFFIX = ".incomplete.json"


@dataclass(frozen=True)
class RunName:
    """The parts of a report's default name: `<op>.<gpu>.<commit>.<shape>[.quick][.latency][.<modes>].json`."""

    slug: str  # the GPU model ("h200") or "cpu"
    tag: str  # the commit ("bd79cc3", "bd79cc3-dirty", "nocommit")
    shape: str  # the preset ("h3", "small") or the sizes ("D128-H32-M3")
    quick: bool = False
    latency_only: bool = False
    accuracy_only: bool = False
    modes: Optional[tuple[str, ...]] = None  # None: every mode
    draws: Optional[str] = None  # `--draw-geometry` when not native: "b200", "148"

    def suffix(self) -> str:
        parts = [self.slug, self.tag, self.shape]
        if self.quick:
            parts.append("quick")
        if self.latency_only:
            parts.append("latency")
        if self.accuracy_only:
            parts.append("accuracy")
        if self.draws:
            parts.append(f"draws-{self.draws}")
        if self.modes:
            parts.append("+".join(self.modes))
        return ".".join(parts)

    def report_file(self, op: str) -> str:
        return f"{op}.{self.suffix()}.json"

    def index_file(self) -> str:
        return f"run.{self.suffix()}.json"


def shape_tag(shape: Shape, size_names: Sequence[str] = ("dim", "hidden", "modalities")) -> str:
    if shape.preset:
        return shape.preset
    return "-".join(f"{SYMBOLS[n]}{getattr(shape, n)}" for n in size_names)


def report_path(out_dir: Path, name: RunName, op: str) -> Path:
    return out_dir / op / name.report_file(op)


def index_path(out_dir: Path, name: RunName) -> Path:
    return out_dir / "runs" / name.index_file()


def incomplete_path(path: Path) -> Path:
    """`<name>.json` → `<name>.incomplete.json`."""
    name = path.name[:-len(".json")] if path.name.endswith(".json") else path.name
    return path.with_name(name + INCOMPLETE_SUFFIX)


def is_incomplete_file(path: Path | str) -> bool:
    return Path(path).name.endswith(INCOMPLETE_SUFFIX)
