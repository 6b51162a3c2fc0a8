// The chat page of chat-agent: one module, no framework, no build step.
//
// Every piece of text that comes from the model or the graph reaches the page
// through textContent or createTextNode, never innerHTML: the Markdown renderer
// below builds DOM nodes, and links are made only for http(s) addresses.

const ANON_KEY = "chat-agent.anon-id";
const TERMINAL = new Set(["job_done", "job_error", "job_cancelled"]);
const STABLE_ID = /^R-[A-Z]{3}-\d+$/;
const RECONNECT_ATTEMPTS = 8;

// ---------------------------------------------------------------- identity

function newAnonId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function anonId() {
  let id = localStorage.getItem(ANON_KEY);
  if (!id || !/^[A-Za-z0-9_.-]{1,128}$/.test(id)) {
    id = newAnonId();
    localStorage.setItem(ANON_KEY, id);
  }
  return id;
}

// ---------------------------------------------------------------- HTTP

class ApiFailure extends Error {
  constructor(status, message, retryAfter = null) {
    super(message);
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

function detailText(detail) {
  if (Array.isArray(detail)) return detail.map((d) => `${d.field}: ${d.reason}`).join("; ");
  return typeof detail === "string" ? detail : "";
}

async function failureOf(response) {
  let reason = "";
  try {
    reason = detailText((await response.json()).detail);
  } catch {
    reason = "";
  }
  const retry = response.headers.get("Retry-After");
  const seconds = retry !== null && /^\d+(\.\d+)?$/.test(retry.trim()) ? Math.ceil(Number(retry)) : null;
  let message;
  if (response.status === 429) {
    message = `Too many messages: ${reason || "rate limit reached"}.`;
    if (seconds !== null) message += ` Try again in ${seconds} s.`;
  } else if (response.status === 503) {
    message = `The service is unavailable: ${reason || "try again shortly"}.`;
    if (seconds !== null) message += ` Retry in ${seconds} s.`;
  } else {
    message = `${response.status} ${response.statusText || "error"}: ${reason || "the request was refused"}`;
  }
  return new ApiFailure(response.status, message, seconds);
}

async function api(method, path, body, extraHeaders = {}) {
  const headers = { "X-Anon-Id": anonId(), ...extraHeaders };
  const init = { method, headers, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    throw new ApiFailure(0, `The gateway could not be reached (${err.message}).`);
  }
  if (!response.ok) throw await failureOf(response);
  return response.status === 204 ? null : response.json();
}

// ---------------------------------------------------------------- DOM helpers

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

function safeHref(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch {
    return null;
  }
}

function externalLink(href, text) {
  return el("a", { href, target: "_blank", rel: "noopener noreferrer", text });
}

// ---------------------------------------------------------------- Markdown
// Blocks: headings, paragraphs, fenced code, lists, block quotes, rules, pipe tables.
// Inline: code, bold, italic, links (http/https only) and bare http(s) addresses.

const INLINE = new RegExp(
  [
    "(`+)([^`]|[^`][\\s\\S]*?[^`])\\1(?!`)", // 1,2 code
    "\\*\\*(?=\\S)([\\s\\S]*?\\S)\\*\\*", // 3 bold
    "(?<![\\w])__(?=\\S)([\\s\\S]*?\\S)__(?![\\w])", // 4 bold
    "\\*(?=[^\\s*])([^*]*?[^\\s*])\\*", // 5 italic
    "(?<![\\w])_(?=[^\\s_])([^_]*?[^\\s_])_(?![\\w])", // 6 italic
    "\\[([^\\]\\n]+)\\]\\(\\s*(\\S+?)(?:\\s+\"[^\"]*\")?\\s*\\)", // 7,8 link
    "(?<![=\"'\\w])(https?:\\/\\/[^\\s<>()\\[\\]]*[^\\s<>()\\[\\].,;:!?'\"])", // 9 bare address
  ].join("|"),
  "g",
);

function renderInline(text, parent) {
  let at = 0;
  const pattern = new RegExp(INLINE.source, "g");
  let m;
  while ((m = pattern.exec(text)) !== null) {
    if (m.index > at) parent.append(document.createTextNode(text.slice(at, m.index)));
    if (m[2] !== undefined) {
      parent.append(el("code", { text: m[2].length > 2 && m[2].startsWith(" ") && m[2].endsWith(" ") ? m[2].slice(1, -1) : m[2] }));
    } else if (m[3] !== undefined || m[4] !== undefined) {
      renderInline(m[3] ?? m[4], parent.appendChild(el("strong")));
    } else if (m[5] !== undefined || m[6] !== undefined) {
      renderInline(m[5] ?? m[6], parent.appendChild(el("em")));
    } else if (m[7] !== undefined) {
      const href = safeHref(m[8]);
      if (href) {
        const link = externalLink(href, "");
        renderInline(m[7], link);
        parent.append(link);
      } else {
        parent.append(document.createTextNode(m[0])); // not http(s): shown as written
      }
    } else if (m[9] !== undefined) {
      const href = safeHref(m[9]);
      parent.append(href ? externalLink(href, m[9]) : document.createTextNode(m[9]));
    }
    at = pattern.lastIndex;
  }
  if (at < text.length) parent.append(document.createTextNode(text.slice(at)));
  return parent;
}

const FENCE = /^\s{0,3}(`{3,}|~{3,})\s*([\w+#.-]*)\s*$/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const BULLET = /^(\s*)[-*+]\s+(.*)$/;
const ORDERED = /^(\s*)(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^\s{0,3}>\s?(.*)$/;
const TABLE_SEPARATOR = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;

function tableCells(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
  return row.split(/(?<!\\)\|/).map((cell) => cell.trim().replace(/\\\|/g, "|"));
}

function isBlockStart(line, next) {
  return (
    FENCE.test(line) || HEADING.test(line) || RULE.test(line) || BULLET.test(line) ||
    ORDERED.test(line) || QUOTE.test(line) || (line.includes("|") && next !== undefined && TABLE_SEPARATOR.test(next) && next.includes("-"))
  );
}

function listItem(line) {
  let m = line.match(BULLET);
  if (m) return { indent: m[1].length, ordered: false, number: 1, text: m[2] };
  m = line.match(ORDERED);
  if (m) return { indent: m[1].length, ordered: true, number: Number(m[2]), text: m[3] };
  return null;
}

const indentOf = (line) => line.length - line.trimStart().length;

// A list from lines[start]; items indented deeper than its own become nested lists.
function renderList(lines, start) {
  const first = listItem(lines[start]);
  const list = el(first.ordered ? "ol" : "ul");
  if (first.ordered && first.number !== 1) list.setAttribute("start", String(first.number));
  let i = start;
  let item = null;
  let text = [];
  const flush = () => {
    if (item && text.length) renderInline(text.join("\n"), item);
    text = [];
  };
  while (i < lines.length) {
    const line = lines[i];
    if (line.trim() === "") {
      let j = i + 1;
      while (j < lines.length && lines[j].trim() === "") j++;
      const after = j < lines.length ? listItem(lines[j]) : null;
      if (after && after.indent >= first.indent && (after.indent > first.indent + 1 || after.ordered === first.ordered)) {
        i = j; // a loose list goes on after the blank line
        continue;
      }
      break;
    }
    const li = listItem(line);
    if (li && li.indent < first.indent) break; // back to an outer list
    if (li && li.indent <= first.indent + 1) {
      if (li.ordered !== first.ordered) break;
      flush();
      item = list.appendChild(el("li"));
      text = [li.text];
      i++;
    } else if (li && item) {
      flush();
      const nested = renderList(lines, i);
      item.append(nested.node);
      i = nested.next;
    } else if (item && indentOf(line) > first.indent) {
      text.push(line.trim()); // the item's text goes on
      i++;
    } else {
      break;
    }
  }
  flush();
  return { node: list, next: i };
}

function renderMarkdown(source) {
  const lines = String(source ?? "").replace(/\r\n?/g, "\n").split("\n");
  const root = document.createDocumentFragment();
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (line.trim() === "") {
      i++;
      continue;
    }
    let m;
    if ((m = line.match(FENCE))) {
      const fence = m[1];
      const body = [];
      i++;
      while (i < lines.length && !(lines[i].trim().startsWith(fence[0].repeat(fence.length)) && lines[i].trim().replace(/[`~]/g, "") === "")) {
        body.push(lines[i]);
        i++;
      }
      i++; // the closing fence (or the end)
      const code = el("code", { text: body.join("\n") });
      if (m[2]) code.dataset.lang = m[2];
      root.append(el("pre", {}, code));
    } else if ((m = line.match(HEADING))) {
      const level = Math.min(6, m[1].length + 2); // the page holds h1 and h2
      root.append(renderInline(m[2], el(`h${level}`)));
      i++;
    } else if (RULE.test(line)) {
      root.append(el("hr"));
      i++;
    } else if (BULLET.test(line) || ORDERED.test(line)) {
      const { node, next } = renderList(lines, i);
      root.append(node);
      i = next;
    } else if (QUOTE.test(line)) {
      const quoted = [];
      while (i < lines.length && (m = lines[i].match(QUOTE))) quoted.push(m[1]), i++;
      root.append(el("blockquote", {}, renderMarkdown(quoted.join("\n"))));
    } else if (line.includes("|") && i + 1 < lines.length && TABLE_SEPARATOR.test(lines[i + 1]) && lines[i + 1].includes("-")) {
      const table = el("table");
      const head = table.appendChild(el("thead")).appendChild(el("tr"));
      for (const cell of tableCells(line)) head.append(renderInline(cell, el("th")));
      const body = table.appendChild(el("tbody"));
      i += 2;
      while (i < lines.length && lines[i].includes("|") && lines[i].trim() !== "") {
        const row = body.appendChild(el("tr"));
        for (const cell of tableCells(lines[i])) row.append(renderInline(cell, el("td")));
        i++;
      }
      root.append(el("div", { class: "table-wrap" }, table));
    } else {
      const text = [line.trim()];
      i++;
      while (i < lines.length && lines[i].trim() !== "" && !isBlockStart(lines[i], lines[i + 1])) {
        text.push(lines[i].trim());
        i++;
      }
      root.append(renderInline(text.join("\n"), el("p")));
    }
  }
  return root;
}

