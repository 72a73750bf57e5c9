"""adaln_projection's pins: what its seeded inputs hash to and its probe family. tests/test_operator_pins.py checks
the pins of every operator found; a change of a seeded draw fails there (docs/adding-an-operator.md#pins)."""

FAMILY = "T"

# The first 16 hex digits of each input's SHA-256 (dtype, shape and bytes), seed 3, 257 rows, tiny preset, CPU.
INPUT_SHA256 = {
    "temb_sha256": "3165acb763ad05c0",
    "weight_sha256": "107ee9eba61d7580",
    "bias_sha256": "7eae4afa4cdf2ecd",
    "upstream_sha256": "5360650c0c02a9c6",
    "permutation_sha256": "cdee1eacd630bc7c",
}
