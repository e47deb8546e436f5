// The table of every legal move: the columns an analysis has (a BC policy's probability and
// its value model's win chance, or an AV/SV model's win chance; the search's visits and Q),
// best first: by visits when searching, the move the search plays on top.
"use strict";

const percent = (p) => (100 * p).toFixed(1) + "%";

function moveColumns(result) {
  const columns = [{ head: "Move", cell: (m) => m.san }];
  if (result.kind === "prob") {
    columns.push({ head: "Policy", title: "the policy's probability of the move", cell: (m) => percent(m.score) });
    if (result.moves.some((m) => m.win !== undefined)) {
      columns.push({ head: "Win", title: `${result.value_model}'s win chance after the move`,
        cell: (m) => (m.win === undefined ? "" : percent(m.win)) });
    }
  } else {
    columns.push({ head: "Win", title: "the model's win chance after the move", cell: (m) => percent(m.score) });
  }
  if (result.search) {
    columns.push({ head: "Visits", title: "the search's playouts through the move", cell: (m) => String(m.visits || 0) });
    // A move the search never tried has no value of its own (the tree would show the root's).
    columns.push({ head: "Q", title: "the search's mean win chance of the move",
      cell: (m) => (m.visits ? percent(m.q) : "–") });
  }
  return columns;
}

// The moves in table order, and the one the model plays.
function rankedMoves(result) {
  if (!result.search) return { moves: result.moves, best: result.best };
  const best = result.search.best;
  const key = (m) => [m.uci === best ? 1 : 0, m.visits || 0, m.score];
  const moves = [...result.moves].sort((a, b) => {
    const ka = key(a), kb = key(b);
    for (let i = 0; i < ka.length; i++) if (ka[i] !== kb[i]) return kb[i] - ka[i];
    return 0;
  });
  return { moves, best };
}

function showMoveTable(table, result, onClick) {
  const columns = moveColumns(result);
  const head = document.createElement("tr");
  for (const c of columns) {
    const th = head.appendChild(document.createElement("th"));
    th.textContent = c.head;
    if (c.title) th.title = c.title;
  }
  table.tHead.replaceChildren(head);
  const { moves, best } = rankedMoves(result);
  const rows = moves.map((m) => {
    const tr = document.createElement("tr");
    tr.dataset.move = m.uci;
    if (m.uci === best) tr.className = "best";
    for (const c of columns) tr.appendChild(document.createElement("td")).textContent = c.cell(m);
    tr.addEventListener("click", () => onClick(m.uci));
    return tr;
  });
  table.tBodies[0].replaceChildren(...rows);
}

function clearMoveTable(table) { table.tBodies[0].replaceChildren(); }
