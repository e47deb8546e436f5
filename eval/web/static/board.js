// A chess board in one SVG: squares, pieces (the server's /piece/*.svg drawings), move
// arrows. Moves are made by clicking the piece then its square, or by dragging; only the
// legal moves the server listed are offered, so the board itself knows no rules.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const FILES = "abcdefgh";

function svgEl(tag, attrs, parent) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (parent) parent.appendChild(el);
  return el;
}

// {square: "wP"} from a FEN's first field.
function piecesOfFen(fen) {
  const pieces = {};
  fen.split(" ")[0].split("/").forEach((row, i) => {
    let file = 0;
    for (const ch of row) {
      if (/\d/.test(ch)) { file += Number(ch); continue; }
      const color = ch === ch.toUpperCase() ? "w" : "b";
      pieces[FILES[file] + (8 - i)] = color + ch.toUpperCase();
      file += 1;
    }
  });
  return pieces;
}

class ChessBoard {
  constructor(container, onMove) {
    this.onMove = onMove;
    this.orientation = "white";
    this.pieces = {};
    this.legal = [];
    this.selected = null;
    this.drag = null;
    this.container = container;
    container.style.position = "relative";
    this.svg = svgEl("svg", { viewBox: "0 0 8 8", "aria-label": "chess board" }, container);
    this.svg.addEventListener("pointerdown", (e) => this.pointerDown(e));
    this.svg.addEventListener("pointermove", (e) => this.pointerMove(e));
    this.svg.addEventListener("pointerup", (e) => this.pointerUp(e));
    this.svg.addEventListener("pointercancel", () => this.cancelDrag());
    this.arrows = [];
    this.picker = null;
    this.render();
  }

  // --- geometry --------------------------------------------------------------------------

  xy(square) {
    const file = FILES.indexOf(square[0]), rank = Number(square[1]) - 1;
    return this.orientation === "white" ? [file, 7 - rank] : [7 - file, rank];
  }

  pointAt(event) {
    const box = this.svg.getBoundingClientRect();
    return [(event.clientX - box.left) / box.width * 8, (event.clientY - box.top) / box.height * 8];
  }

  squareAt(event) {
    const [x, y] = this.pointAt(event).map(Math.floor);
    if (x < 0 || x > 7 || y < 0 || y > 7) return null;
    return this.orientation === "white" ? FILES[x] + (8 - y) : FILES[7 - x] + (y + 1);
  }

  // --- state -----------------------------------------------------------------------------

  // legal: [{uci, san}] of the side to move, [] when the user may not move now.
  setPosition(fen, legal, lastMove, check) {
    this.closePromotion();
    this.pieces = piecesOfFen(fen);
    this.turn = fen.split(" ")[1] === "w" ? "w" : "b";
    this.legal = legal;
    this.lastMove = lastMove;
    this.check = check;
    this.selected = null;
    this.arrows = [];
    this.render();
  }

  setArrows(arrows) { this.arrows = arrows; this.renderArrows(); }

  // "white" or "black": the side at the bottom.
  setOrientation(side) {
    if (side === this.orientation) return;
    this.orientation = side;
    this.closePromotion();
    this.render();
  }

  movesFrom(square) { return this.legal.filter((m) => m.uci.slice(0, 2) === square); }

  // --- drawing ---------------------------------------------------------------------------

  render() {
    this.svg.replaceChildren();
    for (let r = 1; r <= 8; r++) {
      for (const f of FILES) {
        const square = f + r, [x, y] = this.xy(square);
        const light = (FILES.indexOf(f) + r) % 2 === 1;
        svgEl("rect", { x, y, width: 1, height: 1, class: `sq ${light ? "light" : "dark"}`,
          "data-square": square }, this.svg);
      }
    }
    const mark = (square, cls) => {
      const [x, y] = this.xy(square);
      svgEl("rect", { x, y, width: 1, height: 1, class: cls, "pointer-events": "none" }, this.svg);
    };
    if (this.lastMove) { mark(this.lastMove.slice(0, 2), "last"); mark(this.lastMove.slice(2, 4), "last"); }
    if (this.check) {
      const king = Object.keys(this.pieces).find((s) => this.pieces[s] === this.turn + "K");
      if (king) mark(king, "check");
    }
    if (this.selected) {
      mark(this.selected, "selected");
      for (const m of this.movesFrom(this.selected)) {
        const [x, y] = this.xy(m.uci.slice(2, 4));
        svgEl("circle", { cx: x + 0.5, cy: y + 0.5, r: 0.15, class: "target",
          "pointer-events": "none" }, this.svg);
      }
    }
    this.pieceEls = {};
    for (const [square, code] of Object.entries(this.pieces)) {
      const [x, y] = this.xy(square);
      this.pieceEls[square] = svgEl("image", { href: `/piece/${code}.svg`, x, y, width: 1, height: 1,
        class: "piece", "data-piece": code, "data-square": square }, this.svg);
    }
    this.renderCoordinates(); // after the highlights and the pieces, so that none hides them
    this.arrowLayer = svgEl("g", { class: "arrows" }, this.svg);
    this.renderArrows();
  }