// ---------------------------------------------------------------- SSE over fetch
// fetch() rather than EventSource: it sends X-Anon-Id, and Last-Event-ID on a resume.

async function* sseFrames(body, signal) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let frame = { id: null, event: "message", data: [] };
  try {
    while (true) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, cut);
        buffer = buffer.slice(cut + (buffer.startsWith("\r\n", cut) ? 2 : 1));
        if (line === "") {
          if (frame.data.length) yield { id: frame.id, event: frame.event, data: frame.data.join("\n") };
          frame = { id: null, event: "message", data: [] };
          continue;
        }
        if (line.startsWith(":")) continue; // a comment: the stream's pings
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "id") frame.id = value;
        else if (field === "event") frame.event = value;
        else if (field === "data") frame.data.push(value);
      }
    }
  } finally {
    if (signal.aborted) reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });

// Follow a job's events until its end; on a dropped connection, resume after the
// last event seen (Last-Event-ID), so nothing is shown twice or missed.
async function followJob(jobId, onEvent, onStatus, signal) {
  let lastId = null;
  let attempts = 0;
  while (!signal.aborted) {
    const headers = { "X-Anon-Id": anonId(), Accept: "text/event-stream" };
    if (lastId) headers["Last-Event-ID"] = lastId;
    try {
      const response = await fetch(`/chat/job/${encodeURIComponent(jobId)}/events`, { headers, signal, cache: "no-store" });
      if (!response.ok) throw await failureOf(response);
      onStatus(null);
      for await (const frame of sseFrames(response.body, signal)) {
        attempts = 0;
        if (frame.id) lastId = frame.id;
        let payload;
        try {
          payload = JSON.parse(frame.data);
        } catch {
          continue;
        }
        const type = payload.type || frame.event;
        onEvent(type, payload.data || {});
        if (TERMINAL.has(type)) return type;
      }
    } catch (err) {
      if (signal.aborted) return null;
      if (err instanceof ApiFailure && err.status >= 400 && err.status < 500 && err.status !== 429) throw err;
    }
    if (signal.aborted) return null;
    attempts += 1;
    if (attempts > RECONNECT_ATTEMPTS) throw new ApiFailure(0, "The connection to the gateway was lost; reload the page to see the answer.");
    onStatus(`Connection lost — reconnecting (attempt ${attempts} of ${RECONNECT_ATTEMPTS})…`);
    await sleep(Math.min(250 * 2 ** attempts, 5000), signal);
  }
  return null;
}

