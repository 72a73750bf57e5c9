"""norm_modulate's pins: what its seeded inputs hash to and its probe family. tests/test_operator_pins.py checks
the pins of every operator found; a change of a seeded draw fails there (docs/adding-an-operator.md#pins)."""

FAMILY = "S"

# The first 16 hex digits of each input's SHA-256 (dtype, shape and bytes), seed 3, 257 rows, tiny preset, CPU.
INPUT_SHA256 = {
    "upstream_sha256": "bb0b4b3f718ae3e0",
    "permutation_sha256": "cdee1eacd630bc7c",
    "x_sha256": "c2092ae7639e5bb6",
    "w_sha256": "e1a565d03b44c25c",
    "sh_sha256": "0393bbf935677e21",
    "sc_sha256": "6c89aa25d817bb71",
    "idx_sha256": "06b94244907dd59d",
}