  // Files along the bottom edge and ranks along the left one, as the board is turned.
  renderCoordinates() {
    const layer = svgEl("g", { class: "coords" }, this.svg);
    for (let i = 0; i < 8; i++) {
      const file = this.orientation === "white" ? FILES[i] : FILES[7 - i];
      const rank = this.orientation === "white" ? 8 - i : i + 1;
      const text = (x, y, label, square) => {
        const light = (FILES.indexOf(square[0]) + Number(square[1])) % 2 === 1;
        svgEl("text", { x, y, class: `coord ${light ? "on-light" : "on-dark"}` }, layer).textContent = label;
      };
      text(i + 0.86, 7.95, file, file + (this.orientation === "white" ? 1 : 8));
      text(0.04, i + 0.18, rank, (this.orientation === "white" ? "a" : "h") + rank);
    }
  }

  renderArrows() {
    this.arrowLayer.replaceChildren();
    for (const a of this.arrows) {
      const [x1, y1] = this.xy(a.uci.slice(0, 2)).map((v) => v + 0.5);
      const [x2, y2] = this.xy(a.uci.slice(2, 4)).map((v) => v + 0.5);
      const len = Math.hypot(x2 - x1, y2 - y1), ux = (x2 - x1) / len, uy = (y2 - y1) / len;
      const width = 0.07 + 0.2 * a.weight, head = Math.max(0.28, width * 2.2);
      const bx = x2 - ux * head, by = y2 - uy * head, px = -uy, py = ux;
      const g = svgEl("g", { class: "arrow", "data-move": a.uci, opacity: 0.3 + 0.6 * a.weight }, this.arrowLayer);
      svgEl("line", { x1: x1 + ux * 0.1, y1: y1 + uy * 0.1, x2: bx, y2: by, stroke: a.color,
        "stroke-width": width, "stroke-linecap": "round" }, g);
      svgEl("polygon", { fill: a.color, points: `${x2},${y2} ${bx + px * head * 0.6},${by + py * head * 0.6} `
        + `${bx - px * head * 0.6},${by - py * head * 0.6}` }, g);
    }
  }

  // --- input -----------------------------------------------------------------------------

  pointerDown(event) {
    if (this.picker) { this.closePromotion(); this.render(); return; }
    const square = this.squareAt(event);
    if (!square) return;
    if (this.selected && this.tryMove(this.selected, square)) return;
    if (this.movesFrom(square).length) {
      this.selected = square;
      this.render();
      this.drag = { from: square, moved: false };
      this.svg.setPointerCapture(event.pointerId);
    } else if (this.selected) {
      this.selected = null;
      this.render();
    }
  }

  pointerMove(event) {
    if (!this.drag) return;
    const el = this.pieceEls[this.drag.from];
    if (!el) return;
    const [x, y] = this.pointAt(event);
    this.drag.moved = true;
    el.setAttribute("x", x - 0.5);
    el.setAttribute("y", y - 0.5);
    this.svg.appendChild(el); // above the other pieces and the arrows
  }

  pointerUp(event) {
    if (!this.drag) return;
    const { from, moved } = this.drag;
    this.drag = null;
    const square = this.squareAt(event);
    if (moved && square && square !== from && this.tryMove(from, square)) return;
    if (moved) this.render(); // back to its square, still selected for a click
  }

  cancelDrag() { this.drag = null; this.render(); }

  // Plays from->to if legal (asking for the piece of a promotion); whether it was legal.
  tryMove(from, to) {
    const moves = this.legal.filter((m) => m.uci.slice(0, 4) === from + to);
    if (!moves.length) return false;
    this.selected = null;
    if (moves.length === 1) { this.onMove(moves[0].uci); return true; }
    this.askPromotion(from, to);
    return true;
  }

  // The pieces to promote to in a column from the promotion square toward the board's
  // centre (queen on the square, as lichess has it); a click elsewhere takes the move back.
  askPromotion(from, to) {
    this.render();
    const picker = document.createElement("div");
    picker.className = "promotion";
    const [x, y] = this.xy(to);
    const down = y < 4;
    picker.style.left = `${x * 12.5}%`;
    picker.style.top = `${(down ? y : y - 3) * 12.5}%`;
    picker.style.flexDirection = down ? "column" : "column-reverse";
    for (const piece of "qnrb") {
      const img = document.createElement("img");
      img.src = `/piece/${this.turn}${piece.toUpperCase()}.svg`;
      img.dataset.promotion = piece;
      img.addEventListener("click", () => { this.closePromotion(); this.onMove(from + to + piece); });
      picker.appendChild(img);
    }
    this.container.appendChild(picker);
    this.picker = picker;
  }

  closePromotion() {
    if (this.picker) this.picker.remove();
    this.picker = null;
  }
}
