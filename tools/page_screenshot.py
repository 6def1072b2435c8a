"""Open a run's review page (report.html) in headless Chromium and save a PNG of its overview.

    python tools/page_screenshot.py RUN_DIR OUT.png

Debian's `chromium` and `chromium-driver` packages, driven by selenium (apt-get install chromium
chromium-driver; pip install selenium): nothing is downloaded. tests/test_page_browser.py drives the
page with the same `browser()`, and writes docs/review-page.png with `overview_png` when
LIBERO_PAGE_SCREENSHOT names a file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def browser(width: int = 1280, height: int = 900) -> Any:
    """A headless Chromium (the system's) under selenium, with the console kept for get_log("browser")."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).is_file():
            raise FileNotFoundError(f"{path} is missing: apt-get install -y chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={width},{height}",
                     "--autoplay-policy=no-user-gesture-required", "--allow-file-access-from-files"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))


def overview_png(driver: Any, page: Path, out: Path) -> Path:
    """Load `page` and save a PNG of its overview section (summary, per-suite and per-task tables)."""
    from selenium.webdriver.common.by import By

    driver.get(page.resolve().as_uri())
    out.parent.mkdir(parents=True, exist_ok=True)
    # Chromium captures only what is inside the window: make the window as tall as the overview.
    width = driver.get_window_size()["width"]
    height = driver.execute_script("return document.getElementById('overview').getBoundingClientRect().bottom")
    driver.set_window_size(width, int(height) + 200)
    driver.find_element(By.ID, "overview").screenshot(str(out))
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not (Path(argv[0]) / "report.html").is_file():
        print("usage: python tools/page_screenshot.py RUN_DIR OUT.png (RUN_DIR holds report.html)", file=sys.stderr)
        return 2
    driver = browser()
    try:
        print(overview_png(driver, Path(argv[0]) / "report.html", Path(argv[1])))
    finally:
        driver.quit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
