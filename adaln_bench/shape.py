"""The sizes of the AdaLN projection: D (temb width), H (hidden), M (modalities); N = 6 * M * H outputs.

One type from the command line to the candidate's build: the parent resolves it, the child receives it in
its spec, and `BuildContext` carries it to the candidate. The report records it as `reports.schema.Shape`.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    dim: int
    hidden: int
    modalities: int
    preset: str | None = None

    @property
    def out_features(self) -> int:
        return 6 * self.modalities * self.hidden

    def describe(self) -> str:
        name = f"{self.preset} " if self.preset else ""
        return f"{name}(D={self.dim}, H={self.hidden}, M={self.modalities}, N={self.out_features})"
