"""The wheels `nightly.sh start` installs into one site: one wheel per distribution, the first found in the order
the folders are given (the newest staging first), so that two carried versions of one package (pip refuses to
install both) never stop the install. SGLang's kernels build (a `0slimkernels` wheel) is a superset of the
mode's slimmed SGLang: it is printed last, whatever the order, so that it is installed over the slimmed one.

`python3 tools/device/pick_wheels.py FOLDER_OR_WHEEL ...` prints the chosen paths, one a line, and names each
wheel left out on stderr. Exit 2 when nothing was found."""
from __future__ import annotations

import sys
from pathlib import Path

KERNELS_TAG = "0slimkernels"


def distribution(wheel: Path) -> str:
    """The distribution a wheel file holds, as its file name spells it (PEP 427), compared without case."""
    return wheel.name.split("-", 1)[0].lower().replace(".", "_")


def pick(sources: list[Path]) -> tuple[list[Path], list[Path]]:
    """(the wheels to install, in order; the wheels left out)."""
    found: list[Path] = []
    for src in sources:
        found.extend(sorted(src.glob("*.whl")) if src.is_dir() else [src] if src.suffix == ".whl" else [])
    chosen: dict[str, Path] = {}
    kernels: Path | None = None
    left_out: list[Path] = []
    for wheel in found:
        if KERNELS_TAG in wheel.name:
            if kernels is None:
                kernels = wheel
            elif wheel.name != kernels.name:
                left_out.append(wheel)
            continue
        name = distribution(wheel)
        if name in chosen:
            if wheel.name != chosen[name].name:
                left_out.append(wheel)
            continue
        chosen[name] = wheel
    return [*chosen.values(), *([kernels] if kernels else [])], left_out


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    wheels, left_out = pick([Path(a) for a in argv])
    for wheel in left_out:
        print(f"pick_wheels: left out {wheel} (another version of {distribution(wheel)} comes first)",
              file=sys.stderr)
    for wheel in wheels:
        print(wheel)
    return 0 if wheels else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
