"""timestep_mlp's pins: what its seeded inputs hash to and its probe family. tests/test_operator_pins.py checks
the pins of every operator found; a change of a seeded draw fails there (docs/adding-an-operator.md#pins)."""

FAMILY = "T"

# The first 16 hex digits of each input's SHA-256 (dtype, shape and bytes), seed 3, 257 rows, tiny preset, CPU.
INPUT_SHA256 = {
    "upstream_sha256": "bc11e1735b8a1419",
    "permutation_sha256": "cdee1eacd630bc7c",
    "x_sha256": "b8d6115ff9389d9a",
    "w1_sha256": "eb57b2bf33006d3a",
    "b1_sha256": "ec6d960f5e2bd1fa",
    "w2_sha256": "839114a8ae435f09",
    "b2_sha256": "093f72ecdcda7b8c",
}
