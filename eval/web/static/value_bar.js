// The bar beside the board: White's win chance as a white fill from White's side of the board
// (the bottom, or the top once the board is turned), its label at the fill's end: dark on the
// fill where the fill is the larger part, else light on the dark part beyond it.
"use strict";

class ValueBar {
  constructor(bar, fill, label) {
    this.bar = bar;
    this.fill = fill;
    this.label = label;
    this.orientation = "white";
    this.white = null;
    this.text = "–";
    this.render();
  }

  // White's win chance in [0, 1]; null with the text to show instead (no value known).
  show(white, text = "–") {
    this.white = white === undefined ? null : white;
    this.text = text;
    this.render();
  }

  setOrientation(side) { this.orientation = side; this.render(); }

  render() {
    const known = this.white !== null;
    const share = known ? this.white : 0.5;
    const whiteAtBottom = this.orientation === "white";
    this.bar.classList.toggle("flipped", !whiteAtBottom);
    this.bar.dataset.value = known ? String(this.white) : "";
    Object.assign(this.fill.style, {
      height: `${100 * share}%`, top: whiteAtBottom ? "auto" : "0", bottom: whiteAtBottom ? "0" : "auto",
    });
    this.label.textContent = known ? `${(100 * this.white).toFixed(1)}%` : this.text;
    const onFill = known && share >= 0.5;
    this.label.classList.toggle("on-fill", onFill);
    // Where the fill ends, as a share of the bar from its top; the label on the fill's side.
    const end = whiteAtBottom ? 1 - share : share;
    const below = onFill === whiteAtBottom;
    Object.assign(this.label.style, below
      ? { top: `calc(${100 * end}% + 4px)`, bottom: "auto" }
      : { top: "auto", bottom: `calc(${100 * (1 - end)}% + 4px)` });
  }
}
