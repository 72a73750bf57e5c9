"""A mode as switched on in the child process, and the context that switches it off for the FP64 reference."""
from __future__ import annotations

import contextlib
from typing import Iterator

from adaln_bench.modes import torch_settings
from adaln_bench.modes.registry import Mode, ModeOptions


class ModeSwitch:
    """Applies the mode's torch settings and calls its `enable`; `off()` undoes either for a while."""

    def __init__(self, mode: Mode, options: ModeOptions, on_cuda: bool):
        self.mode, self.switch, self._restore = mode, None, None
        self._apply = (lambda: torch_settings.apply(mode.torch_settings, on_cuda)) if mode.torch_settings else None
        if self._apply:
            self._restore = self._apply()
        if mode.enable:
            self.switch = mode.enable(options)

    @property
    def settings_applied(self) -> bool:
        """True when the mode is torch settings that `off()` restores (a recipe), not a framework switch."""
        return self._apply is not None

    @contextlib.contextmanager
    def off(self) -> Iterator[None]:
        if self.switch is not None and self.switch.off is not None:
            self.switch.off()
            try:
                yield
            finally:
                if self.switch.on is not None:
                    self.switch.on()
        elif self.switch is None and self._restore is not None:
            self._restore()
            try:
                yield
            finally:
                self._restore = self._apply()
        else:
            yield
