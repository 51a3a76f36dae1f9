// rag ui: the chat page. Plain browser JavaScript, no build step, no third-party code.
// Every text from the server (answers, passages, prompts) is inserted as text, never as
// HTML: documents are not trusted markup.
"use strict";

const $ = (id) => document.getElementById(id);
let session = null;
let options = null;
let busy = false;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  node.append(...children.filter((c) => c !== undefined && c !== null));
  return node;
}

const fmt = (x) => (typeof x === "number" ? x.toFixed(3) : String(x ?? "–"));

async function postJson(path, body) {
  return fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
}

async function detail(response) {
  try {
    return (await response.json()).detail || response.statusText;
  } catch {
    return `${response.status} ${response.statusText}`;
  }
}

// --- set-up --------------------------------------------------------------------------
async function init() {
  options = await (await fetch("/api/options")).json();
  const collection = $("collection");
  for (const name of options.collections) collection.append(el("option", { value: name }, name));
  collection.value = options.collection;
  $("k").value = options.k;
  $("k").max = options.k_max;
  $("k").title = `passages given to the generator (1-${options.k_max})`;
  for (const name of options.rerankers) $("rerank").append(el("option", { value: name }, name));
  $("rerank").value = options.rerank;
  $("question").maxLength = options.max_question_chars;
  const m = options.models;
  $("models").textContent =
    `generator ${m.generator} · verifier ${m.verifier} · query ${m.query} · tracing ${options.tracing}`;
  if (!options.collections.length) {
    notice("No collection yet: ingest documents first with `rag ingest PATH`, then reload.");
  }
  if (!(await resumeConversation())) await newConversation();
  $("ask-form").addEventListener("submit", (e) => {
    e.preventDefault();
    ask();
  });
  $("question").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      ask();
    }
  });
  $("new-conversation").addEventListener("click", newConversation);
  $("viewer-close").addEventListener("click", () => ($("viewer").hidden = true));
}

function notice(text) {
  $("notice").textContent = text;
  $("notice").hidden = !text;
}

async function newConversation() {
  const response = await fetch("/api/sessions", { method: "POST" });
  session = (await response.json()).session;
  sessionStorage.setItem("rag-session", session); // this tab's conversation, kept on reload
  $("turns").replaceChildren();
  $("viewer").hidden = true;
}

// A reloaded tab shows its conversation again and goes on with it, while the server
// still has it (it keeps conversations in memory: a restart starts a new one).
async function resumeConversation() {
  const saved = sessionStorage.getItem("rag-session");
  if (!saved) return false;
  const response = await fetch(`/api/sessions/${encodeURIComponent(saved)}`);
  if (!response.ok) return false;
  const conversation = await response.json();
  session = conversation.session;
  for (const ex of conversation.exchanges) {
    newTurn(ex.question).on({ name: "answer", data: ex });
  }
  return true;
}

// --- asking ---------------------------------------------------------------------------
async function* events(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message";
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      yield { name, data: JSON.parse(data) };
    }
  }
}

async function ask() {
  const question = $("question").value.trim();
  if (!question || busy) return;
  busy = true;
  $("ask").disabled = true;
  const turn = newTurn(question);
  try {
    const response = await postJson("/api/ask", {
      session,
      question,
      collection: $("collection").value || null,
      k: Number($("k").value) || null,
      rerank: $("rerank").value || null,
    });
    if (!response.ok) {
      turn.fail(await detail(response));
      return;
    }
    $("question").value = "";
    for await (const event of events(response)) turn.on(event);
  } catch (err) {
    turn.fail(String(err));
  } finally {
    busy = false;
    $("ask").disabled = false;
    $("question").focus();
  }
}