// ---------------------------------------------------------------- one exchange

function formatArguments(raw) {
  try {
    return JSON.parse(raw);
  } catch {
    return null;
  }
}

function number(value, digits) {
  return typeof value === "number" && Number.isFinite(value) ? value.toFixed(digits) : "?";
}

function sourceItem(source) {
  const stId = typeof source.stId === "string" ? source.stId : "";
  const name = String(source.displayName || stId || source.id || "node");
  const item = el("li", { class: "source" });
  if (STABLE_ID.test(stId)) {
    item.append(externalLink(`https://reactome.org/content/detail/${encodeURIComponent(stId)}`, name));
  } else {
    item.append(el("span", { class: "source-name", text: name }));
  }
  if (stId) item.append(" ", el("code", { class: "source-id", text: stId }));
  for (const label of Array.isArray(source.labels) ? source.labels : []) item.append(" ", el("span", { class: "tag", text: String(label) }));
  if (typeof source.score === "number") item.append(" ", el("span", { class: "score", text: `score ${number(source.score, 3)}` }));
  return item;
}

// The assistant side of one question: its steps as they stream, the answer, the sources.
class Turn {
  constructor(container) {
    this.root = container.appendChild(el("article", { class: "turn assistant running" }));
    const details = this.root.appendChild(el("details", { class: "steps", open: true }));
    this.summary = details.appendChild(el("summary", { text: "Working…" }));
    this.steps = details.appendChild(el("ol", { class: "step-list" }));
    this.status = this.root.appendChild(el("p", { class: "status", hidden: true }));
    this.answer = this.root.appendChild(el("div", { class: "answer" }));
    this.sources = this.root.appendChild(el("div", { class: "sources", hidden: true }));
    this.streamed = "";
    this.streamedIteration = null;
    this.stepCount = 0;
    this.pendingRender = false;
  }

