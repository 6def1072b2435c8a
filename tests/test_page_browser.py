"""The review page (report.html) in a real browser: Debian's headless Chromium driven by selenium with
Debian's chromedriver (tools/page_screenshot.py; nothing downloaded). Marker `browser`: deselect with
-m 'not browser'; without the browser these tests fail, they do not skip.

Two pages: the real zero-policy run the evidence tests already make (conftest.zero_development_run,
shared, so no extra rollout), and a synthetic folder of all 10,030 LIBERO-plus variants.
LIBERO_PAGE_SCREENSHOT=docs/review-page.png also saves the real run's overview as that PNG.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from evidence_helpers import records, run_dirs
from page_helpers import write_plus_run

pytestmark = pytest.mark.browser
TOOL = Path(__file__).resolve().parents[1] / "tools" / "page_screenshot.py"
FAILED = ("failure", "policy_error")  # the outcomes of a failed item


def _tool() -> Any:
    spec = importlib.util.spec_from_file_location("page_screenshot", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def driver() -> Any:
    browser = _tool().browser()
    yield browser
    browser.quit()


def console_errors(driver: Any) -> list[dict[str, Any]]:
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def choose(driver: Any, **values: str) -> None:
    """Set filters (select id f-<name>) as a reviewer would: the value, then a change event."""
    driver.execute_script(
        "for (const [name, value] of Object.entries(arguments[0])) {"
        "  const select = document.getElementById('f-' + name);"
        "  if (![...select.options].some(o => o.value === value)) throw new Error('no option ' + value);"
        "  select.value = value; select.dispatchEvent(new Event('change')); }", values)


def shown_cells(driver: Any) -> list[str]:
    """Every row the current filters match, page by page (the page renders 50 rows at a time)."""
    cells: list[str] = []
    while True:
        cells += driver.execute_script(
            "return [...document.querySelectorAll('#episode-rows tr')].map(r => r.dataset.cell)")
        if driver.execute_script("return document.getElementById('next').disabled"):
            return cells
        driver.execute_script("document.getElementById('next').click()")


def opened(driver: Any, cell: str) -> Any:
    """The episode detail once it shows `cell`. A click on a row or a grid cell sets location.hash and
    the page opens the episode on the hashchange event, which the browser fires after the click has
    returned (a task later), so the detail is waited for, not read at once."""
    from selenium.webdriver.support.ui import WebDriverWait

    def shown(d: Any) -> Any:
        detail = d.find_element("id", "episode-detail")
        return detail if detail.get_attribute("data-cell") == cell else False

    return WebDriverWait(driver, 10).until(shown, f"the episode detail never showed {cell}")


def matches(driver: Any) -> int:
    return int(driver.execute_script("return document.getElementById('episode-count').dataset.matches"))


# real_libero: when this is its worker's first test to ask, zero_development_run's real run is made here.
@pytest.mark.real_libero
def test_a_real_runs_page_filters_one_tasks_failures_and_plays_an_episodes_video(driver, zero_development_run):
    _, path = zero_development_run
    (run_dir,) = run_dirs(path / "reports")
    found = records(run_dir)
    page = run_dir / "report.html"
    driver.get(page.as_uri())
    overview = driver.find_element("id", "overview")
    assert overview.is_displayed() and "LIBERO results" in overview.text and "Per task" in overview.text
    assert "libero_10-t00" in driver.find_element("id", "tasks").text

    choose(driver, task="libero_10-t00", outcome="status:failed")
    expected = sorted(c for c, r in found.items()
                      if c.startswith("libero_10-t00-") and r["outcome"]["outcome"] in FAILED)
    assert expected and sorted(shown_cells(driver)) == expected

    driver.find_element("css selector", f'#episode-rows tr[data-cell="{expected[0]}"]').click()
    video = opened(driver, expected[0]).find_element("id", "episode-video")
    assert video.get_attribute("src").endswith(found[expected[0]]["video"]["path"])
    driver.execute_script("const v = arguments[0]; v.muted = true; v.play();", video)
    deadline = time.monotonic() + 10
    while driver.execute_script("return arguments[0].currentTime", video) <= 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert driver.execute_script("return arguments[0].currentTime", video) > 0, "the video never advanced"
    assert console_errors(driver) == []

    if os.environ.get("LIBERO_PAGE_SCREENSHOT"):
        _tool().overview_png(driver, page, Path(os.environ["LIBERO_PAGE_SCREENSHOT"]))


@pytest.fixture(scope="module")
def plus_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """The 10,030-variant folder and the seconds its summary and page took to build. Record validation
    (tested elsewhere) is skipped here: it is most of the build time and not the page's."""
    from pytest_libero.benchmarks.libero_plus.adapter import ADAPTER as PLUS
    from pytest_libero.results.summary import rebuild

    run_dir = write_plus_run(tmp_path_factory.mktemp("plus") / "run")
    started = time.perf_counter()
    with mock.patch("pytest_libero.results.reading.is_valid_record", return_value=True), \
            mock.patch("pytest_libero.results.reading.PARALLEL_FROM", 10**9):  # no helper: they would check
        summary = rebuild(run_dir, PLUS)
    assert summary["overall"]["selected"] == 10_030
    return run_dir, time.perf_counter() - started


