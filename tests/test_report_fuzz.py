"""Broken and hostile reports: the shared loader refuses them in one line, and no reader ends in a traceback.

The cases come from tests/report_fuzz.py: a committed report with one field at a time replaced by a value of
the wrong type (thousands of cases), and whole files no report can be (a FIFO, /dev/zero, a directory, a
symlink loop, JSON nested 5,000 deep, an integer of 5,000 digits, a file over the size limit).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import zlib
from contextlib import contextmanager
from pathlib import Path

import pytest

import report_fuzz as fuzz
from adaln_bench.errors import UserError
from adaln_bench.datamodel.io import read_report, report_to_dict
from adaln_bench.datamodel.load import MAX_REPORT_BYTES, parse_report
from conftest import ROOT, run_main

REFUSED_LABELS = ("huge_int", "deep_5000", "inf", "-inf", "nan", "dict_nested_40")


@pytest.fixture(scope="module")
def data() -> dict:
    return fuzz.base_data()


@contextmanager
def deadline(seconds: int):
    """A hang (a FIFO read, a device read to its end) fails the test instead of stopping the suite."""
    def expire(*_):
        raise TimeoutError(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_every_committed_report_loads_unchanged():
    """Every report under results/ (RL-Kernel's prior-art ones without schema_version included) reads, and
    gives back the data it holds; other JSON there (run indexes, kernel-bench outputs) is no report."""
    kinds: dict[str, int] = {}
    for path in sorted((ROOT / "results").rglob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if not (isinstance(data, dict) and "results" in data and "environment" in data):
            continue
        report = read_report(path)
        assert report_to_dict(report) == data, path
        kinds[report.kind] = kinds.get(report.kind, 0) + 1
    assert kinds.get("h3_prior_art", 0) >= 6 and kinds.get("adaln_bench", 0) >= 20, kinds


def _loader_sweep(data: dict, cases: list[fuzz.Case]) -> dict[str, int]:
    crashes, answers = [], {0: 0, 2: 0}
    for case in cases:
        outcome = fuzz.check_loader(case.text(data))
        if outcome.code is None:
            crashes.append(f"{case}: {outcome.error}")
            continue
        answers[outcome.code] += 1
        if case.label in REFUSED_LABELS:
            assert outcome.code == 2, f"{case} was read, not refused"
    assert not crashes, f"{len(crashes)} of {len(cases)} cases crashed the loader, e.g. {crashes[:3]}"
    return {str(k): v for k, v in answers.items()}


def test_loader_refuses_sampled_mutations_in_one_line(data):
    cases = fuzz.sample(fuzz.all_cases(data), 1500)
    answers = _loader_sweep(data, cases)
    # Both answers occur: wrong types are refused, and a string where any string goes is still a report.
    assert answers["0"] > 50 and answers["2"] > 500, answers


@pytest.mark.slow
def test_loader_refuses_every_mutation_in_one_line(data):
    cases = fuzz.all_cases(data)
    assert len(cases) > 15_000
    _loader_sweep(data, cases)


# The six readers the issue names, 100 cases each; the Markdown renderings get fewer.
READER_CASES = {"report": 100, "diff": 100, "diff --json": 100, "fidelity": 100, "plot": 100, "publish": 100,
                "report --markdown": 30, "diff --markdown": 30}


@pytest.mark.parametrize("reader", list(READER_CASES))
def test_readers_answer_sampled_mutations_without_a_traceback(reader, data, tmp_path):
    if reader in ("plot", "publish"):
        pytest.importorskip("matplotlib")
    cases = fuzz.sample(fuzz.all_cases(data), READER_CASES[reader], seed=zlib.crc32(reader.encode()))
    crashes, codes = [], set()
    for i, case in enumerate(cases):
        folder = tmp_path / str(i)
        folder.mkdir()
        outcome = fuzz.run_reader(reader, case.text(data), folder)
        if outcome.code is None:
            crashes.append(f"{case}: {outcome.error}")
        else:
            codes.add(outcome.code)
    assert not crashes, f"{reader}: {len(crashes)} of {len(cases)} crashed, e.g. {crashes[:3]}"
    # The refusals came from the loader, not from a reader that took everything (publish skips and counts a
    # file that is no report, beside the sound one, and writes its site: 0).
    assert codes == {0} if reader == "publish" else 2 in codes, codes


def _special_files(tmp_path: Path, data: dict) -> dict[str, Path]:
    files = {}
    for name, text in fuzz.whole_file_texts(data).items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        files[name] = path
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    files["fifo"] = fifo
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    files["symlink_loop"] = loop
    files["directory"] = tmp_path / "folder.json"
    files["directory"].mkdir()
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:  # sparse: the size is what is refused, before anything is read
        fh.truncate(MAX_REPORT_BYTES + 1)
    files["too_large"] = big
    if Path("/dev/zero").exists():
        files["dev_zero"] = Path("/dev/zero")
    return files


WHOLE_FILE_CASES = ["deep_5000", "deep_object_5000", "huge_int", "huge_int_field", "nan_literal", "not_utf8",
                    "empty", "list", "number", "fifo", "symlink_loop", "directory", "too_large", "dev_zero"]


@pytest.mark.parametrize("case", WHOLE_FILE_CASES)
def test_a_file_no_report_can_be_is_one_line_and_exit_2(case, data, tmp_path, capsys):
    files = _special_files(tmp_path, data)
    if case not in files:
        pytest.skip(f"no {case} here")
    bad = files[case]
    good = fuzz.find_result(fuzz.BASE_NAME)
    with deadline(60):
        for argv in (["report", str(bad)], ["diff", str(good), str(bad)], ["diff", "--json", str(bad), str(good)],
                     ["fidelity", str(fuzz.find_result(fuzz.PRIOR_ART_NAME)), str(bad)]):
            code, out, err = run_main(argv, capsys)
            assert code == 2, (argv, code, err)
            assert err.count("\n") == 1 and err.startswith("adaln-bench: "), err
            assert len(err) < 600, err


def test_publish_skips_and_counts_files_no_report_can_be(data, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    folder = tmp_path / "in"
    folder.mkdir()
    files = _special_files(folder, data)
    named = [files[c] for c in ("fifo", "symlink_loop", "too_large")] + ([files["dev_zero"]] if "dev_zero" in files
                                                                         else [])
    with deadline(120):
        code, out, err = run_main(["publish", str(folder), *map(str, named), str(fuzz.find_result(fuzz.BASE_NAME)),
                                   "--out", str(tmp_path / "site")], capsys)
    assert code == 0, err
    # In the folder: the JSON texts (RL-Kernel's report without schema_version among them: a report) and the
    # large file; the FIFO, the loop and the directory are no files there. Named: the FIFO, the loop, the
    # large file again (counted once) and /dev/zero.
    skipped = len(fuzz.whole_file_texts(data)) - 1 + 1 + len(named) - 1
    assert "2 reports" in out and f"skipped {skipped} non-report JSON" in out, out


def test_strings_a_renderer_chokes_on_are_cut_and_escaped(data, tmp_path, capsys):
    """Mathtext, HTML, a 400,000-character word and control characters in names and fields: every reader
    answers quickly, the Markdown and the pages carry them escaped."""
    hostile = json.loads(json.dumps(data))
    mode = next(iter(hostile["results"]))
    name = "<img src=x onerror=alert(1)> $\\foo$ \x1b[31m" + "w" * 400_000
    hostile["results"][name] = hostile["results"].pop(mode)
    hostile["modes"][name] = hostile["modes"].pop(mode)
    hostile["tool"]["commit"] = "$\\foo$"
    hostile["environment"]["hostname"] = "\x1b[31m" + "w" * 400_000
    for run in hostile["modes"].values():
        run["stderr_tail"] = "UserWarning: " + "w" * 400_000
    bad = tmp_path / "hostile.json"
    bad.write_text(json.dumps(hostile))
    good = fuzz.find_result(fuzz.BASE_NAME)
    with deadline(90):
        code, out, err = run_main(["report", str(bad)], capsys)
        assert code == 0, err
        assert len(out) < 40_000 and "\x1b[31m" not in out
        code, out, err = run_main(["diff", "--markdown", str(good), str(bad)], capsys)
        assert code in (0, 1, 3), err
        assert "<img" not in out and "&lt;img src=x" in out
        code, out, err = run_main(["diff", "--json", str(good), str(bad)], capsys)
        # the renamed mode leaves none in common: not comparable (3), said as JSON, without rows
        assert code in (0, 1, 3) and (json.loads(out)["rows"] or code == 3), err
        pytest.importorskip("matplotlib")
        code, out, err = run_main(["plot", str(bad), "--out", str(tmp_path / "p.png")], capsys)
        assert code == 0, err
        code, out, err = run_main(["publish", str(bad), str(good), "--out", str(tmp_path / "site")], capsys)
        assert code == 0, err
    pages = "".join(p.read_text() for p in (tmp_path / "site").rglob("*.html"))
    assert "<img src=x" not in pages and "&lt;img src=x" in pages


def test_operators_named_alike_or_at_length_get_pages_of_their_own(data, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from adaln_bench.reports.site.pages import op_file

    names = ["adaln/projection", "adaln_projection", "a" * 300, "../../x", "$\\foo$"]
    assert len({op_file(n) for n in names}) == len(names)
    assert all(len(op_file(n)) < 100 and "/" not in op_file(n) for n in names)
    folder = tmp_path / "in"
    folder.mkdir()
    for i, name in enumerate(names):
        (folder / f"r{i}.json").write_text(json.dumps({**data, "op": name}))
    code, out, err = run_main(["publish", str(folder), "--out", str(tmp_path / "site")], capsys)
    assert code == 0, err
    assert len(list((tmp_path / "site" / "op").glob("*.html"))) == len(names)


@pytest.mark.parametrize("out", [".", ".."])
def test_publish_refuses_the_current_directory_and_leaves_nothing(out, tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code, stdout, err = run_main(["publish", str(fuzz.find_result(fuzz.BASE_NAME)), "--out", out], capsys)
    assert code == 2 and err.count("\n") == 1 and "current directory" in err, err
    assert list(tmp_path.rglob("*")) == [work]


def test_two_publishes_to_one_out_at_once_both_succeed(tmp_path):
    pytest.importorskip("matplotlib")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    argv = [sys.executable, "-m", "adaln_bench", "publish", str(fuzz.find_result(fuzz.BASE_NAME)), "--out",
            str(tmp_path / "site")]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    results = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
    assert all(code == 0 for _, _, code in results), results
    assert (tmp_path / "site" / "index.html").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]  # no temporary or .old folder left


RECIPE_VALUES = ['1', '"x"', 'true', '1.5', 'inf', 'nan', '[]', '[1, "a"]', '{}', '{ e = 1 }', '{ env = 1 }',
                 '{ env = { A = 1 } }', '{ env = [1] }', '{ description = 1 }', '{ preferred_blas = 1 }',
                 '{ tf32_matmul = "yes" }', '1979-05-27T07:32:00Z', '"' + "x" * 100_000 + '"']
RECIPE_PLACES = ["recipes = {}\n", "recipes = {{ e = {} }}\n", "[recipes.r]\nenv = {}\n",
                 "[recipes.r]\ndescription = {}\n", "[recipes.r]\ntf32_matmul = {}\n",
                 "[recipes.r]\npreferred_blas = {}\n", "[recipes.r]\nenv = {{ A = {} }}\n"]


def test_a_modes_file_of_wrong_types_is_one_line_and_exit_2(tmp_path, capsys):
    from adaln_bench.modes.recipe_file import load_recipe_file

    path = tmp_path / "modes.toml"
    failures, refused = [], []
    cases = [place.format(value) for place in RECIPE_PLACES for value in RECIPE_VALUES]
    cases += ["a = " + "[" * 3000 + "]" * 3000 + "\n", "\udcff"]
    for text in cases:
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        try:
            load_recipe_file(str(path))  # a valid recipe after all (a string where a string goes)
        except UserError as exc:
            if "\n" in str(exc) or len(str(exc)) > 400:
                failures.append((text[:60], str(exc)[:200]))
            refused.append(text)
        except Exception as exc:  # noqa: BLE001 - what the test looks for
            failures.append((text[:60], repr(exc)[:200]))
    assert not failures, failures
    assert len(refused) > len(cases) * 3 // 4
    # Through the command line (listing the modes of a valid file probes every framework: only refusals here).
    for text in refused[::12]:
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        code, out, err = run_main(["modes", "--modes-file", str(path)], capsys)
        assert code == 2 and err.count("\n") == 1, (text[:60], code, err[:200])
    os.mkfifo(tmp_path / "fifo.toml")
    with deadline(30):
        code, out, err = run_main(["modes", "--modes-file", str(tmp_path / "fifo.toml")], capsys)
    assert code == 2 and "not a regular file" in err, err


def test_a_one_line_message_never_quotes_a_key_whole(data):
    hostile = json.loads(json.dumps(data))
    hostile["results"]["m\n" + "k" * 10_000] = {"c": {"source": 1}}
    with pytest.raises(UserError) as info:
        parse_report(json.dumps(hostile), "r.json")
    assert "\n" not in str(info.value) and len(str(info.value)) < 500
