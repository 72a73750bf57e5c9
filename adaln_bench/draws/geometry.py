"""Which GPU's launch geometry a seeded draw follows: the running GPU's own ("native") or a named SM count."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from adaln_bench.errors import UserError

# Multiprocessor counts of the GPUs the project reports on (all with 2048 threads per SM).
KNOWN_SMS = {"h200": 132, "b200": 148}
NATIVE = "native"


@dataclass(frozen=True)
class DrawGeometry:
    """name: "native", a known GPU ("h200", "b200") or the SM count as written; sms: None for native."""

    name: str
    sms: Optional[int]
    threads_per_sm: int = 2048

    @property
    def is_native(self) -> bool:
        """True: draw with torch's own generator (the running GPU's geometry); no kernel of ours is involved."""
        return self.sms is None

    def describe(self) -> str:
        if self.is_native:
            return "native (torch's own generator on the running GPU)"
        return f"{self.name} ({self.sms} SMs x {self.threads_per_sm} threads)"


def geometry(name_or_sms: str) -> DrawGeometry:
    """Parse "native" | "h200" | "b200" | "<positive int>" (an SM count); anything else is a UserError."""
    text = str(name_or_sms).strip().lower()
    if text == NATIVE:
        return DrawGeometry(NATIVE, None)
    if text in KNOWN_SMS:
        return DrawGeometry(text, KNOWN_SMS[text])
    if re.fullmatch(r"[0-9]+", text) and int(text) > 0:
        return DrawGeometry(str(int(text)), int(text))
    known = ", ".join([NATIVE, *KNOWN_SMS])
    raise UserError(f"draw geometry {name_or_sms!r}: expected {known} or a positive SM count such as 132")
