"""The picture of the web board in docs/play.md: the server in this process, the page in headless
chromium (as tests/eval/web drives it), a few moves played by clicking, the search on, a
screenshot saved as a palette PNG.

    python -m tools.web_screenshot [--out docs/images/web-board.png] [--playouts 200]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import threading

from PIL import Image
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from eval.web.__main__ import load_models
from eval.web.api import WebSettings
from eval.web.http_server import WebServer
from eval.web.models import ModelStore

OPENING = ("e2e4", "g1f3", "f1c4")  # the user's moves; the model answers each
WINDOW = (1060, 720)
COLOURS = 128  # a palette keeps the picture small enough to commit


def shoot(url: str, out: str, playouts: int) -> None:
    options = Options()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"):
        options.add_argument(flag)
    options.add_argument(f"--window-size={WINDOW[0]},{WINDOW[1]}")
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    wait = WebDriverWait(driver, 300, ignored_exceptions=[StaleElementReferenceException])

    def squares(name):
        return driver.find_element(By.CSS_SELECTOR, f'rect[data-square="{name}"]')

    def sans():
        return [w for w in driver.find_element(By.ID, "sans").text.split() if "." not in w]

    try:
        driver.get(url)
        for i, move in enumerate(OPENING):
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "g.arrow"))
            squares(move[:2]).click()
            squares(move[2:]).click()
            wait.until(lambda d, n=2 * (i + 1): len(sans()) == n)
        playouts_box = driver.find_element(By.ID, "playouts")
        playouts_box.clear()
        playouts_box.send_keys(str(playouts))
        driver.find_element(By.ID, "search").click()
        wait.until(lambda d: f"{playouts} playouts" in d.find_element(By.ID, "summary").text)
        png = driver.get_screenshot_as_png()
    finally:
        driver.quit()
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(COLOURS)
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    image.save(out, optimize=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.web_screenshot", description=__doc__)
    parser.add_argument("--out", default="docs/images/web-board.png")
    parser.add_argument("--playouts", type=int, default=200)
    args = parser.parse_args(argv)
    if not (shutil.which("chromedriver") and shutil.which("chromium")):
        print(
            "web_screenshot: error: needs chromium and chromedriver (make setup)", file=sys.stderr
        )
        return 2
    store = ModelStore.create(None, None, os.getcwd())
    load_models(store)
    server = WebServer(("127.0.0.1", 0), store, WebSettings())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        shoot(server.url, args.out, args.playouts)
    finally:
        server.shutdown()
        server.server_close()
    print(f"web_screenshot: wrote {args.out} ({os.path.getsize(args.out)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
