// The page: the game (a start FEN and the UCI moves from it), the model's replies, and its
// analysis of each position (arrows, value bar, move table), all through /api/*.
"use strict";

const $ = (id) => document.getElementById(id);
const MAX_ARROWS = 6;
const MIN_ARROW_WEIGHT = 0.04;
// A value model's moves differ by a few points of win chance: arrows by distance to the best.
const WIN_SPREAD = 0.04;

const game = { startFen: "", moves: [], tags: {} }; // tags: a pasted game's, for its export
let position = null;
let generation = 0; // answers to an older state of the game are dropped
// This page's id: the server gives up a search of the page that a newer request replaces.
const PAGE = Math.random().toString(36).slice(2);

async function api(path, params, method = "GET") {
  let url = path, init = { method };
  if (method === "GET") url += "?" + new URLSearchParams(params);
  else init = { method, headers: { "Content-Type": "application/json" }, body: JSON.stringify(params) };
  const response = await fetch(url, init);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

// The box's playouts; an empty or unreadable box means the default its placeholder shows.
function playouts() {
  const box = $("playouts"), n = Math.round(Number(box.value));
  return box.value.trim() === "" || !Number.isFinite(n) || n < 0 ? Number(box.defaultValue) : n;
}

function modelParams() {
  return {
    model: $("model").value,
    value: $("value").value,
    simulations: $("search").checked ? playouts() : 0,
    page: PAGE,
  };
}

const gameParams = () => ({ fen: game.startFen, moves: game.moves.join(" ") });
function showError(message) { $("error").textContent = message || ""; }

// An answer that failed: its message, and no numbers left from an older position or model.
function showFailure(message) {
  showError(message);
  clearAnalysis();
  valueBar.show(null);
}

async function refresh() {
  const mine = ++generation;
  showError("");
  let pos;
  try {
    pos = await api("/api/position", gameParams());
  } catch (e) { if (mine === generation) showFailure(e.message); return; }
  if (mine !== generation) return;
  position = pos;
  const modelSide = $("model-side").value;
  const modelToMove = !pos.over && modelSide === pos.turn;
  board.setPosition(pos.fen, modelToMove ? [] : pos.legal, pos.moves[pos.moves.length - 1], pos.check);
  $("fen").value = pos.fen;
  $("sans").textContent = pos.sans.map((san, i) => (i % 2 === 0 ? `${i / 2 + 1}. ` : "") + san).join(" ");
  $("export-pgn").href = "/api/pgn?" + new URLSearchParams({ ...gameParams(), ...players(), ...game.tags });
  if (pos.over) {
    $("status").textContent = `Game over: ${pos.over.termination} (${pos.over.result})`;
    clearAnalysis();
    const white = pos.over.result === "1-0" ? 1 : pos.over.result === "0-1" ? 0 : 0.5;
    valueBar.show(white);
    return;
  }
  if (modelToMove) {
    try {
      const reply = await showWaiting(api("/api/play", { ...gameParams(), ...modelParams() }, "POST"),
        $("status"), `${$("model").value} is thinking…`);
      if (mine !== generation) return;
      game.moves.push(reply.move);
    } catch (e) { if (mine === generation) showFailure(e.message); return; }
    return refresh();
  }
  $("status").textContent = `${pos.turn === "white" ? "White" : "Black"} to move` + (pos.check ? " (check)" : "");
  await analyse(mine);
}

function players() {
  const side = $("model-side").value, name = $("model").value;
  return { white: side === "white" ? name : "You", black: side === "black" ? name : "You" };
}

// While `request` runs, what the server says a search waits for (the compile after a start,
// GET /api/status) follows `text` in `element`.
async function showWaiting(request, element, text) {
  let done = false;
  element.textContent = text;
  (async () => {
    while (!done) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const status = done ? null : await api("/api/status", {}).catch(() => null);
      if (!done && status) element.textContent = status.waiting ? `${text} ${status.waiting}` : text;
    }
  })();
  try { return await request; } finally { done = true; }
}

async function analyse(mine) {
  let result;
  try {
    result = await showWaiting(api("/api/analysis", { ...gameParams(), ...modelParams() }), $("summary"), "Analysing…");
  } catch (e) {
    if (mine === generation) showFailure(e.message);
    return;
  }
  if (mine !== generation) return;
  drawAnalysis(result);
}

