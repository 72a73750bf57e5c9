"""The frameworks that get an environment of their own, the extras they are built from, and their modes.

vLLM, SGLang and Megatron (with Transformer Engine) each pin their own torch, so no one environment holds
the newest release of all three; each gets its own, built from this checkout's optional extra.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from adaln_bench.errors import UserError


@dataclass(frozen=True)
class Framework:
    name: str
    extra: str  # the optional extra of pyproject.toml that installs it
    packages: tuple[str, ...]  # the distributions that extra brings, for a bare `--pin vllm==0.33.0`


FRAMEWORKS: dict[str, Framework] = {
    "vllm": Framework("vllm", "vllm", ("vllm",)),
    "sglang": Framework("sglang", "sglang", ("sglang",)),
    "megatron": Framework("megatron", "megatron", ("megatron-core", "transformer-engine")),
}


def get_framework(name: str) -> Framework:
    try:
        return FRAMEWORKS[name]
    except KeyError:
        raise UserError(f"unknown framework {name!r}; known: {', '.join(FRAMEWORKS)}") from None


def modes_of(framework: Framework, modes_file: str | None = None) -> list[str]:
    """The registered modes that switch this framework on."""
    from adaln_bench.modes.registry import all_modes

    return [m.name for m in all_modes(modes_file).values() if m.framework == framework.name]


def requirement_name(requirement: str) -> str:
    """The normalised project name of a requirement (`Vllm[x]>=1` -> vllm); a path or URL stays as it is."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:[\[<>=!~;@ ]|$)", requirement)
    if match is None or "/" in requirement.split("@")[0] or requirement.strip().startswith("."):
        return requirement.strip()
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def parse_pin(value: str) -> tuple[str, str]:
    """`--pin vllm==0.33.0` (a package one framework brings) or `--pin FRAMEWORK=REQUIREMENT`."""
    head, sep, rest = value.partition("=")
    if sep and head in FRAMEWORKS and not rest.startswith("=") and rest.strip():
        return head, rest.strip()
    name = requirement_name(value)
    owners = [fw.name for fw in FRAMEWORKS.values() if name in fw.packages]
    if not owners:
        raise UserError(f"--pin {value!r}: say which framework it is for, as FRAMEWORK=REQUIREMENT "
                        f"(frameworks: {', '.join(FRAMEWORKS)})")
    return owners[0], value.strip()


def merge_pins(base: list[str], override: list[str]) -> list[str]:
    """`base` with every requirement whose project `override` names replaced by the override's."""
    names = {requirement_name(r) for r in override}
    return [r for r in base if requirement_name(r) not in names] + list(override)