def test_the_10030_episode_page_is_interactive_within_3_s_and_filters_exactly(driver, plus_run):
    run_dir, _ = plus_run
    task, category = "libero_spatial Camera Viewpoints", "Camera Viewpoints"
    driver.get((run_dir / "report.html").as_uri())  # returns after the load event
    # Time to interactive: from navigation start (performance.now() counts from it) to the moment a
    # filter change has re-rendered the rows, read inside the page right after the change.
    renders = int(driver.execute_script("return document.body.dataset.renders"))
    choose(driver, task=task, outcome="status:failed")
    elapsed_ms, after = driver.execute_script("return [performance.now(), Number(document.body.dataset.renders)]")
    assert after == renders + 2  # one render per filter change: the change handlers ran
    print(f"10,030-episode page: interactive after {elapsed_ms:.0f} ms; load average {open('/proc/loadavg').read()}")
    assert elapsed_ms < 3000

    assert driver.find_element("id", "overview").is_displayed()
    assert "LIBERO-plus: suite x category x difficulty" in driver.find_element("id", "overview").text
    on_disk = {p.stem: json.loads(p.read_text()) for p in (run_dir / "episodes").glob("libero_plus-libero_spatial-*")}
    expected = sorted(c for c, r in on_disk.items()
                      if r["cell"]["benchmark"]["category"] == category and r["outcome"]["outcome"] in FAILED)
    assert len(expected) > 50  # more than one page
    assert sorted(shown_cells(driver)) == expected

    choose(driver, task="", outcome="status:errored", category=category, difficulty="3")
    expected_count = sum(1 for p in (run_dir / "episodes").glob("*.json")
                         if (r := json.loads(p.read_text()))["cell"]["benchmark"]["category"] == category
                         and r["cell"]["benchmark"]["difficulty"] == 3
                         and r["outcome"]["outcome"] in ("env_error", "crashed"))
    assert expected_count and matches(driver) == expected_count
    assert console_errors(driver) == []


def test_the_10030_episode_report_builds_quickly(plus_run):
    from pytest_libero.benchmarks.libero_plus.adapter import ADAPTER as PLUS
    from pytest_libero.results.page import render_page

    run_dir, seconds = plus_run
    summary = json.loads((run_dir / "summary.json").read_text())
    started = time.perf_counter()
    page = render_page(summary, (run_dir / "success_rates.png").read_bytes(), PLUS)
    render_s = time.perf_counter() - started
    assert page.count("<video") == 0 and page.count("<tr") < 400  # rows are the script's, not the HTML's
    print(f"10,030 episodes: summary, chart and page in {seconds:.1f} s (record validation excluded); "
          f"the page alone {render_s:.2f} s")
    assert render_s < 2


def test_a_full_mode_grid_has_a_cell_per_episode_coloured_by_outcome_that_opens_it(driver, tmp_path):
    from run_folders import full_protocol, write_run
    from pytest_libero.benchmarks.libero.adapter import ADAPTER as LIBERO
    from pytest_libero.core.outcomes import status
    from pytest_libero.results.summary import rebuild

    kinds = ("success", "failure", "env_error", "policy_error", "not_run")
    outcomes = {f"libero_goal-t{t:02d}-s{i:02d}-seed{seed}": kinds[(t + i + seed) % 5]
                for t in range(3) for i in range(7) for seed in (7, 8)}
    run_dir = write_run(tmp_path / "run", full_protocol(seeds=(7, 8)), outcomes)
    rebuild(run_dir, LIBERO)
    driver.get((run_dir / "report.html").as_uri())
    cells = driver.execute_script(
        "return [...document.querySelectorAll('#grid a')].map(a => [a.getAttribute('href'), a.className])")
    assert sorted(cells) == sorted([f"#episode={c}", status(o)] for c, o in outcomes.items())
    target = "libero_goal-t02-s05-seed8"
    driver.find_element("css selector", f'#grid a[href="#episode={target}"]').click()
    detail = opened(driver, target)
    assert detail.is_displayed() and detail.get_attribute("data-cell") == target
    assert outcomes[target] in detail.text
    assert console_errors(driver) == []


def test_the_episode_list_sorts_by_goal_progress_and_a_row_says_which_predicates_held(driver, tmp_path):
    from run_folders import full_protocol, write_run
    from pytest_libero.benchmarks.libero.adapter import ADAPTER as LIBERO
    from pytest_libero.results.summary import rebuild

    held = {"libero_10-t00-s00": [True, False], "libero_10-t00-s01": [False, False],
            "libero_10-t00-s02": [True, True], "libero_10-t00-s03": [False, True]}
    outcomes = {c: "success" if all(h) else "failure" for c, h in held.items()}
    outcomes["libero_10-t00-s04"] = "not_run"
    run_dir = write_run(tmp_path / "run", full_protocol(), outcomes, progress=held)
    rebuild(run_dir, LIBERO)
    driver.get((run_dir / "report.html").as_uri())
    choose(driver, sort="progress-asc")
    shown = shown_cells(driver)
    assert shown[0] == "libero_10-t00-s01" and shown[-2:] == ["libero_10-t00-s02", "libero_10-t00-s04"]
    assert set(shown[1:3]) == {"libero_10-t00-s00", "libero_10-t00-s03"}  # the two at one half
    choose(driver, sort="progress-desc")
    assert shown_cells(driver)[0] == "libero_10-t00-s02"
    text = driver.find_element("css selector", '#episode-rows tr[data-cell="libero_10-t00-s00"] td.progress').text
    assert text.startswith("1 of 2 at the end (at most 1); (on object_0 plate_1) first at control 10")
    assert "goal progress at end" in driver.find_element("id", "overview").text
    assert console_errors(driver) == []
