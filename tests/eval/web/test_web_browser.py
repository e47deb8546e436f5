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


def square_box(driver, name: str) -> dict:
    """The square's {x, y, width, height} on the page, read in one go (the board redraws)."""
    return driver.execute_script(
        "const r = document.querySelector(`rect[data-square='${arguments[0]}']`)"
        ".getBoundingClientRect(); return {x: r.x, y: r.y, width: r.width, height: r.height};",
        name,
    )


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


def choose(driver, select_id: str, value: str) -> None:
    css(driver, f"#{select_id} option[value='{value}']")[0].click()


def load_fen(driver, fen: str) -> None:
    """The position on the board with the model playing neither side, its analysis shown."""
    choose(driver, "model-side", "none")
    paste = css(driver, "#paste")[0]
    paste.clear()
    paste.send_keys(fen)
    css(driver, "#load")[0].click()
    wait(driver, lambda d: d.find_element("id", "fen").get_attribute("value") == fen, "no FEN")
    wait(driver, lambda d: css(d, "g.arrow") and css(d, "#moves tbody tr"), "no analysis")


def headings(driver) -> list[str]:
    """The move table's headings, read in one go (the page redraws the table on each answer)."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#moves thead th')].map((th) => th.textContent);"
    )


def table(driver) -> list[list[str]]:
    """The move table's cells, row by row, read in one go."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#moves tbody tr')]"
        ".map((tr) => [...tr.cells].map((td) => td.textContent));"
    )


def test_search_visits_and_a_pasted_fen(browser, web_server):
    open_page(browser, web_server[0])
    fen = "r1bqkbnr/pppp1ppp/2n5/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR b KQkq - 3 3"
    load_fen(browser, fen)
    playouts = css(browser, "#playouts")[0]
    playouts.clear()
    playouts.send_keys("24")
    css(browser, "#search")[0].click()

    def visits(driver):
        if headings(driver)[3:4] != ["Visits"]:
            return None  # the searchless analysis still shown
        numbers = [int(row[3]) for row in table(driver) if row[3:4] and row[3].isdigit()]
        return numbers if sum(numbers) == 24 else None

    assert sum(wait(browser, visits, "no visit counts")) == 24
    assert "24 playouts" in text_of(browser, "summary")
    # Searching, the table goes by visits, the move the search plays first; a move it never
    # tried has no Q (the tree would show the root's value there).
    assert headings(browser) == ["Move", "Policy", "Win", "Visits", "Q"]
    rows = table(browser)
    counts = [int(row[3]) for row in rows]
    assert counts == sorted(counts, reverse=True)
    line = text_of(browser, "summary").split(", line ")[1].split()
    assert rows[0][0] == line[0]
    assert css(browser, "#moves tbody tr")[0].get_attribute("class") == "best"
    unvisited = [row for row in rows if row[3] == "0"]
    assert unvisited, "24 playouts leave some of the 28 moves untried"
    assert all("%" not in row[4] for row in unvisited)
    assert all(row[4].endswith("%") for row in rows if row[3] != "0")


# The value bar's geometry in CSS pixels: the bar, its white fill and its label, top to bottom.
BAR_GEOMETRY = """
const box = (id) => { const r = document.getElementById(id).getBoundingClientRect();
  return [r.top, r.bottom]; };
const label = document.getElementById("value-text");
return {bar: box("value-bar"), fill: box("value-fill"), label: box("value-text"),
  color: getComputedStyle(label).color, text: label.textContent};
"""


def luminance(css_color: str) -> float:
    red, green, blue = (int(v) for v in css_color[css_color.index("(") + 1 : -1].split(",")[:3])
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255


def bar_reads_well(driver, white_at_bottom: bool) -> str | None:
    """What is wrong with the value bar, or None: the fill grows from White's side of the
    board, the label sits at the fill's end inside the bar, dark on the white fill or light
    on the dark part beyond it."""
    g = driver.execute_script(BAR_GEOMETRY)
    (bar_top, bar_bottom), (fill_top, fill_bottom) = g["bar"], g["fill"]
    label_top, label_bottom = g["label"]
    if "%" not in g["text"]:
        return f"no value shown: {g['text']!r}"
    anchor, end = (fill_bottom, fill_top) if white_at_bottom else (fill_top, fill_bottom)
    if abs(anchor - (bar_bottom if white_at_bottom else bar_top)) > 1:
        return f"the fill does not start at White's side: {g}"
    if not (bar_top <= label_top and label_bottom <= bar_bottom):
        return f"the label leaves the bar: {g}"
    on_fill = fill_top - 0.5 <= label_top and label_bottom <= fill_bottom + 0.5
    if not on_fill and label_top < fill_bottom - 0.5 and label_bottom > fill_top + 0.5:
        return f"the label straddles the fill's end: {g}"
    if min(abs(label_top - end), abs(label_bottom - end)) > 10:
        return f"the label is not at the fill's end: {g}"
    light = luminance(g["color"])
    if on_fill and light > 0.3 or not on_fill and light < 0.7:
        return f"the label does not contrast with what is behind it: {g}"
    return None


