"""Reading a user's TOML file (recipes, thresholds): a missing or malformed file is one clear UserError."""
from __future__ import annotations

from pathlib import Path

from adaln_bench.bounded_read import read_limited
from adaln_bench.errors import UserError

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


# A recipe, envs or thresholds file is a few KB; a FIFO or /dev/zero named as one must not hang the reader.
MAX_TOML_BYTES = 1024 * 1024


def read_toml(path: str | Path, kind: str = "file") -> dict:
    p = Path(path)
    if not p.exists() and not p.is_symlink():
        raise UserError(f"{p}: no such {kind}")
    try:
        return tomllib.loads(read_limited(p, MAX_TOML_BYTES, f"a {kind}").decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UserError(f"{p}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{p}: not valid TOML: {exc}") from None
    except RecursionError:
        raise UserError(f"{p}: not valid TOML: nested too deep") from None
