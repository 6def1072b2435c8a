"""README.md's "Use" section, run as a new user would: from an empty folder (no conftest, no
pyproject, no testpaths) against the installed package. Collection claims are checked with
--collect-only (every `pytest` line: exit 0, and what is collected is what the header says);
the run, report, compare and resume lines share one real run with a tiny budget."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from liberoplus_helpers import write_classification

README = Path(__file__).resolve().parents[1] / "README.md"
ADAPTERS_DOC = README.parent / "docs" / "writing-adapters.md"


def use_commands() -> list[str]:
    """The command lines of the indented blocks of README.md's "Use" section (continuations joined)."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## Use\n", 1)[1].split("\n## ", 1)[0]
    lines, pending = [], ""
    for raw in section.splitlines():
        if not raw.startswith("    "):
            continue
        line = pending + raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        lines.extend(part.strip() for part in re.split(r"\s#\s", line, maxsplit=1)[0].split(" ; "))
    return lines


def as_collection(command: str, folder: Path, checkout: Path | None = None) -> list[str] | None:
    """The arguments of a README `pytest` line for a collect-only check, its placeholders filled:
    `...` dropped (a LIBERO-PRO suite gets the task_coverage scope it stands for), the adapter file
    and run folder the line names created, LIBERO-plus's classification file written (the test
    data's), RoboMemArena's checkout PATH given (`checkout`, assembled from ../shared/data), the policy's
    interpreter (`--libero-policy-python`) this one. `-n N`
    stays: collection runs in-process (tests/test_scale_real.py runs real workers). None for a line
    that is not `pytest`."""
    args = shlex.split(command.replace("<run-id>", "run1"))
    if args[0] != "pytest":
        return None
    args = [a for a in args[1:] if a != "..."]
    if "--libero-suite" in args and "--libero-scope" not in args:
        args = ["--libero-scope", "task_coverage", *args]
    for at, arg in enumerate(args):
        if ".py:" in arg:
            path = folder / arg.rpartition(":")[0]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("def build(**kwargs):\n    raise AssertionError('collection builds nothing')\n")
        if arg.startswith("reports/"):
            (folder / arg).mkdir(parents=True, exist_ok=True)
        if arg == "task_classification.json":
            write_classification(folder / arg)
        if at and args[at - 1] == "--libero-policy-python":  # the policy's venv: this one stands in
            args[at] = sys.executable
        if arg == "--libero-robomemarena-checkout=PATH":
            assert checkout is not None, command
            args[at] = f"--libero-robomemarena-checkout={checkout}"
    return args


COMMANDS = use_commands()


def adapter_doc_commands() -> list[str]:
    """docs/writing-adapters.md's `pytest ...` lines: inline ones and indented blocks (joined)."""
    text = ADAPTERS_DOC.read_text(encoding="utf-8")
    found = re.findall(r"`(pytest [^`]*)`", text)
    found += [m.replace("\\\n", " ") for m in re.findall(r"^    (pytest (?:.*\\\n)*.*)$", text, re.M)]
    return [" ".join(c.split()) for c in found]


def adapter_doc_conftest() -> str:
    """The doc's conftest example: the python block that defines pytest_libero_make_policy."""
    blocks = re.findall(r"```python\n(.*?)```", ADAPTERS_DOC.read_text(encoding="utf-8"), re.S)
    (block,) = [b for b in blocks if "def pytest_libero_make_policy" in b]
    return "class MyPolicy:\n    def __init__(self, **kwargs):\n        pass\n\n" + block


@pytest.mark.parametrize("command", adapter_doc_commands())
def test_each_writing_adapters_line_collects_what_its_header_says(pytester, command):
    """With the doc's conftest hook in the folder (its names hook optional), `{...}` filled in."""
    pytester.makeconftest(adapter_doc_conftest())
    args = as_collection(command.replace("'{...}'", "'{}'"), pytester.path)
    assert args is not None
    result = pytester.runpytest("--collect-only", "-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.OK, (command, result.errlines)
    header = "\n".join(result.outlines)
    assert re.search(r"libero: .*?2 cell\(s\)", header) and "collected 2 items" in header, header[-600:]


def test_the_use_section_was_read():
    pytest_lines = [c for c in COMMANDS if c.startswith("pytest ")]
    assert len(pytest_lines) >= 15 and any("--libero-budget decisions" in c for c in pytest_lines)


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.startswith("pytest ")])
def test_each_pytest_line_collects_what_its_header_says(pytester, command, request):
    checkout = request.getfixturevalue("robomemarena_checkout") if "robomemarena" in command else None
    args = as_collection(command, pytester.path, checkout)
    assert args is not None
    args = [a for a in args if a not in ("--collect-only", "-q")]
    result = pytester.runpytest("--collect-only", "-p", "no:cacheprovider", *args)
    if "--libero-against" in args:  # its RUN_A must be a finished run (tests/test_sequential_runs.py runs one)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, (command, result.errlines)
        assert "is not a pytest-libero run folder" in "\n".join(result.errlines), result.errlines
        return
    assert result.ret == pytest.ExitCode.OK, (command, result.errlines)
    header = "\n".join(result.outlines + result.errlines)
    cells = int(re.search(r"libero: .*?(\d+) cell\(s\)", header).group(1))
    collected = re.search(r"collected (\d+) items?", header)  # before -k/-m deselect
    assert collected is not None and int(collected.group(1)) == cells, (command, header[-600:])