function newTurn(question) {
  const answer = el("div", { class: "answer streaming", "data-testid": "answer" });
  const steps = el("div", { class: "steps", "data-testid": "steps" });
  const box = el("div", { class: "turn", "data-testid": "turn" },
    el("div", { class: "question" }, question), steps, answer);
  $("turns").append(box);
  box.scrollIntoView({ block: "end" });
  // what runs now (the graph's "step started" events): a 60 s generation is not a hang
  const running = el("span", { class: "step running", "data-testid": "running" });
  let text = "";
  let call = null;
  let tokens = 0; // shown as data-tokens: how many pieces arrived before the whole answer
  return {
    fail(message) {
      answer.classList.remove("streaming", "draft");
      running.remove();
      box.append(el("div", { class: "error", "data-testid": "error" }, message));
    },
    on({ name, data }) {
      if (name === "running") {
        running.textContent = `${data.node}…`;
        steps.append(running);
      } else if (name === "step") {
        const seconds = data.seconds == null ? "" : ` ${data.seconds.toFixed(2)}s`;
        running.remove();
        steps.append(el("span", { class: "step" }, `${data.node}${seconds}`));
      } else if (name === "token") {
        // a draft, not yet checked: a regenerated answer or a reset starts it over
        if (call !== null && data.call !== call) text = "";
        call = data.call;
        text += data.text;
        answer.classList.add("draft");
        answer.textContent = text;
        answer.setAttribute("data-tokens", ++tokens);
      } else if (name === "draft_reset") {
        text = "";
        answer.textContent = "";
      } else if (name === "answer") {
        answer.classList.remove("streaming", "draft");
        running.remove();
        answer.setAttribute("data-done", "true");
        showExchange(box, answer, data);
      } else if (name === "error") {
        this.fail(data.message);
      }
    },
  };
}

// --- an answered exchange ---------------------------------------------------------------
// Everything about the label comes from the answer object's `judgement` (built once by the
// server, graph/checks/judgement.py): the page renders it and never works it out again.
function showExchange(box, answer, ex) {
  const judgement = ex.judgement || {};
  answer.replaceChildren();
  const shown = judgement.outcome === "verified" || judgement.outcome === "not_verified";
  renderMarkdown(answer, ex.answer, ex.passages, shown ? judgement.statements || [] : []);
  box.append(verdictLine(ex));
  if (shown && (judgement.statements || []).length) box.append(statementList(ex, judgement));
  if ((ex.closest || []).length) {
    box.append(el("div", { class: "muted" }, "Closest passages (none states the answer):"),
      supportList(ex, ex.closest, "closest"));
  }
  if (ex.references.length) {
    box.append(el("div", { class: "muted" }, ex.references.join("  ·  ")));
  }
  box.append(
    panel("Queries", "panel-queries", queriesPanel(ex)),
    panel(`Passages (${ex.passages.length} used, ${ex.dropped.length} cut)`, "panel-passages",
      passagesPanel(ex)),
    panel(`Prompt${ex.attempts > 1 ? ` (attempt ${ex.attempts})` : ""}`, "panel-prompt",
      promptPanel(ex)),
    panel("Timings", "panel-timings", timingsPanel(ex)),
    flagBox(ex),
  );
}

// All the quotes of an exchange: what a citation's passage highlights.
const quotesOf = (ex) => ((ex.judgement || {}).statements || []).flatMap((s) => s.quotes);

// The quoted lines each statement rests on, or the sentences nearest the question when
// the documents do not say (graph/checks/support.py), under the answer.
function supportList(ex, items, testid) {
  const list = el("ul", { class: "support", "data-testid": testid });
  for (const item of items) list.append(quoteRow(ex, item));
  return list;
}

function quoteRow(ex, item) {
  const passage = ex.passages[item.n - 1];
  const row = el("li", {});
  // `where` is written by the server (graph/checks/support.py), as `rag ask` prints it
  if (passage) row.append(passageLink(passage, quotesOf(ex)));
  row.append(` ${item.where}: `, el("q", {}, item.quote));
  return row;
}

// Each statement of the answer with its quotes, or, for one that carries a fact and has
// none, that no passage states it.
function statementList(ex, judgement) {
  const list = el("ul", { class: "support", "data-testid": "support" });
  for (const s of judgement.statements) {
    for (const q of s.quotes) list.append(quoteRow(ex, q));
    if (s.facts && !s.supported) {
      list.append(el("li", { class: "unsupported", "data-testid": "unsupported" },
        `“${s.statement}”: no passage states it`));
    }
  }
  return list;
}