  step(type, ...children) {
    this.stepCount += 1;
    return this.steps.appendChild(el("li", { class: `step step-${type}`, "data-type": type }, ...children));
  }

  setStatus(text) {
    this.status.hidden = !text;
    this.status.textContent = text || "";
  }

  handle(type, data) {
    switch (type) {
      case "job_submitted":
        this.step(type, "Question received");
        break;
      case "routing_started":
        this.step(type, "Choosing a route…");
        break;
      case "routing_fallback":
        this.step(type, `Router model unavailable, the ${data.classifier || "local"} classifier decided: ${data.reason || ""}`);
        break;
      case "routing_done": {
        const li = this.step(type, "Route: ", el("strong", { class: "route", text: String(data.route) }),
          " · confidence ", el("span", { class: "confidence", text: number(data.confidence, 2) }));
        if (data.escalated) li.append(" ", el("span", { class: "tag warn", text: `escalated from ${data.proposed_route || "lookup"}` }));
        if (data.reasoning) li.append(el("div", { class: "reasoning", text: String(data.reasoning) }));
        break;
      }
      case "lookup_started":
        this.step(type, `Searching the graph (top ${data.k ?? "k"})…`);
        break;
      case "lookup_results": {
        const li = this.step(type, `Found ${data.count ?? 0} nodes`, data.duration_ms !== undefined ? ` in ${number(data.duration_ms, 1)} ms` : "");
        const top = Array.isArray(data.top) ? data.top : [];
        if (top.length) li.append(el("ul", { class: "top" }, ...top.map((t) => el("li", { text: `${t.displayName ?? "?"} (${t.stId ?? "?"}) · ${number(t.score, 3)}` }))));
        break;
      }
      case "agent_step":
        this.step(type, `Agent step ${data.iteration ?? "?"}${data.max_iterations ? ` of at most ${data.max_iterations}` : ""}`);
        break;
      case "tool_call": {
        this.settleStreamedText(data.iteration);
        const li = this.step(type, "Tool call: ", el("strong", { class: "tool-name", text: String(data.name) }));
        const args = formatArguments(data.arguments);
        const cypher = args && typeof args === "object" ? args.cypher ?? args.query : null;
        if (data.name === "graph_query" && typeof cypher === "string") {
          li.append(el("pre", { class: "cypher" }, el("code", { "data-lang": "cypher", text: cypher })));
        } else {
          const shown = args !== null ? JSON.stringify(args, null, 1) : String(data.arguments ?? "");
          li.append(el("pre", { class: "arguments" }, el("code", { "data-lang": "json", text: shown })));
        }
        break;
      }
      case "tool_result": {
        const li = this.step(type, `Result of ${data.name}: `, el("span", { class: data.ok ? "ok" : "failed", text: data.ok ? "ok" : "failed" }),
          ` · ${number(data.duration_ms, 1)} ms`, data.chars !== undefined ? ` · ${data.chars} characters` : "");
        if (data.preview) li.append(el("details", { class: "preview" }, el("summary", { text: "preview" }), el("pre", {}, el("code", { text: String(data.preview) }))));
        break;
      }
      case "answer_delta":
        this.delta(data);
        break;
      case "agent_restarted":
        // another agent process took the job over and starts again: drop the interrupted text
        this.streamed = "";
        this.streamedIteration = null;
        this.root.classList.remove("streaming");
        this.answer.replaceChildren();
        this.step(type, `Agent restarted (attempt ${data.attempt ?? "?"}) after a worker was lost`);
        break;
      case "agent_done":
        this.step(type, `Agent done: ${data.iterations ?? "?"} steps, ${data.tool_calls ?? 0} tool calls${data.capped ? " (iteration cap reached)" : ""}`);
        break;
      case "agent_degraded":
        this.step(type, `The LLM at ${data.endpoint || "its endpoint"} could not be reached; answering with the closest graph matches. ${data.reason || ""}`);
        break;
      case "cancel_requested":
        this.step(type, "Cancel requested");
        break;
      case "job_done":
        this.done(data.result || {});
        break;
      case "job_error":
        this.fail(String(data.error || "unknown error"));
        break;
      case "job_cancelled":
        this.cancelled(String(data.reason || "cancelled"));
        break;
      default:
        this.step(type, `${type} `, el("code", { text: JSON.stringify(data) }));
    }
  }