def python_m(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=folder, capture_output=True, text=True, timeout=600)


def test_schedule_line_prints_the_preset(tmp_path):
    (line,) = [c for c in COMMANDS if " schedule " in c]
    result = python_m(tmp_path, *shlex.split(line)[1:])
    assert result.returncode == 0 and "lerobot-docs" in result.stdout, result.stderr


@pytest.mark.real_libero
def test_a_tiny_real_run_then_report_compare_and_resume_alone(tmp_path):
    """`pytest --libero-video failures --libero-output DIR` (one cell, one policy call), then the
    README's report and compare lines on it, and `pytest --libero-resume RUN` alone."""
    (line,) = [c for c in COMMANDS if "--libero-video failures" in c]
    args = [a.replace("/data/libero-runs", "out") for a in shlex.split(line)[1:]]
    tiny = ["--libero-budget", "decisions", "--libero-max-policy-calls", "1", "--libero-task-ids", "0",
            "--libero-scope", "development", "-p", "no:cacheprovider"]
    run = python_m(tmp_path, "-m", "pytest", *args, *tiny)
    assert "libero: scope development, 1 cell(s)" in run.stdout, run.stdout[-2000:]
    assert run.returncode == 1 and "selected 1 = passed 0 + failed 1" in run.stdout, run.stdout[-2000:]
    (run_dir,) = (tmp_path / "out").glob("*/*")
    for command in ("export", "report", "compare"):  # compare last: its output is checked below
        (readme,) = [c for c in COMMANDS if c.startswith(f"python -m pytest_libero {command} ")]
        given = shlex.split(readme)[1:4]  # -m pytest_libero COMMAND
        result = python_m(tmp_path, *given, str(run_dir), *([str(run_dir)] if command == "compare" else []))
        assert result.returncode == 0, (command, result.stderr)
    assert "(policy zero)" in result.stdout and "B-A pp" in result.stdout
    (readme,) = [c for c in COMMANDS if c.startswith("pytest --libero-resume ")]
    assert shlex.split(readme)[1:] == ["--libero-resume", "reports/zero/<run-id>"]  # nothing else on the line
    resumed = python_m(tmp_path, "-m", "pytest", "-p", "no:cacheprovider", "--libero-resume", str(run_dir))
    assert "with its recorded options" in resumed.stdout and "1 cell(s)" in resumed.stdout, resumed.stdout[-2000:]
    assert "[resumed: recorded earlier]" in resumed.stdout
    assert len(json.loads((run_dir / "summary.json").read_text())["episodes"]) == 1
    # The shards-by-hand line's merge (of this one folder) and the Slurm line as a dry run (the real
    # cluster's submit, status and resubmit are tests/test_slurm_real.py's).
    (merge,) = [c for c in COMMANDS if c.startswith("python -m pytest_libero merge ")]
    assert shlex.split(merge)[1:4] == ["-m", "pytest_libero", "merge"]
    merged = python_m(tmp_path, "-m", "pytest_libero", "merge", "merged", str(run_dir))
    assert merged.returncode == 0 and (tmp_path / "merged" / "summary.json").is_file(), merged.stderr
    (submit,) = [c for c in COMMANDS if c.startswith("python -m pytest_libero submit slurm --shards")]
    words = [w for w in shlex.split(submit)[1:] if w != "..."]
    dry = python_m(tmp_path, *words[:words.index("--")], "--dry-run", *words[words.index("--"):])
    assert dry.returncode == 0 and "(130 cell(s) in 8 shard(s))" in dry.stdout, dry.stderr


def marked_block(marker: str) -> list[str]:
    """The lines of README.md's ```sh block right after the line `<!-- MARKER -->`."""
    text = README.read_text(encoding="utf-8")
    after = text.split(f"\n<!-- {marker} -->\n```sh\n", 1)
    assert len(after) == 2, f"README.md has no ```sh block right after <!-- {marker} -->"
    return after[1].split("\n```", 1)[0].splitlines()


def test_the_fast_tier_block_selects_every_fast_test_and_no_real_one(request):
    """The block runs the suite's tests with `.venv/bin/`, and its -m expression, evaluated on the
    markers of every test this run collected, selects exactly the tests without a slow marker
    (tests/suite_tiers.py gives those `fast`); the README names every area's marker."""
    from _pytest.mark.expression import Expression
    from suite_tiers import AREAS, SLOW_MARKERS

    (line,) = marked_block("fast tier")
    args = shlex.split(line)
    assert args[:2] == [".venv/bin/pytest", "tests"] and "-m" in args, line
    expression = Expression.compile(args[args.index("-m") + 1])
    for item in request.session.items:  # the full gate's: every test (a -m run has only its selection)
        names = {mark.name for mark in item.iter_markers()}
        selected = expression.evaluate(lambda name, /, **kwargs: name in names)  # noqa: B023
        assert selected == names.isdisjoint(SLOW_MARKERS), (item.nodeid, sorted(names))
    for slow in SLOW_MARKERS:  # what a test carries with one of them (no `fast`), whatever this run selected
        assert not expression.evaluate(lambda name, /, **kwargs: name in {slow, *AREAS}), slow  # noqa: B023
    readme = README.read_text(encoding="utf-8")
    assert all(f"`-m {area}`" in readme for area in AREAS), "README.md names every area's marker"