// --- the answer's Markdown, rendered safely ------------------------------------------
// Blocks (fenced code, headings, list items, paragraphs) and inline code, bold and [n]
// citations become elements whose text is set as text: nothing from the server is ever
// parsed as HTML. Each statement is marked: supported (its quotes in the tooltip) or
// not supported.
function renderMarkdown(container, text, passages, statements) {
  const ranges = statementRanges(text, statements);
  const lines = text.split("\n");
  let offset = 0;
  let list = null;
  let i = 0;
  const lineStart = [];
  for (const line of lines) {
    lineStart.push(offset);
    offset += line.length + 1;
  }
  while (i < lines.length) {
    const line = lines[i];
    const fence = /^\s{0,3}(`{3,}|~{3,})\s*([\w+-]*)/.exec(line);
    if (fence) {
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trimStart().startsWith(fence[1])) body.push(lines[i++]);
      i += 1; // the closing fence
      const code = el("code", fence[2] ? { class: `language-${fence[2]}` } : {}, body.join("\n"));
      container.append(el("pre", { class: "code" }, code));
      list = null;
      continue;
    }
    const item = /^(\s*)([-*+]|\d{1,3}[.)])\s+/.exec(line);
    const heading = /^\s{0,3}(#{1,6})\s+/.exec(line);
    if (item) {
      const ordered = /\d/.test(item[2]);
      if (!list || list.ordered !== ordered) {
        list = { ordered, node: el(ordered ? "ol" : "ul", {}) };
        container.append(list.node);
      }
      const li = el("li", {});
      appendInline(li, text, lineStart[i] + item[0].length, lineStart[i] + line.length,
        passages, statements, ranges);
      list.node.append(li);
    } else if (heading) {
      const h = el(`h${Math.min(heading[1].length + 2, 6)}`, {});
      appendInline(h, text, lineStart[i] + heading[0].length, lineStart[i] + line.length,
        passages, statements, ranges);
      container.append(h);
      list = null;
    } else if (line.trim()) {
      // a paragraph: this line and the next plain ones
      let end = i;
      while (end + 1 < lines.length && lines[end + 1].trim() &&
        !/^(\s*([-*+]|\d{1,3}[.)])\s+|\s{0,3}(#{1,6}\s|`{3,}|~{3,}))/.test(lines[end + 1])) end++;
      const para = el("p", {});
      appendInline(para, text, lineStart[i], lineStart[end] + lines[end].length,
        passages, statements, ranges);
      container.append(para);
      i = end;
      list = null;
    } else {
      list = null;
    }
    i += 1;
  }
}

// Where each statement is in the answer's text: its characters in order, with any
// spacing and citation markers between them (the statement is written without markers).
function statementRanges(text, statements) {
  const ranges = [];
  let from = 0;
  statements.forEach((s, index) => {
    const chars = [...s.statement.replace(/\s+/g, "")];
    if (!chars.length) return;
    const pattern = new RegExp(chars.map((c) => c.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
      .join("(?:\\s|\\[\\d{1,3}\\])*"), "g");
    pattern.lastIndex = from;
    const found = pattern.exec(text);
    if (!found) return;
    ranges.push([found.index, found.index + found[0].length, index]);
    from = found.index + found[0].length;
  });
  return ranges;
}

const INLINE = /(`+)([^`]+?)\1|\*\*([^*]+)\*\*|\[(\d{1,3})\]/g;

// The inline Markdown of text[start, end) into host, each piece inside the mark of the
// statement it belongs to.
function appendInline(host, text, start, end, passages, statements, ranges) {
  const pieces = []; // [start, node]
  const plain = (a, b) => {
    // plain text, cut where a statement starts or ends
    const cuts = [a, b];
    for (const [s, e] of ranges) for (const x of [s, e]) if (x > a && x < b) cuts.push(x);
    cuts.sort((x, y) => x - y);
    for (let k = 0; k + 1 < cuts.length; k++) {
      if (cuts[k + 1] > cuts[k]) pieces.push([cuts[k], document.createTextNode(text.slice(cuts[k], cuts[k + 1]))]);
    }
  };
  const segment = text.slice(start, end);
  let last = 0;
  for (const m of segment.matchAll(INLINE)) {
    plain(start + last, start + m.index);
    let node;
    if (m[2] !== undefined) node = el("code", {}, m[2]);
    else if (m[3] !== undefined) node = el("strong", {}, m[3]);
    else {
      const passage = passages[Number(m[4]) - 1];
      node = passage ? passageLink(passage, statements.flatMap((s) => s.quotes)) : document.createTextNode(m[0]);
    }
    pieces.push([start + m.index, node]);
    last = m.index + m[0].length;
  }
  plain(start + last, end);
  let mark = null;
  let markIndex = -1;
  for (const [at, node] of pieces) {
    const range = ranges.find(([s, e]) => at >= s && at < e);
    if (!range) {
      mark = null;
      host.append(node);
      continue;
    }
    if (!mark || markIndex !== range[2]) {
      const s = statements[range[2]];
      const supported = s.supported || !s.facts;
      const title = s.quotes.length ? s.quotes.map((q) => `“${q.quote}” (${q.where || q.source})`).join("\n")
        : supported ? "" : "no passage states this";
      mark = el("mark", { class: supported ? "stated" : "unsupported", title,
        "data-testid": supported ? "stated" : "unsupported-statement" });
      markIndex = range[2];
      host.append(mark);
    }
    mark.append(node);
  }
}