  // Pieces of the answer as the model writes them: shown growing, for the latest model call.
  delta(data) {
    const iteration = data.iteration ?? null;
    if (iteration !== this.streamedIteration) {
      this.streamed = "";
      this.streamedIteration = iteration;
    }
    this.streamed += String(data.text ?? "");
    if (!this.streamed) return;
    this.root.classList.add("streaming");
    if (!this.pendingRender) {
      this.pendingRender = true;
      requestAnimationFrame(() => {
        this.pendingRender = false;
        if (this.root.classList.contains("streaming")) this.answer.replaceChildren(renderMarkdown(this.streamed));
      });
    }
  }

  // Text the model wrote before calling tools is not the answer: it moves to the steps.
  settleStreamedText(iteration) {
    if (!this.streamed || (iteration !== undefined && iteration !== this.streamedIteration)) return;
    this.step("model_text", el("span", { class: "reasoning", text: this.streamed }));
    this.streamed = "";
    this.root.classList.remove("streaming");
    this.answer.replaceChildren();
  }

  finish(state, summary) {
    this.root.classList.remove("running", "streaming");
    this.root.classList.add(state);
    this.summary.textContent = `${summary} · ${this.stepCount} steps`;
    this.setStatus(null);
  }

  done(result) {
    this.answer.replaceChildren(renderMarkdown(result.answer || ""));
    const sources = Array.isArray(result.sources) ? result.sources : [];
    if (sources.length) {
      this.sources.replaceChildren(el("h3", { text: "Sources" }), el("ul", {}, ...sources.map(sourceItem)));
      this.sources.hidden = false;
    }
    const usage = result.token_usage || {};
    const meta = this.root.appendChild(el("p", { class: "meta" }));
    if (result.route_taken) meta.append(`answered by ${result.route_taken}`);
    if (usage.input_tokens || usage.output_tokens) meta.append(` · ${usage.input_tokens ?? 0} tokens in, ${usage.output_tokens ?? 0} out`);
    this.finish("done", "Steps");
  }

  fail(reason) {
    this.answer.replaceChildren(el("p", { class: "job-error", text: `This message could not be answered: ${reason}` }));
    this.finish("error", "Failed");
  }

  cancelled(reason) {
    const partial = this.streamed ? el("div", { class: "partial" }, renderMarkdown(this.streamed)) : null;
    this.answer.replaceChildren(el("p", { class: "job-cancelled", text: `Cancelled: ${reason}` }), ...(partial ? [partial] : []));
    this.finish("cancelled", "Cancelled");
  }