function arrowWeights(result) {
  const moves = result.moves;
  if (result.search) {
    const total = moves.reduce((s, m) => s + (m.visits || 0), 0) || 1;
    return moves.map((m) => (m.visits || 0) / total);
  }
  if (result.kind === "prob") return moves.map((m) => m.score);
  const best = moves[0].score;
  return moves.map((m) => Math.exp((m.score - best) / WIN_SPREAD));
}

function drawAnalysis(result) {
  const weights = arrowWeights(result);
  const color = result.search ? "#15781b" : "#1f5fbf";
  const arrows = result.moves
    .map((m, i) => ({ uci: m.uci, weight: weights[i], color }))
    .filter((a) => a.weight >= MIN_ARROW_WEIGHT)
    .sort((a, b) => b.weight - a.weight)
    .slice(0, MAX_ARROWS)
    .map((a, i, all) => ({ ...a, weight: a.weight / all[0].weight }));
  board.setArrows(arrows.reverse()); // the heaviest drawn last, on top
  const value = result.search ? result.search.white_value : result.white_value;
  valueBar.show(value, "no value");
  showMoveTable($("moves"), result, playMove);
  let summary = `${result.model}` + (result.value_model ? ` + ${result.value_model}` : "");
  if (result.value !== null) summary += `: ${percent(result.value)} for the side to move`;
  if (result.search) {
    const s = result.search;
    summary += `; search ${s.playouts} playouts in ${s.seconds.toFixed(2)} s, ${percent(s.value)}, line ${s.pv.join(" ")}`;
  }
  $("summary").textContent = summary;
}

function clearAnalysis() {
  board.setArrows([]);
  clearMoveTable($("moves"));
  $("summary").textContent = "";
}

function playMove(uci) {
  if (!position || !position.legal.some((m) => m.uci === uci)) return;
  if ($("model-side").value === position.turn) return;
  game.moves.push(uci);
  refresh();
}

const board = new ChessBoard($("board"), playMove);
const valueBar = new ValueBar($("value-bar"), $("value-fill"), $("value-text"));

function orient(side) {
  board.setOrientation(side);
  valueBar.setOrientation(side);
}

// The user's side at the bottom, as lichess turns the board; analysis keeps the board as it is.
function orientForUser() {
  const modelSide = $("model-side").value;
  if (modelSide !== "none") orient(modelSide === "white" ? "black" : "white");
}

function newGame(fen = "", moves = [], tags = {}) {
  game.startFen = fen;
  game.moves = moves;
  game.tags = tags;
  refresh();
}

function undo() {
  const modelSide = $("model-side").value;
  game.moves.pop();
  // Back to a position where it is the user's move.
  if (modelSide !== "none" && game.moves.length && position && position.turn !== modelSide) game.moves.pop();
  refresh();
}

async function loadPasted() {
  try {
    const loaded = await api("/api/load", { text: $("paste").value }, "POST");
    newGame(loaded.fen, loaded.moves, loaded.tags);
  } catch (e) { showFailure(e.message); }
}

let modelKinds = {};

// An AV or SV model values its moves itself: the value model applies beside a BC policy only.
function showValueChoice() { $("value").disabled = modelKinds[$("model").value] === "win"; }

async function start() {
  const info = await api("/api/models", {});
  for (const m of info.models) {
    modelKinds[m.name] = m.kind;
    $("model").add(new Option(`${m.name} (${m.target || "?"})`, m.name, false, m.name === info.default_model));
    if (m.kind === "win") $("value").add(new Option(m.name, m.name, false, m.name === info.default_value));
  }
  // "none": a policy with a value head of its own (models/cpu) values with it; others have none.
  $("value").add(new Option("its own / none", "none", false, !info.default_value));
  $("playouts").max = info.max_simulations;
  showValueChoice();
  orientForUser();
  newGame();
}

$("new-game").addEventListener("click", () => newGame());
$("undo").addEventListener("click", undo);
$("flip").addEventListener("click", () => orient(board.orientation === "white" ? "black" : "white"));
$("model-move").addEventListener("click", async () => {
  if (!position || position.over) return;
  const mine = ++generation;
  try {
    const reply = await api("/api/play", { ...gameParams(), ...modelParams() }, "POST");
    if (mine !== generation) return;
    game.moves.push(reply.move);
    refresh();
  } catch (e) { if (mine === generation) showFailure(e.message); }
});
$("load").addEventListener("click", loadPasted);
for (const id of ["value", "search", "playouts"]) $(id).addEventListener("change", () => refresh());
$("model").addEventListener("change", () => { showValueChoice(); refresh(); });
$("model-side").addEventListener("change", () => { orientForUser(); refresh(); });
start().catch((e) => showError(e.message));