def test_value_bar_label_reads_at_the_fill_end_and_turns_with_the_board(browser, web_server):
    open_page(browser, web_server[0])
    wait(browser, lambda d: bar_reads_well(d, True) is None, "the bar at the start")
    # White well ahead (the label on the white fill), then Black (on the dark part).
    for fen in ("4k3/8/8/8/8/8/QQQ5/4K3 w - - 0 1", "4k3/qqq5/8/8/8/8/8/4K3 w - - 0 1"):
        load_fen(browser, fen)
        for white_at_bottom in (True, False):
            wait(
                browser,
                lambda d, w=white_at_bottom: bar_reads_well(d, w) is None,
                f"{fen}: {bar_reads_well(browser, white_at_bottom)}",
            )
            css(browser, "#flip")[0].click()


def test_model_playing_white_turns_the_board_to_the_user(browser, web_server):
    open_page(browser, web_server[0])
    choose(browser, "model-side", "white")
    wait(browser, lambda d: len(sans(d)) == 1, "the model did not open the game")
    wait(browser, lambda d: text_of(d, "status") == "Black to move", "not the user's turn")
    assert square_box(browser, "a1")["y"] < square_box(browser, "a8")["y"]
    assert square_box(browser, "h1")["x"] < square_box(browser, "a1")["x"]
    wait(browser, lambda d: bar_reads_well(d, False) is None, "the bar did not turn")
    choose(browser, "model-side", "black")
    assert square_box(browser, "a1")["y"] > square_box(browser, "a8")["y"]


def test_promotion_picker_stands_on_the_promotion_square(browser, web_server):
    open_page(browser, web_server[0])
    load_fen(browser, "7k/P7/8/8/8/8/8/K7 w - - 0 1")
    css(browser, "#flip")[0].click()  # a8 at the bottom right: the column goes up from it
    square(browser, "a7").click()
    square(browser, "a8").click()
    wait(browser, lambda d: css(d, ".promotion img"), "no promotion picker")
    target = square_box(browser, "a8")
    pieces = [
        (img.get_attribute("data-promotion"), img.rect) for img in css(browser, ".promotion img")
    ]
    assert [name for name, _ in pieces] == ["q", "n", "r", "b"]
    size = target["height"]
    for i, (name, rect) in enumerate(pieces):
        assert abs(rect["x"] - target["x"]) < 2, (name, rect, target)
        assert abs(rect["y"] - (target["y"] - i * size)) < 2, (name, rect, target)
        assert abs(rect["height"] - size) < 2 and abs(rect["width"] - size) < 2
    css(browser, '.promotion img[data-promotion="n"]')[0].click()
    wait(browser, lambda d: sans(d) == ["a8=N"], "the knight promotion was not played")
    assert not css(browser, ".promotion")


def test_coordinates_are_drawn_over_the_last_move(browser, web_server):
    open_page(browser, web_server[0])
    square(browser, "g1").click()  # g1 carries the file letter g
    square(browser, "f3").click()
    wait(browser, lambda d: len(sans(d)) == 2, "the model did not reply")
    wait(browser, lambda d: len(css(d, "rect.last")) == 2, "no last-move highlight")
    # SVG paints in document order: a coordinate after every highlight is drawn over it.
    later = browser.execute_script(
        "const coords = [...document.querySelectorAll('text.coord')];"
        "const marks = [...document.querySelectorAll('rect.last')];"
        "return coords.length === 16 && coords.every((c) => marks.every((m) =>"
        " m.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_FOLLOWING));"
    )
    assert later, "a coordinate is under the last-move highlight"


def test_the_table_has_each_model_kinds_columns(browser, web_server):
    open_page(browser, web_server[0])
    assert headings(browser) == ["Move", "Policy", "Win"]
    choose(browser, "model", "cpu-av")  # an AV model: its own win chances, no policy
    wait(browser, lambda d: headings(d) == ["Move", "Win"], "no AV headings")
    wait(browser, lambda d: len(table(d)) == 20, "no table for cpu-av")
    assert all(len(row) == 2 and row[1].endswith("%") for row in table(browser))
    assert not css(browser, "#value")[0].is_enabled(), "an AV model takes no value model"
    playouts = css(browser, "#playouts")[0]
    playouts.clear()
    playouts.send_keys("16")
    css(browser, "#search")[0].click()
    wait(browser, lambda d: headings(d) == ["Move", "Win", "Visits", "Q"], "no search columns")


def test_an_error_clears_the_numbers_and_an_empty_box_means_the_default(browser, web_server):
    open_page(browser, web_server[0])
    # A BC policy with no value model and no value head of its own (models/cpu has one; the
    # square transformer has none) cannot search.
    choose(browser, "model", "cpu-transformer")
    choose(browser, "value", "none")
    wait(browser, lambda d: text_of(d, "value-text") == "no value", "the value is still shown")
    wait(browser, lambda d: headings(d) == ["Move", "Policy"], "a Win column without a value")
    css(browser, "#search")[0].click()
    wait(browser, lambda d: "cannot search" in text_of(d, "error"), "no error")
    assert table(browser) == [] and not css(browser, "g.arrow")
    assert text_of(browser, "value-text") == "–" and text_of(browser, "summary") == ""
    playouts = css(browser, "#playouts")[0]
    playouts.clear()
    playouts.send_keys("30")
    choose(browser, "value", "cpu-av")
    wait(browser, lambda d: "30 playouts" in text_of(d, "summary"), "no search")
    playouts.clear()
    css(browser, "#new-game")[0].click()
    wait(browser, lambda d: "200 playouts" in text_of(d, "summary"), "empty is not the default")
    assert playouts.get_attribute("placeholder") == "200"
