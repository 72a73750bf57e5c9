"""final_adaln_out's pins: what its seeded inputs hash to and its probe family. tests/test_operator_pins.py checks
the pins of every operator found; a change of a seeded draw fails there (docs/adding-an-operator.md#pins)."""

FAMILY = "S"

# The first 16 hex digits of each input's SHA-256 (dtype, shape and bytes), seed 3, 257 rows, tiny preset, CPU.
INPUT_SHA256 = {
    "temb_sha256": "e5405fc5ee2623b6",
    "upstream_sha256": "bb0b4b3f718ae3e0",
    "permutation_sha256": "cdee1eacd630bc7c",
    "x_sha256": "62fb27dd8d503605",
    "nw_sha256": "b02ebe92a5ef1ee4",
    "w_sha256": "6a23a7cf9c97cf4a",
    "b_sha256": "577c6dc5a69c3ec8",
    "ti_sha256": "05c7a0ba49d79d6a",
}
