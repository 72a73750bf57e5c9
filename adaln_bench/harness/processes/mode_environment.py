"""Which environment each mode ran in: read by the child, attached to the mode's record by the parent.

`modes.<mode>.environment` holds the interpreter, Python, torch, CUDA and the framework's version, so a
report whose modes ran in different environments (`--python`, `adaln-bench envs`) says which was which.
"""
from __future__ import annotations

import platform
import sys
from typing import TYPE_CHECKING, Optional

from adaln_bench.modes.frameworks import FRAMEWORKS
from adaln_bench.harness.measurement.environment import LIBRARIES, library_version
from adaln_bench.modes.registry import Mode
from adaln_bench.datamodel.schema import ModeEnvironment

if TYPE_CHECKING:  # the child imports this module too, and needs nothing of the runner
    from adaln_bench.harness.processes.runner import ModeOutcome


def runtime_environment(mode: Mode) -> ModeEnvironment:
    """In the child, with torch imported: this interpreter and what it imports. Touches no GPU."""
    import torch

    framework = FRAMEWORKS[mode.framework].packages[0] if mode.framework else None  # its distribution
    version = library_version(LIBRARIES.get(framework, (framework,))) if framework else None
    return ModeEnvironment(interpreter=sys.executable, python=platform.python_version(), torch=torch.__version__,
                           cuda=torch.version.cuda, framework=framework, framework_version=version)


def attach_environment(outcome: "ModeOutcome", interpreter: str) -> None:
    """Give the mode's record its environment, from what its child wrote (each operator's report takes its own
    input fingerprint: harness/assembly/assemble.py).

    A child that never started (an interpreter that failed the preflight check) still records the
    interpreter it was meant to run under. The framework's version is the one the switch imported when
    it got that far (a source checkout may differ from the installed distribution).
    """
    child = outcome.child
    env: Optional[ModeEnvironment] = child.runtime.model_copy() if child and child.runtime else None
    if env is None:
        env = ModeEnvironment(interpreter=interpreter)
    observed = child.observed if child else None
    if observed is not None and observed.library_version:
        env.framework_version = observed.library_version
    outcome.run.environment = env
