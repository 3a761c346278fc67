"""Benchmark: how soon the explorer answers a learner, on one CPU thread.

    python bench/explore_speed.py [RUN ...]        (default: the default runs in checkpoints/)

For each run: start-up, from starting `python -m minibert explore RUN` to its server answering
the page (GET /), and to the page's first answer (the overview and the run's own text, which the
page asks for on load); then each interaction's answer time, the median of REPEATS: a typed text
with a [MASK], Draw again on the run's own text (a new draw each time), and another token followed
inside a layer (a click in the strip: /api/inside, each time the next token, at the next layer).
Answers are timed at the server (HTTP) and, where Chromium is installed, in the page (the click to
the drawn answer).
The aims it prints each figure beside are AIMS (seconds): start-up, and one answer.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import statistics
import time
from pathlib import Path
from urllib.parse import quote, urlsplit

from explore_page import CHROMEDRIVER, CHROMIUM, REPO, headless_chromium, start_explorer, stop, wait_until_answered

DEFAULT_RUNS = ("bert", "roberta", "albert", "electra", "distilbert")
TEXTS = ("The [MASK] returns a list of the values it found.", "A function is a [MASK] of code that runs when called.")
REPEATS = 7
AIMS = {"start": 5.0, "answer": 0.3}


def get(url: str, path: str) -> float:
    """Seconds to fetch `path` from the server at `url` (a refusal while it starts is retried)."""
    address = urlsplit(url)
    start = time.perf_counter()
    while True:
        try:
            connection = http.client.HTTPConnection(address.hostname, address.port, timeout=60)
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            connection.close()
            break
        except ConnectionRefusedError:
            time.sleep(0.01)
    if response.status != 200:
        raise RuntimeError(f"{path} answered {response.status}")
    return time.perf_counter() - start


def layers(url: str) -> int:
    """How many layers the served model has (its model panel's count)."""
    address = urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=60)
    connection.request("GET", "/api/overview")
    count = json.loads(connection.getresponse().read())["model"]["layers"]
    connection.close()
    return count


def server_times(url: str) -> dict[str, float]:
    """The median answer of each interaction, asked of the server as the page asks it."""
    depth = layers(url)
    typed = [get(url, f"/api/explore?draw=0&text={quote(TEXTS[i % len(TEXTS)])}") for i in range(REPEATS)]
    drawn = [get(url, f"/api/explore?draw={draw}") for draw in range(1, REPEATS + 1)]
    inside = [get(url, f"/api/inside?draw=0&position={1 + i}&layer={i % depth}") for i in range(REPEATS)]
    return {"typed text": statistics.median(typed), "Draw again": statistics.median(drawn), "a token inside": statistics.median(inside)}


def page_times(driver, url: str) -> dict[str, float]:
    """The median time from a click to the answer drawn in the page."""
    driver.get(url)
    wait_until_answered(driver)

    def timed(button: str, text: str | None = None) -> float:
        driver.execute_script("window.exploreReady = false")
        if text is not None:
            box = driver.find_element("id", "text")
            box.clear()
            box.send_keys(text)
        start = time.perf_counter()
        driver.find_element("css selector", button).click()
        wait_until_answered(driver)
        return time.perf_counter() - start

    drawn = [timed("#draw-again") for _ in range(REPEATS)]
    inside = [timed(f"#strip [data-position='{1 + i}']") for i in range(REPEATS)]
    typed = [timed("#run", TEXTS[i % len(TEXTS)]) for i in range(REPEATS)]
    return {"typed text": statistics.median(typed), "Draw again": statistics.median(drawn), "a token inside": statistics.median(inside)}


def measure(run: Path, driver) -> None:
    start = time.perf_counter()
    process, url = start_explorer(run)
    try:
        get(url, "/")
        page = time.perf_counter() - start
        get(url, "/api/overview"), get(url, "/api/explore?draw=0")
        first = time.perf_counter() - start
        print(f"{run}: start-up {page:.2f} s to the page, {first:.2f} s to its first answer (aim: {AIMS['start']:.0f} s)")
        answers = {"server": server_times(url)} | ({"page": page_times(driver, url)} if driver else {})
        for where, times in answers.items():
            print(f"  answer at the {where}: " + ", ".join(f"{name} {1000 * s:.0f} ms" for name, s in times.items())
                  + f" (median of {REPEATS}; aim: {1000 * AIMS['answer']:.0f} ms)")
    finally:
        stop(process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="*", type=Path, help="run folders, relative to the repository")
    args = parser.parse_args()
    runs = args.runs or [Path("checkpoints") / name for name in DEFAULT_RUNS if (REPO / "checkpoints" / name / "run.json").is_file()]
    if not runs:
        raise SystemExit("no run to measure: python train.py --variant albert makes the default one")
    browser = all(shutil.which(path) for path in (CHROMIUM, CHROMEDRIVER))
    if not browser:
        print(f"no {CHROMIUM} and {CHROMEDRIVER}: answers are timed at the server only")
    driver = headless_chromium() if browser else None
    try:
        for run in runs:
            measure(run, driver)
    finally:
        if driver:
            driver.quit()


if __name__ == "__main__":
    main()
