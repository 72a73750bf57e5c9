"""The plain mode: PyTorch as installed, no framework, no variables. The baseline every mode is read against."""
from adaln_bench.modes.registry import Mode, register

PLAIN = register(
    Mode(
        name="plain",
        description="PyTorch as installed: no framework switch, no cuBLAS variables",
        kind="baseline",
    )
)
