"""The one compatibility rule (adaln_bench/ops/compat.py): every form that names no operator means the projection,
and only that rule decides it."""
import importlib
import sys
import warnings

import pytest

from adaln_bench.errors import UserError
from adaln_bench.harness.assembly.selection import choose_operators
from adaln_bench.ops import candidates
from adaln_bench.ops.compat import LEGACY_OPERATOR
from adaln_bench.ops.registry import all_operators


def names(ops):
    return [op.name for op in ops]


@pytest.mark.parametrize("form", ["--dim", "--hidden", "--modalities", "--preset flux", "--out r.json"])
def test_an_option_only_the_projection_has_chooses_it(form):
    assert names(choose_operators([], form, [])) == [LEGACY_OPERATOR]
    assert names(choose_operators([LEGACY_OPERATOR], form, [])) == [LEGACY_OPERATOR]
    assert names(choose_operators(["all"], form, [])) == list(all_operators())  # `all` named: every one
    with pytest.raises(UserError) as e:
        choose_operators(["norm_modulate"], form, [])
    assert str(e.value) == f"{form} is an option of adaln_projection only; drop it or run --op adaln_projection"


def test_module_function_candidates_without_op_are_the_projections():
    assert names(choose_operators([], None, ["fixture_candidates:crash"])) == [LEGACY_OPERATOR]
    # a registered name among them names operators: those that have it
    assert LEGACY_OPERATOR not in names(choose_operators([], None, ["m:f", "torch_rms_norm"]))
    assert names(choose_operators([], None, [])) == list(all_operators())


def test_a_candidate_or_lookup_that_names_no_operator_is_the_projections():
    c = candidates.Candidate(name="mine", description="", default_modes=None, availability=lambda: None,
                             build=lambda ctx: None)  # an entry point written before operators existed
    assert c.op == LEGACY_OPERATOR
    assert candidates.get("diffusers") is candidates.candidates_of(LEGACY_OPERATOR)["diffusers"]
    assert candidates.get("m:f").op == LEGACY_OPERATOR


def test_the_old_import_path_still_works_and_says_it_is_deprecated():
    sys.modules.pop("adaln_bench.kernels.registry", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = importlib.import_module("adaln_bench.kernels.registry")
    assert any(issubclass(w.category, DeprecationWarning) and "adaln_bench.ops.candidates" in str(w.message)
               for w in caught)
    assert old.register is candidates.register and old.DEFAULT_OP == LEGACY_OPERATOR
    assert list(old.all_candidates()) == list(candidates.candidates_of(LEGACY_OPERATOR))
