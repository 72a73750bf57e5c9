"""adaln_row_gather's pins: what its seeded inputs hash to and its probe family. tests/test_operator_pins.py checks
the pins of every operator found; a change of a seeded draw fails there (docs/adding-an-operator.md#pins)."""

FAMILY = "S"

# The first 16 hex digits of each input's SHA-256 (dtype, shape and bytes), seed 3, 257 rows, tiny preset, CPU.
INPUT_SHA256 = {
    "upstream_sha256": "3c9f6dd3ebda295d",
    "permutation_sha256": "cdee1eacd630bc7c",
    "table_sha256": "6dc4d8728ff6184c",
    "timestep_indices_sha256": "05c7a0ba49d79d6a",
    "token_tags_sha256": "a7d34793a92c6c99",
}
