"""The README's picture of the explorer, taken in a real browser: docs/explore.png.

    python bench/explore_screenshot.py [--checkpoint checkpoints/albert] [--out docs/explore.png]

Starts `python -m minibert explore` on the default ALBERT run as a learner would, opens the page
in headless Chromium (apt-get install chromium chromium-driver; pip install selenium), and scrolls
to the inside-a-layer panel, which follows the first token the masking chose: the picture keeps the
token strip (each token read, seen, guessed and judged), which stays in view at the top, above the
panel's stages from the layer's input through attention to the feed-forward, each with the run's
own numbers and the line of code that computed it.
Without the default run it pretrains a tiny ALBERT in a temporary folder and says so, as the
picture is then of an untrained model's page.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from explore_page import REPO, headless_chromium, start_explorer, stop, wait_until_answered

WIDTH, HEIGHT = 1280, 1600  # the picture's width; its height at most
LAST_STAGE = "norm_after"  # the picture ends below this stage of the inside-a-layer panel (the attention sublayer's last)
TINY_ALBERT = ["--variant", "albert", "--steps", "40", "--hidden-size", "64", "--num-layers", "2", "--num-heads", "2",
               "--intermediate-size", "128", "--embedding-size", "32", "--eval-every", "40", "--save-every", "40"]


def tiny_albert(out: Path) -> Path:
    """A tiny ALBERT run on the default corpus, for a page to show where the default run is absent."""
    from minibert.runs.cli import main as train

    print(f"no default ALBERT run: pretraining a tiny one in {out} for the picture (its page, not the default run's)")
    if train([*TINY_ALBERT, "--out", str(out)]) != 0:
        sys.exit("the tiny ALBERT run failed")
    return out


def screenshot(checkpoint: Path, out: Path) -> Path:
    """The token strip above the inside-a-layer panel of the explorer's page on `checkpoint`, as a
    PNG; a console error stops it."""
    process, url = start_explorer(checkpoint)
    driver = headless_chromium(WIDTH, HEIGHT)
    try:
        driver.get(url)
        wait_until_answered(driver)
        errors = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
        if errors:
            sys.exit(f"the page logged errors: {errors}")
        driver.execute_script("document.getElementById('panel-inside').scrollIntoView()")  # below the strip, which stays at the top
        height = driver.execute_script(f"const stage = document.querySelector('#panel-inside [data-stage={LAST_STAGE}]');"
                                       "return stage && Math.ceil(stage.getBoundingClientRect().bottom) + 2")
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",  # the viewport ends below a whole stage
                               {"width": WIDTH, "height": min(height or HEIGHT, HEIGHT), "deviceScaleFactor": 1, "mobile": False})
        driver.execute_script("document.getElementById('panel-inside').scrollIntoView()")
        out.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(out))
    finally:
        driver.quit()
        stop(process)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", type=Path, default=Path("checkpoints/albert"),
                        help="a run folder, relative to the repository (the page shows it as given)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "explore.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        found = (REPO / args.checkpoint / "run.json").is_file()
        checkpoint = args.checkpoint if found else tiny_albert(Path(scratch) / "albert")
        print(f"wrote {screenshot(checkpoint, args.out)} (python -m minibert explore {checkpoint})")


if __name__ == "__main__":
    main()
