"""The model's sizes: D (temb width), H (hidden), M (modalities), F (timestep frequency width); N = 6·M·H.

One type from the command line to a candidate's build: the parent resolves it, the child receives it in its
spec, and `BuildContext` carries it to the candidate. Operators declare their tensors' shapes in these
symbols (adaln_bench/ops/sizes.py); a report records the sizes its operator reads (`datamodel.schema.Shape`).
"""
from __future__ import annotations

from dataclasses import dataclass

# A size's field name, its symbol in shape expressions, and its name on the command line.
SYMBOLS = {"dim": "D", "hidden": "H", "modalities": "M", "frequency": "F"}


@dataclass(frozen=True)
class Shape:
    dim: int
    hidden: int
    modalities: int
    preset: str | None = None
    frequency: int = 256

    @property
    def out_features(self) -> int:
        """N, the projection's outputs: six modulation rows of H for each of M modalities."""
        return 6 * self.modalities * self.hidden

    def symbol(self, name: str) -> int:
        if name == "N":
            return self.out_features
        for field_name, sym in SYMBOLS.items():
            if sym == name:
                return getattr(self, field_name)
        raise KeyError(f"unknown size {name!r}")

    def describe(self, names: tuple[str, ...] = ("dim", "hidden", "modalities"), with_n: bool = True) -> str:
        """`small (D=128, H=32, M=3, N=576)` for the projection; an operator names the sizes it reads."""
        name = f"{self.preset} " if self.preset else ""
        parts = [f"{SYMBOLS[n]}={getattr(self, n)}" for n in names]
        if with_n:
            parts.append(f"N={self.out_features}")
        return f"{name}({', '.join(parts)})"