  // An answer already stored in the session: its steps and text, no live stream.
  static fromMessage(container, message) {
    const turn = new Turn(container);
    for (const event of message.events || []) if (event.type !== "answer_delta") turn.handle(event.type, event.data || {});
    turn.answer.replaceChildren(renderMarkdown(message.content));
    turn.root.querySelector("details.steps").open = false;
    const meta = turn.root.appendChild(el("p", { class: "meta" }));
    if (message.route) meta.append(`answered by ${message.route}`);
    if (typeof message.confidence === "number") meta.append(` · route confidence ${number(message.confidence, 2)}`);
    turn.finish(message.route ? "done" : "ended", "Steps");
    return turn;
  }
}

// ---------------------------------------------------------------- the page

const $ = (id) => document.getElementById(id);

const state = {
  sessionId: null,
  session: null,
  jobId: null,
  follow: null, // AbortController of the stream being followed
};

function showError(message) {
  $("error-text").textContent = message;
  $("error").hidden = false;
}

function clearError() {
  $("error").hidden = true;
  $("error-text").textContent = "";
}

function setRunning(jobId) {
  state.jobId = jobId;
  document.body.dataset.state = jobId ? "running" : "idle";
  $("send").disabled = Boolean(jobId);
  $("cancel-job").hidden = !jobId;
  $("cancel-job").disabled = false;
  $("cancel-job").textContent = "Cancel";
}

function sessionLabel(summary) {
  if (summary.name) return summary.name;
  const when = new Date(summary.created_at);
  return `Chat of ${Number.isNaN(when.getTime()) ? "?" : when.toLocaleString()}`;
}

function setTitle() {
  const session = state.session;
  $("session-title").textContent = session ? session.name || sessionLabel(session) : "New chat";
  $("rename-session").disabled = !session;
  $("delete-session").disabled = !session;
}

async function refreshSessions() {
  let sessions;
  try {
    sessions = await api("GET", "/chat/sessions");
  } catch (err) {
    showError(`The session list could not be loaded: ${err.message}`);
    return;
  }
  const list = $("session-list");
  list.replaceChildren(
    ...sessions.map((s) => {
      const button = el("button", { type: "button", class: "session-open" },
        el("span", { class: "session-name", text: sessionLabel(s) }),
        el("span", { class: "session-meta", text: `${s.message_count} message${s.message_count === 1 ? "" : "s"} · ${new Date(s.last_activity).toLocaleString()}` }));
      button.addEventListener("click", () => openSession(s.session_id));
      return el("li", { class: s.session_id === state.sessionId ? "active" : null, "data-session-id": s.session_id }, button);
    }),
  );
  $("session-list-empty").hidden = sessions.length > 0;
}

function stopFollowing() {
  if (state.follow) state.follow.abort();
  state.follow = null;
  setRunning(null);
}

function resetChat() {
  stopFollowing();
  const messages = $("messages");
  messages.replaceChildren($("welcome") || el("p", { id: "welcome", class: "muted" }));
  $("welcome").hidden = false;
}

function addUserMessage(text) {
  $("welcome").hidden = true;
  const article = $("messages").appendChild(el("article", { class: "turn user" }));
  article.append(el("p", { class: "user-text", text }));
  return article;
}

function scrollDown() {
  const messages = $("messages");
  messages.scrollTop = messages.scrollHeight;
}

async function track(jobId, turn) {
  stopFollowing();
  const controller = new AbortController();
  state.follow = controller;
  setRunning(jobId);
  const observer = new MutationObserver(scrollDown);
  observer.observe(turn.root, { childList: true, subtree: true, characterData: true });
  try {
    const end = await followJob(jobId, (type, data) => turn.handle(type, data), (text) => turn.setStatus(text), controller.signal);
    if (end === "job_error") showError("The job ended with an error (details in the conversation).");
  } catch (err) {
    turn.fail(err.message);
    showError(err.message);
  } finally {
    observer.disconnect();
    if (state.follow === controller) {
      state.follow = null;
      setRunning(null);
      refreshSessions();
    }
  }
}

function newChat() {
  state.sessionId = null;
  state.session = null;
  if (location.hash) history.replaceState(null, "", location.pathname);
  resetChat();
  setTitle();
  clearError();
  refreshSessions();
  $("message").focus();
}