function passageLink(passage, support) {
  const link = el("a", { href: "#", class: "cite", "data-n": passage.n, title: passage.location },
    `[${passage.n}]`);
  link.addEventListener("click", (e) => {
    e.preventDefault();
    showPassage(passage, support || []);
  });
  return link;
}

// A quote as a pattern over the passage's text: its words in order, any spacing between
// them (the quote's spacing was normalised, and a long one ends in an ellipsis).
function quotePattern(quote) {
  const words = quote.replace(/\u2026$/, "").split(/\s+/).filter(Boolean);
  if (!words.length) return null;
  return new RegExp(words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("\\s+"));
}

function showPassage(p, support) {
  $("viewer-title").textContent = `[${p.n}] ${p.location}`;
  $("viewer-meta").textContent =
    `${p.heading ? `${p.heading} · ` : ""}score ${fmt(p.score)} · distance ${fmt(p.distance)}`;
  const viewer = $("viewer-text");
  viewer.replaceChildren();
  // the quoted support of this passage is highlighted: what the answer rests on
  const spans = [];
  for (const item of support || []) {
    if (item.n !== p.n) continue;
    const found = quotePattern(item.quote)?.exec(p.text);
    if (found) spans.push([found.index, found.index + found[0].length]);
  }
  spans.sort((a, b) => a[0] - b[0]);
  let pos = 0;
  for (const [start, end] of spans) {
    if (start < pos) continue;
    viewer.append(p.text.slice(pos, start),
      el("mark", { class: "support", "data-testid": "support-mark" }, p.text.slice(start, end)));
    pos = end;
  }
  viewer.append(p.text.slice(pos));
  $("viewer").hidden = false;
}

function verdictLine(ex) {
  const v = ex.verdict || {};
  const judgement = ex.judgement || {};
  const line = el("div", { class: "verdict", "data-testid": "verdict" });
  // the checks' readings (confidence, threshold) are in the badge's tooltip only
  const readings = `confidence ${fmt(v.confidence)}, threshold ${fmt(v.threshold)}`;
  const outcome = judgement.outcome;
  if (outcome === "not_in_documents") {
    line.append(el("span", { class: "badge neutral" }, "the documents do not say"));
  } else if (outcome === "abstained") {
    line.append(el("span", { class: "badge neutral" }, "abstained"));
  } else if (outcome === "verified") {
    line.append(el("span", { class: "badge ok", title: readings }, "verified"),
      " the quoted lines state this answer");
  } else if (outcome === "not_verified") {
    line.append(el("span", { class: "badge bad", title: readings }, "not verified"));
    // the sentence `rag ask` prints after NOT VERIFIED, written once by the server
    if (ex.reason) line.append(el("div", { "data-testid": "reason" }, ex.reason));
    if ((judgement.unsupported || []).length) {
      line.append(el("div", {}, "Statements no passage states (highlighted):"),
        el("ul", {}, ...judgement.unsupported.map((s) => el("li", {}, s))));
    }
  } else {
    line.append(el("span", { class: "badge neutral" }, "not checked"));
  }
  if (ex.guard && ex.guard.verdict !== "allowed") {
    line.append(el("div", { class: "error", "data-testid": "guard" },
      `topic guard (${ex.guard.mode}): ${ex.guard.verdict.replace("_", "-")}` +
      (ex.guard.reason ? `: ${ex.guard.reason}` : "")));
  }
  if (ex.error) {
    line.append(el("div", { class: "error" },
      `${ex.error.type} in ${ex.error.stage}: ${ex.error.message}`));
  }
  return line;
}

