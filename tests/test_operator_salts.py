"""Seed salts are the contract of every seeded input (docs/adding-an-operator.md#salts): two inputs that share a
salt draw the same numbers. Checked across every discovered operator, so a new operator's folder cannot reuse one."""
from adaln_bench.ops.draws import SALT_LIMIT
from adaln_bench.ops.registry import all_operators
from adaln_bench.ops.spec import Normal, Uniform


def salt_owners(ops=None) -> dict[int, list[str]]:
    """Each salt, with the inputs (operator.tensor) drawn with it."""
    owners: dict[int, list[str]] = {}
    for op in all_operators().values() if ops is None else ops:
        for t in op.tensors:
            if isinstance(t.draw, (Normal, Uniform)):
                owners.setdefault(t.draw.salt, []).append(f"{op.name}.{t.name}")
    return owners


def collisions(ops=None) -> dict[int, list[str]]:
    return {salt: names for salt, names in salt_owners(ops).items() if len(names) > 1}


def test_every_salt_is_used_once():
    found = collisions()
    assert not found, "; ".join(f"salt {s}: {' and '.join(n)}" for s, n in found.items())


def test_every_salt_stays_inside_its_seed():
    # a generator is seeded seed * SALT_LIMIT + salt: a salt outside [0, SALT_LIMIT) reaches the next seed's draws
    outside = {s: n for s, n in salt_owners().items() if not 0 <= s < SALT_LIMIT}
    assert not outside, outside

