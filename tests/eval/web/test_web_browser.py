"""The web board in a real headless browser (Debian's chromium and chromium-driver, driven by
selenium), as a person uses it: click a piece and its square, see the model's reply and the
arrows, drag a piece, undo, turn the search on, paste a FEN. Skipped, saying what is missing,
where the browser or selenium is absent (`make setup` installs them)."""

from __future__ import annotations

import shutil

import chess
import pytest

WAIT_S = 60  # a model reply and an analysis on a loaded two-core machine
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium is not installed (make setup installs it)"
    )
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    binary = next(filter(None, map(shutil.which, BROWSERS)), None)
    driver_path = shutil.which("chromedriver")
    if binary is None or driver_path is None:
        pytest.skip("no chromium or chromedriver on PATH (make setup installs Debian's)")
    options = Options()
    options.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,760"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    yield driver
    driver.quit()


def wait(driver, condition, message: str):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # The page redraws the board and the table on each answer: an element may go stale.
    waiter = WebDriverWait(driver, WAIT_S, ignored_exceptions=[StaleElementReferenceException])
    return waiter.until(condition, message)


def css(driver, selector: str):
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def text_of(driver, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, element_id).text


def square(driver, name: str):
    return css(driver, f'rect[data-square="{name}"]')[0]


def open_page(driver, url: str) -> None:
    driver.get(url)
    wait(driver, lambda d: css(d, "g.arrow") and css(d, "#moves tbody tr"), "no analysis shown")


def sans(driver) -> list[str]:
    return [word for word in text_of(driver, "sans").split() if not word.endswith(".")]


def test_click_a_move_and_see_the_reply_and_the_arrows(browser, web_server, tmp_path):
    open_page(browser, web_server[0])
    assert text_of(browser, "status") == "White to move"
    square(browser, "e2").click()
    assert css(browser, "circle.target"), "the piece's legal squares are not shown"
    square(browser, "e4").click()
    wait(browser, lambda d: len(sans(d)) == 2, "the model did not reply")
    first, reply = sans(browser)
    assert first == "e4"
    board = chess.Board()
    board.push_san("e4")
    board.push_san(reply)  # raises if the reply is not legal
    wait(browser, lambda d: d.find_element("id", "status").text == "White to move", "no turn")
    wait(browser, lambda d: css(d, "g.arrow"), "no arrows for the new position")
    arrows = {a.get_attribute("data-move") for a in css(browser, "g.arrow")}
    assert arrows <= {m.uci() for m in board.legal_moves}
    rows = css(browser, "#moves tbody tr")
    assert len(rows) == board.legal_moves.count()
    assert "%" in text_of(browser, "value-text")
    # The piece stands where the model put it.
    move = board.peek()
    to = chess.square_name(move.to_square)
    assert css(browser, f'image[data-square="{to}"]')[0].get_attribute("data-piece")[0] == "b"
    assert browser.save_screenshot(str(tmp_path / "web-board.png"))
    assert (tmp_path / "web-board.png").stat().st_size > 10_000


def test_drag_a_piece_undo_and_flip(browser, web_server):
    from selenium.webdriver.common.action_chains import ActionChains

    open_page(browser, web_server[0])
    # By offsets, as a hand moves: the board redraws its squares once the knight is picked up.
    start, end = square(browser, "g1"), square(browser, "f3")
    dx = end.location["x"] - start.location["x"]
    dy = end.location["y"] - start.location["y"]
    drag = ActionChains(browser).click_and_hold(start).move_by_offset(dx // 2, dy // 2)
    drag.move_by_offset(dx - dx // 2, dy - dy // 2).release().perform()
    wait(browser, lambda d: len(sans(d)) == 2, "the dragged move or the reply is missing")
    assert sans(browser)[0] == "Nf3"
    wait(browser, lambda d: css(d, "g.arrow"), "no arrows after the reply")
    css(browser, "#undo")[0].click()  # the model's reply and the user's move
    wait(browser, lambda d: sans(d) == [], "undo did not go back to the start")
    wait(browser, lambda d: css(d, 'image[data-square="g1"]'), "the knight is not back on g1")
    before = square(browser, "a1").location
    css(browser, "#flip")[0].click()
    after = square(browser, "a1").location
    assert after["y"] < before["y"], "a1 should be at the top once flipped"


def test_search_visits_and_a_pasted_fen(browser, web_server):
    open_page(browser, web_server[0])
    fen = "r1bqkbnr/pppp1ppp/2n5/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR b KQkq - 3 3"
    css(browser, "#model-side option[value='none']")[0].click()
    css(browser, "#paste")[0].send_keys(fen)
    css(browser, "#load")[0].click()
    wait(browser, lambda d: d.find_element("id", "fen").get_attribute("value") == fen, "no FEN")
    playouts = css(browser, "#playouts")[0]
    playouts.clear()
    playouts.send_keys("24")
    css(browser, "#search")[0].click()

    def visits(driver):
        cells = [
            row.find_elements("css selector", "td")[3].text
            for row in css(driver, "#moves tbody tr")
        ]
        numbers = [int(c) for c in cells if c.isdigit()]
        return numbers if sum(numbers) == 24 else None

    assert sum(wait(browser, visits, "no visit counts")) == 24
    assert "24 playouts" in text_of(browser, "summary")