async function openSession(sessionId) {
  clearError();
  let session;
  try {
    session = await api("GET", `/chat/session/${encodeURIComponent(sessionId)}`);
  } catch (err) {
    showError(err.status === 404 ? "That session does not exist any more (or is not yours)." : err.message);
    newChat();
    return;
  }
  resetChat();
  state.sessionId = session.session_id;
  state.session = session;
  if (location.hash !== `#session=${session.session_id}`) history.replaceState(null, "", `#session=${session.session_id}`);
  setTitle();
  const messages = $("messages");
  for (const message of session.messages) {
    if (message.role === "user") addUserMessage(message.content);
    else Turn.fromMessage(messages, message);
  }
  if (session.messages.length) $("welcome").hidden = true;
  scrollDown();
  refreshSessions();
  if (session.pending_job_id) track(session.pending_job_id, new Turn(messages)); // still running: follow it
}

async function send(text) {
  clearError();
  const body = { message: text };
  if (state.sessionId) body.session_id = state.sessionId;
  let accepted;
  $("send").disabled = true;
  try {
    accepted = await api("POST", "/chat/message", body);
  } catch (err) {
    $("send").disabled = Boolean(state.jobId);
    showError(err.message);
    return false;
  }
  if (!state.sessionId) {
    state.sessionId = accepted.session_id;
    state.session = { session_id: accepted.session_id, name: null, created_at: new Date().toISOString() };
    history.replaceState(null, "", `#session=${accepted.session_id}`);
    setTitle();
    refreshSessions();
  }
  addUserMessage(text);
  const turn = new Turn($("messages"));
  turn.root.dataset.jobId = accepted.job_id;
  scrollDown();
  track(accepted.job_id, turn);
  return true;
}

async function cancelJob() {
  const jobId = state.jobId;
  if (!jobId) return;
  const button = $("cancel-job");
  button.disabled = true;
  button.textContent = "Cancelling…";
  try {
    await api("POST", `/chat/job/${encodeURIComponent(jobId)}/cancel`);
  } catch (err) {
    if (err.status === 409) return; // it had already ended: its last event is on its way
    button.disabled = false;
    button.textContent = "Cancel";
    showError(`The job could not be cancelled: ${err.message}`);
  }
}

function startRename() {
  if (!state.session) return;
  $("rename-input").value = state.session.name || "";
  $("rename-form").hidden = false;
  $("session-title").hidden = true;
  $("rename-input").focus();
  $("rename-input").select();
}

function endRename() {
  $("rename-form").hidden = true;
  $("session-title").hidden = false;
}

async function rename(name) {
  try {
    const session = await api("PATCH", `/chat/session/${encodeURIComponent(state.sessionId)}`, { name });
    state.session = { ...state.session, name: session.name };
    endRename();
    setTitle();
    refreshSessions();
  } catch (err) {
    showError(`The session could not be renamed: ${err.message}`);
  }
}

async function deleteSession() {
  if (!state.sessionId || !confirm("Delete this session and its messages?")) return;
  try {
    await api("DELETE", `/chat/session/${encodeURIComponent(state.sessionId)}`);
  } catch (err) {
    if (err.status !== 404) {
      showError(`The session could not be deleted: ${err.message}`);
      return;
    }
  }
  newChat();
}

function sessionFromHash() {
  const m = location.hash.match(/^#session=([0-9a-f-]{36})$/);
  return m ? m[1] : null;
}

function start() {
  anonId();
  document.body.dataset.state = "idle";
  $("new-session").addEventListener("click", newChat);
  $("error-close").addEventListener("click", clearError);
  $("cancel-job").addEventListener("click", cancelJob);
  $("rename-session").addEventListener("click", startRename);
  $("rename-cancel").addEventListener("click", endRename);
  $("delete-session").addEventListener("click", deleteSession);
  $("rename-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const name = $("rename-input").value.trim();
    if (name) rename(name);
  });
  $("rename-input").addEventListener("keydown", (event) => {
    if (event.key === "Escape") endRename();
  });
  $("composer").addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = $("message").value;
    if (!text.trim() || state.jobId) return;
    if (await send(text)) $("message").value = "";
  });
  $("message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  window.addEventListener("hashchange", () => {
    const id = sessionFromHash();
    if (id && id !== state.sessionId) openSession(id);
  });
  const initial = sessionFromHash();
  if (initial) openSession(initial);
  else newChat();
}

start();

export { renderMarkdown, renderInline, safeHref };
