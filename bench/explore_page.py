"""The explorer's page as a learner meets it, for the scripts beside this one and tests/test_explore_browser.py:
`python -m minibert explore DIR` started as a user starts it, and Debian's headless Chromium.

selenium is told where Debian's chromium-driver is (Service), so it never downloads a driver.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"  # apt-get install chromium chromium-driver
REPO = Path(__file__).resolve().parents[1]
WAIT_S = 30


def headless_chromium(width: int = 1280, height: int = 1000):
    """A headless Chromium whose console is kept (goog:loggingPrefs), for error checks."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                 f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def wait_until_answered(driver) -> None:
    """Until the page has rendered an answer (page.html sets window.exploreReady then); a message
    the page shows as an error fails."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, WAIT_S, poll_frequency=0.01).until(lambda d: d.execute_script("return window.exploreReady === true"),
                                        message="the page rendered no answer")
    message = driver.find_element("id", "message")
    assert "error" not in message.get_attribute("class"), message.text


def start_explorer(directory: str | Path) -> tuple[subprocess.Popen, str]:
    """`python -m minibert explore DIR --no-browser` in a process of its own, on one thread; its
    address, read from the line it prints when it serves."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "minibert", "explore", str(directory), "--no-browser"], cwd=REPO,
                               env=env, stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:\d+/", line)
    if not found:
        process.kill()
        raise RuntimeError(f"python -m minibert explore {directory} did not serve: {line.strip() or 'no output'}")
    return process, found.group(0)


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    process.wait(timeout=30)
