"""gate_residual's pins: what its seeded inputs hash to and its probe family. tests/test_operator_pins.py checks
the pins of every operator found; a change of a seeded draw fails there (docs/adding-an-operator.md#pins)."""

FAMILY = "S"

# The first 16 hex digits of each input's SHA-256 (dtype, shape and bytes), seed 3, 257 rows, tiny preset, CPU.
INPUT_SHA256 = {
    "upstream_sha256": "bb0b4b3f718ae3e0",
    "permutation_sha256": "cdee1eacd630bc7c",
    "res_sha256": "89bcae90f1b02df6",
    "y_sha256": "51c6a194d9aafe9b",
    "gate_sha256": "c8432ef226ab6c04",
    "idx_sha256": "06b94244907dd59d",
}
