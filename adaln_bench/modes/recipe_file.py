"""A user's recipe file (`run --modes-file FILE`): one `[recipes.<name>]` table per recipe mode, checked entry by entry,
so that a mistake is one line naming the table and the key (the format: modes/recipes.py)."""
from __future__ import annotations

import re

from adaln_bench.errors import UserError
from adaln_bench.modes.mode_types import Mode, TorchSettings, env_problem
from adaln_bench.toml_file import read_toml

_SETTING_KEYS = {f for f in TorchSettings.__dataclass_fields__}
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
# A mode's name goes into file names (its child's files, a report named by its modes): short enough for any
# file system, with room for the rest of the name.
NAME_LIMIT = 64


def _quoted(value: object, limit: int = 60) -> str:
    """A value from the file for a one-line message: its repr, cut (a string or table may be any size)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _recipe_from_table(name: str, table: object, origin: str) -> Mode:
    if not _NAME.match(name):
        raise UserError(f"{origin}: recipe name {_quoted(name)} must be letters, digits, '_', '.', '-'")
    if len(name) > NAME_LIMIT:
        raise UserError(f"{origin}: recipe name {name[:40]!r}… has {len(name)} characters; at most {NAME_LIMIT}")
    if not isinstance(table, dict):
        raise UserError(f"{origin}: recipes.{name} must be a table ([recipes.{name}]), not "
                        f"{type(table).__name__} {_quoted(table)}")
    unknown = set(table) - _SETTING_KEYS - {"description", "env"}
    if unknown:
        raise UserError(f"{origin}: recipe {name!r}: unknown keys {_quoted(sorted(unknown))}")
    description = table.get("description", f"recipe from {origin}")
    if not isinstance(description, str):
        raise UserError(f"{origin}: recipe {name!r}: description must be a string, not {_quoted(description)}")
    env = table.get("env", {})
    if not isinstance(env, dict):
        raise UserError(f"{origin}: recipe {name!r}: env must be a table of strings")
    bad = next((f"{k} = {_quoted(v)}" for k, v in env.items() if not isinstance(v, str)), None)
    if bad is not None:  # TOML keeps types: `FOO = true` would reach the child as "True"
        raise UserError(f"{origin}: recipe {name!r}: env must be a table of strings, not {bad}")
    problem = env_problem(name, env)
    if problem is not None:
        raise UserError(f"{origin}: {problem}")
    settings = {k: table[k] for k in _SETTING_KEYS if k in table}
    blas = settings.get("preferred_blas")
    if blas is not None and blas not in ("cublas", "cublaslt", "default"):
        raise UserError(f"{origin}: recipe {name!r}: preferred_blas must be cublas, cublaslt or default")
    for key, value in settings.items():
        if key != "preferred_blas" and not isinstance(value, bool):
            raise UserError(f"{origin}: recipe {name!r}: {key} must be true or false")
    return Mode(
        name=name,
        description=description,
        kind="recipe",
        env=dict(env),
        torch_settings=TorchSettings(**settings),
    )


def load_recipe_file(path: str) -> list[Mode]:
    origin = str(path)
    data = read_toml(path)
    recipes = data.get("recipes")
    if not isinstance(recipes, dict) or not recipes:
        raise UserError(f"{origin}: no [recipes.<name>] tables")
    return [_recipe_from_table(name, table, origin) for name, table in recipes.items()]