function panel(title, testid, body) {
  const details = el("details", { "data-testid": testid }, el("summary", {}, title), body);
  // an opened panel scrolls into view above the fixed question box, not under it
  details.addEventListener("toggle", () => {
    if (details.open) details.scrollIntoView({ block: "nearest", behavior: "smooth" });
  });
  return details;
}

function queriesPanel(ex) {
  const list = el("ol", {}, ...ex.queries.map((q) => el("li", {}, q)));
  const rephrased = ex.queries[0] && ex.queries[0] !== ex.question;
  return el("div", {}, rephrased ? el("div", { class: "muted" },
    "The first query is the question rephrased from the conversation.") : null, list);
}

function passagesPanel(ex) {
  const r = ex.retrieval || {};
  const summary = el("div", { class: "muted" },
    `collection ${r.collection}${r.version != null ? ` (version ${r.version})` : ""} · ${r.candidates ?? 0} candidates · ${r.over_threshold ?? 0} ` +
    `beyond the distance threshold ${r.threshold} · ${r.duplicates ?? 0} duplicates · ` +
    `${ex.passages.length} given to the generator`);
  const rows = [
    ...ex.passages.map((p) => el("tr", { class: "used" },
      el("td", {}, passageLink(p)), el("td", {}, p.location), el("td", {}, fmt(p.score)),
      el("td", {}, fmt(p.distance)), el("td", {}, "used"), el("td", {}, p.text.slice(0, 200)))),
    ...ex.dropped.map((d) => el("tr", { class: "cut" },
      el("td", {}, "–"), el("td", {}, d.location), el("td", {}, fmt(d.score)),
      el("td", {}, fmt(d.distance)), el("td", {}, `cut (${d.stage}): ${d.reason}`),
      el("td", {}, d.snippet))),
  ];
  const head = el("tr", {}, ...["#", "source", "score", "distance", "status", "text"]
    .map((h) => el("th", {}, h)));
  return el("div", {}, summary, el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows)));
}

function promptPanel(ex) {
  if (!ex.prompt.length) return el("div", { class: "muted" }, "No prompt: nothing was generated.");
  return el("div", { "data-testid": "prompt" },
    ex.prompt_note ? el("div", { class: "muted", "data-testid": "prompt-note" }, ex.prompt_note) : null,
    ...ex.prompt.map((m) =>
      el("div", { class: "prompt-turn" }, el("strong", {}, m.role), el("pre", {}, m.content))));
}

function timingsPanel(ex) {
  const rows = Object.entries(ex.timings).map(([name, s]) =>
    el("tr", {}, el("td", {}, name), el("td", {}, `${fmt(s)} s`)));
  const trace = ex.trace_id ? el("div", { class: "muted" }, `trace ${ex.trace_id}`) : null;
  return el("div", {}, el("table", {}, el("tbody", {}, ...rows)), trace);
}

function flagBox(ex) {
  const status = el("span", { class: "muted", "data-testid": "flag-status" });
  const comment = el("textarea", { rows: 2, maxlength: options.max_comment_chars,
    placeholder: "What is wrong with this answer?", "data-testid": "flag-comment" });
  const send = el("button", { type: "button", "data-testid": "flag-send" }, "Send flag");
  const form = el("div", { hidden: "" }, comment, send);
  const open = el("button", { type: "button", "data-testid": "flag-button" }, "Flag this answer");
  open.addEventListener("click", () => {
    form.hidden = false;
    open.hidden = true;
    comment.focus();
  });
  send.addEventListener("click", async () => {
    send.disabled = true;
    const response = await postJson("/api/flag",
      { session, exchange: ex.id, comment: comment.value });
    if (response.ok) {
      const flag = await response.json();
      form.hidden = true;
      status.textContent = `Flagged (#${flag.id})${flag.trace_scored ? ", score sent to the trace" : ""}.`;
    } else {
      send.disabled = false;
      status.textContent = `Not flagged: ${await detail(response)}`;
    }
  });
  return el("div", { class: "flag" }, open, form, status);
}

init().catch((err) => notice(`The page could not start: ${err}`));
