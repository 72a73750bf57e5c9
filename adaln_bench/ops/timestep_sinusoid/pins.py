"""timestep_sinusoid's pins: what its seeded inputs hash to and its probe family. tests/test_operator_pins.py checks
the pins of every operator found; a change of a seeded draw fails there (docs/adding-an-operator.md#pins)."""

FAMILY = "sinusoid"

# The first 16 hex digits of each input's SHA-256 (dtype, shape and bytes), seed 3, 257 rows, tiny preset, CPU.
INPUT_SHA256 = {
    "upstream_sha256": "ce0055bb77e85d69",
    "permutation_sha256": "cdee1eacd630bc7c",
    "t_sha256": "3538134ca7661a90",
}
