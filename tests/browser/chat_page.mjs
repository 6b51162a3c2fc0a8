// Drives the web chat page in headless Chromium (Debian's, through playwright-core)
// against a running gateway whose LLM is the tests' scripted server.
//
//   GATEWAY_URL=http://127.0.0.1:8000 OUTPUT_DIR=test-output node tests/browser/chat_page.mjs
//
// Prints one JSON line on success ({"ok": true, ...}); on a failed check it prints
// the reason, saves a screenshot of the page as it was, and exits 1.

import { mkdtempSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chromium } from "playwright-core";

const GATEWAY = process.env.GATEWAY_URL;
const OUTPUT = resolve(process.env.OUTPUT_DIR || "test-output");
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const STEP_TIMEOUT = Number(process.env.STEP_TIMEOUT_MS || 20000);

// The questions the scripted LLM knows (see tests/test_web_page.py).
const AGENT_QUESTION = 'Why do cells die through the intrinsic pathway? <img src=x onerror="window.__pwned=5">';
const LOOKUP_QUESTION = "show me the node for the intrinsic pathway for apoptosis";
const SLOW_QUESTION = "Explain slowly how apoptosis is regulated";
const FAILING_QUESTION = "Ask the model something it refuses";
const REFUSED_QUESTION = "One question too many";
const NEW_NAME = "Apoptosis questions";

class CheckFailed extends Error {}

function check(condition, message) {
  if (!condition) throw new CheckFailed(message);
}

function log(message) {
  process.stderr.write(`[chat_page] ${message}\n`);
}


// Ask through the composer; the answer's turn is the next assistant turn.
async function ask(page, question, { accepted = true } = {}) {
  const before = await page.locator("article.turn.assistant").count();
  await page.fill("#message", question);
  await page.press("#message", "Enter");
  if (!accepted) return null;
  const turn = page.locator("article.turn.assistant").nth(before);
  await turn.waitFor({ timeout: STEP_TIMEOUT });
  return turn;
}

async function waitTurnEnd(turn, state) {
  await turn.locator(`xpath=self::*[contains(concat(' ', @class, ' '), ' ${state} ')]`).waitFor({ timeout: STEP_TIMEOUT });
  return turn;
}

async function stepTypes(turn) {
  return turn.locator("li.step").evaluateAll((items) => items.map((li) => li.dataset.type));
}

// The renderer on its own, case by case: the DOM it builds, serialised for comparison.
const LINK = (href, text) => `<a href="${href}" target="_blank" rel="noopener noreferrer">${text}</a>`;
const MARKDOWN_CASES = [
  ["# Title", "<h3>Title</h3>"],
  ["### `code` in a *heading*", "<h5><code>code</code> in a <em>heading</em></h5>"],
  ["**bold** and __bold__, *it* and _it_, `c*o*de`", "<p><strong>bold</strong> and <strong>bold</strong>, <em>it</em> and <em>it</em>, <code>c*o*de</code></p>"],
  ["snake_case_name and 2*3*4", "<p>snake_case_name and 2<em>3</em>4</p>"],
  ["line one\nline two\n\nnext paragraph", "<p>line one\nline two</p><p>next paragraph</p>"],
  ["<b>bold?</b> <img src=x onerror=alert(1)>", "<p>&lt;b&gt;bold?&lt;/b&gt; &lt;img src=x onerror=alert(1)&gt;</p>"],
  ["[site](https://reactome.org/a_b) [ftp](ftp://x.org) [js](javascript:alert(1)) [rel](/chat/sessions)",
    `<p>${LINK("https://reactome.org/a_b", "site")} [ftp](ftp://x.org) [js](javascript:alert(1)) [rel](/chat/sessions)</p>`],
  ["[**bold link**](http://example.org \"title\")", `<p>${LINK("http://example.org/", "<strong>bold link</strong>")}</p>`],
  ["see https://reactome.org/content/detail/R-HSA-109606.", `<p>see ${LINK("https://reactome.org/content/detail/R-HSA-109606", "https://reactome.org/content/detail/R-HSA-109606")}.</p>`],
  // a quote cannot break out of an attribute: the address ends there and the rest is text
  ["[x](https://a.org/\" onmouseover=\"alert(1))", `<p>[x](${LINK("https://a.org/", "https://a.org/")}" onmouseover="alert(1))</p>`],
  ["- a\n- b with **b**\n  continued\n- c", "<ul><li>a</li><li>b with <strong>b</strong>\ncontinued</li><li>c</li></ul>"],
  ["- a\n  - a.1\n  - a.2\n- b", "<ul><li>a<ul><li>a.1</li><li>a.2</li></ul></li><li>b</li></ul>"],
  ["3. three\n4. four", '<ol start="3"><li>three</li><li>four</li></ol>'],
  ["```cypher\nMATCH (n) RETURN n.name\n<script>alert(1)</script>\n```", '<pre><code data-lang="cypher">MATCH (n) RETURN n.name\n&lt;script&gt;alert(1)&lt;/script&gt;</code></pre>'],
  ["```\nnever closed", "<pre><code>never closed</code></pre>"],
  ["> quoted *text*", "<blockquote><p>quoted <em>text</em></p></blockquote>"],
  ["a\n\n---\n\nb", "<p>a</p><hr><p>b</p>"],
  ["| gene | role |\n|---|:---:|\n| BAX | **pro** |\n| a \\| b | <i>x</i> |",
    '<div class="table-wrap"><table><thead><tr><th>gene</th><th>role</th></tr></thead><tbody><tr><td>BAX</td><td><strong>pro</strong></td></tr><tr><td>a | b</td><td>&lt;i&gt;x&lt;/i&gt;</td></tr></tbody></table></div>'],
  ["", ""],
];

async function markdownCases(page) {
  const rendered = await page.evaluate(async (cases) => {
    const { renderMarkdown } = await import("/static/app.js");
    return cases.map(([source]) => {
      const box = document.createElement("div");
      box.append(renderMarkdown(source));
      return box.innerHTML; // read back only, to compare
    });
  }, MARKDOWN_CASES);
  const wrong = MARKDOWN_CASES.map(([source, expected], i) => ({ source, expected, got: rendered[i] })).filter((c) => c.got !== c.expected);
  check(wrong.length === 0, `Markdown rendered as expected: ${JSON.stringify(wrong, null, 1)}`);
  return MARKDOWN_CASES.length;
}

async function agentAnswer(page) {
  const turn = await ask(page, AGENT_QUESTION);
  await page.waitForSelector('body[data-state="running"]', { timeout: STEP_TIMEOUT });
  check(await page.isVisible("#cancel-job"), "the Cancel button shows while a job runs");
  await waitTurnEnd(turn, "done");
  check((await page.getAttribute("body", "data-state")) === "idle", "the page is idle again after the answer");
  check(!(await page.isVisible("#cancel-job")), "the Cancel button is hidden once the job ended");

  // the steps, as they streamed
  const types = await stepTypes(turn);
  for (const type of ["routing_done", "agent_step", "tool_call", "tool_result", "agent_done"]) {
    check(types.includes(type), `step ${type} is shown (shown: ${types.join(", ")})`);
  }
  const routing = await turn.locator('li[data-type="routing_done"]').innerText();
  check(/agent/.test(routing) && /0\.90/.test(routing), `routing shows route and confidence: ${routing}`);
  const calls = await turn.locator('li[data-type="tool_call"] .tool-name').allInnerTexts();
  check(calls.join(",") === "vector_search,graph_query", `tool calls in order: ${calls}`);
  const cypher = await turn.locator('li[data-type="tool_call"] pre.cypher code').innerText();
  check(/^MATCH \(p\) WHERE p\.stId = 'R-HSA-\d+' RETURN/.test(cypher), `the Cypher is shown as code: ${cypher}`);
  const searched = await turn.locator('li[data-type="tool_call"] pre.arguments code').innerText();
  check(searched.includes('<img src=x onerror=\\"window.__pwned=5\\">'), `tool arguments shown as text: ${searched}`);
  check((await page.locator("article.turn.user .user-text").last().innerText()) === AGENT_QUESTION, "the question shows as typed");
  const results = await turn.locator('li[data-type="tool_result"]').allInnerTexts();
  check(results.length === 2 && results.every((r) => /ok · [\d.]+ ms/.test(r)), `tool results with duration: ${results}`);

  // the answer, rendered from Markdown
  const answer = turn.locator(".answer");
  check((await answer.locator("h4").innerText()) === "Intrinsic pathway", "## heading rendered");
  const strong = await answer.locator("p strong").first().innerText();
  check(strong.length > 3, "bold text rendered");
  check((await answer.locator("ul > li").count()) === 4, "list items rendered");
  check((await answer.locator("li em").innerText()) === "emphasis", "italic rendered");
  check(/^R-HSA-\d+$/.test(await answer.locator("p code").first().innerText()), "inline code rendered");
  check((await answer.locator("pre code").innerText()).startsWith("MATCH (p) RETURN p.displayName"), "code block rendered");
  const safeLink = answer.locator('a[href^="https://reactome.org/content/detail/R-HSA-"]');
  check((await safeLink.count()) === 1 && (await safeLink.innerText()) === "Reactome", "an https link is a link");
  check((await safeLink.getAttribute("rel")) === "noopener noreferrer", "links open without an opener");

  // nothing the model wrote became markup or ran
  const text = await answer.innerText();
  check(text.includes('<img src=x onerror="window.__pwned=1">'), "the <img onerror> shows as text");
  check(text.includes("<script>window.__pwned=2</script>"), "the <script> shows as text");
  check(text.includes("[a trap](javascript:window.__pwned=3)"), "a javascript: link shows as text");
  check(text.includes('<a href="https://example.org">raw html</a>'), "raw HTML links show as text");
  const injected = await page.evaluate(() => ({
    pwned: window.__pwned,
    img: document.querySelectorAll("#messages img").length,
    script: document.querySelectorAll("#messages script").length,
    iframe: document.querySelectorAll("#messages iframe").length,
    badLinks: Array.from(document.querySelectorAll("a")).filter((a) => !/^https?:/.test(a.href)).length,
  }));
  check(injected.pwned === undefined, "no injected script ran");
  check(injected.img === 0 && injected.script === 0 && injected.iframe === 0, `no injected element: ${JSON.stringify(injected)}`);
  check(injected.badLinks === 0, "every link on the page is http(s)");

  // sources: Reactome stable ids are links to reactome.org, with labels and score
  const sources = turn.locator(".sources li.source");
  check((await sources.count()) >= 1, "sources are listed");
  const hrefs = await turn.locator(".sources a").evaluateAll((links) => links.map((a) => a.href));
  check(hrefs.length >= 1 && hrefs.every((h) => /^https:\/\/reactome\.org\/content\/detail\/R-[A-Z]{3}-\d+$/.test(h)), `source links: ${hrefs}`);
  const first = await sources.first().innerText();
  check(/score \d\.\d{3}/.test(first) && (await sources.first().locator(".tag").count()) >= 1, `a source shows labels and score: ${first}`);
}

async function lookupAnswerAfterReconnect(page) {
  // The first events stream of this job is cut after three events: the page must
  // reconnect with Last-Event-ID and show every step once.
  let intercepted = 0;
  const resumes = [];
  page.on("request", (request) => {
    const lastId = request.headers()["last-event-id"];
    if (request.url().includes("/events") && lastId) resumes.push(lastId);
  });
  await page.route("**/chat/job/*/events", async (route) => {
    if (intercepted++ > 0) return route.continue();
    const response = await route.fetch();
    const frames = (await response.text()).split("\n\n").filter((f) => f.includes("id: "));
    check(frames.length > 3, `the job has more than three events (${frames.length})`);
    await route.fulfill({ status: 200, headers: { "content-type": "text/event-stream" }, body: frames.slice(0, 3).join("\n\n") + "\n\n" });
  });
  const turn = await waitTurnEnd(await ask(page, LOOKUP_QUESTION), "done");
  await page.unroute("**/chat/job/*/events");
  check(resumes.length === 1 && /^\d+-\d+$/.test(resumes[0]), `one resume with Last-Event-ID: ${resumes}`);
  const types = await stepTypes(turn);
  const unique = new Set(types);
  check(unique.size === types.length, `no step shown twice after the resume: ${types}`);
  check(types.includes("lookup_results") && types.includes("routing_done"), `lookup steps shown: ${types}`);
  check(/lookup/.test(await turn.locator('li[data-type="routing_done"]').innerText()), "routed to lookup");
  check((await turn.locator(".answer h5").count()) >= 1, "the lookup answer's ### headings are rendered");
  check((await turn.locator('.sources a[href^="https://reactome.org/content/detail/"]').count()) >= 1, "lookup sources link to reactome.org");
}

async function cancelWhileStreaming(page) {
  const turn = await ask(page, SLOW_QUESTION);
  const answer = turn.locator(".answer");
  await page.waitForSelector("article.turn.assistant.streaming", { timeout: STEP_TIMEOUT });
  await page.waitForFunction(() => {
    const turns = document.querySelectorAll("article.turn.assistant");
    return turns[turns.length - 1].querySelector(".answer").textContent.length > 20;
  }, null, { timeout: STEP_TIMEOUT });
  const early = (await answer.innerText()).length;
  await page.waitForFunction((n) => {
    const turns = document.querySelectorAll("article.turn.assistant");
    return turns[turns.length - 1].querySelector(".answer").textContent.length > n;
  }, early, { timeout: STEP_TIMEOUT });
  const later = (await answer.innerText()).length;
  check(later > early, `the answer grows as deltas arrive (${early} then ${later} characters)`);
  await page.click("#cancel-job");
  await waitTurnEnd(turn, "cancelled");
  check(/Cancelled/.test(await turn.locator(".job-cancelled").innerText()), "the cancellation is shown");
  check((await page.getAttribute("body", "data-state")) === "idle", "idle after the cancel");
  return { early, later };
}

async function jobError(page) {
  const turn = await waitTurnEnd(await ask(page, FAILING_QUESTION), "error");
  const shown = await turn.locator(".job-error").innerText();
  check(/could not be answered: .*refused the request: 400/.test(shown), `the job_error reason is shown: ${shown}`);
  await page.waitForSelector("#error:not([hidden])", { timeout: STEP_TIMEOUT });
  check(/ended with an error/.test(await page.innerText("#error-text")), "the error banner tells about it");
  await page.click("#error-close");
  check(await page.isHidden("#error"), "the banner can be dismissed");
}

async function refusedByRateLimit(page) {
  await ask(page, REFUSED_QUESTION, { accepted: false });
  await page.waitForSelector("#error:not([hidden])", { timeout: STEP_TIMEOUT });
  const error = await page.innerText("#error-text");
  check(/Too many messages/.test(error) && /Try again in \d+ s/.test(error), `a 429 is explained with its wait: ${error}`);
  check((await page.inputValue("#message")) === REFUSED_QUESTION, "the refused question stays in the box");
  await page.click("#error-close");
  return error;
}

async function renameReloadDelete(page, dialogs) {
  const active = page.locator("#session-list li.active");
  check((await page.locator("#session-list li").count()) === 1, "one session listed");
  await page.click("#rename-session");
  await page.fill("#rename-input", NEW_NAME);
  await page.press("#rename-input", "Enter");
  await page.waitForFunction((name) => document.querySelector("#session-list li.active .session-name")?.textContent === name, NEW_NAME, { timeout: STEP_TIMEOUT });
  check((await page.innerText("#session-title")) === NEW_NAME, "the title shows the new name");
  const sessionId = await active.getAttribute("data-session-id");

  // a reload reopens the session from the address: the whole story, from the server
  const anon = await page.evaluate(() => localStorage.getItem("chat-agent.anon-id"));
  await page.reload();
  await page.waitForFunction((name) => document.querySelector("#session-title")?.textContent === name, NEW_NAME, { timeout: STEP_TIMEOUT });
  check((await page.evaluate(() => localStorage.getItem("chat-agent.anon-id"))) === anon, "the anonymous id is kept across reloads");
  check((await page.locator("article.turn.user").count()) === 4, "four questions after the reload");
  check((await page.locator("article.turn.assistant").count()) === 4, "four answers after the reload");
  const restored = await page.locator("article.turn.assistant").first().innerText();
  check(restored.includes("<script>window.__pwned=2</script>") && (await page.evaluate(() => window.__pwned)) === undefined, "the stored answer is still text");
  await page.screenshot({ path: join(OUTPUT, "web-chat-reloaded.png") });

  page.once("dialog", (dialog) => {
    dialogs.push(dialog.message());
    dialog.accept();
  });
  await page.click("#delete-session");
  await page.waitForFunction(() => document.querySelectorAll("#session-list li").length === 0, null, { timeout: STEP_TIMEOUT });
  check((await page.innerText("#session-title")) === "New chat", "a fresh chat after the delete");
  check((await page.locator("article.turn").count()) === 0, "the conversation is cleared");
  return { sessionId, anon };
}

async function main() {
  check(GATEWAY, "GATEWAY_URL is required");
  mkdirSync(OUTPUT, { recursive: true });
  const profile = mkdtempSync(join(tmpdir(), "chat-page-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const page = context.pages()[0] || (await context.newPage());
  const problems = [];
  const dialogs = [];
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  page.on("console", (msg) => {
    // the refused message's 429 is expected; anything else logged as an error is not
    if (msg.type() === "error" && !/status of 429/.test(msg.text())) problems.push(`console: ${msg.text()} (${msg.location().url})`);
  });
  const started = Date.now();
  const timings = {};
  const timed = async (name, fn) => {
    const t = Date.now();
    const out = await fn();
    timings[name] = Date.now() - t;
    log(`${name}: ${timings[name]} ms`);
    return out;
  };
  try {
    await timed("open", async () => {
      const response = await page.goto(GATEWAY + "/", { waitUntil: "load" });
      check(response.ok(), `GET / answers ${response.status()}`);
      check(/script-src 'self'/.test(response.headers()["content-security-policy"] || ""), "the page has a CSP");
      await page.waitForSelector('body[data-state="idle"]');
      const attribution = await page.innerText("#attribution");
      check(/Reactome Knowledgebase/.test(attribution) && /CC BY 4\.0/.test(attribution) && /Milacic/.test(attribution) && /2024/.test(attribution),
        `attribution line: ${attribution}`);
      check((await page.getAttribute('#attribution a[href="https://reactome.org"]', "href")) === "https://reactome.org", "attribution links reactome.org");
      const anon = await page.evaluate(() => localStorage.getItem("chat-agent.anon-id"));
      check(/^[A-Za-z0-9_.-]{1,128}$/.test(anon || ""), `an anonymous id is kept in localStorage: ${anon}`);
    });
    const markdown = await timed("markdown cases", () => markdownCases(page));
    await timed("agent answer", () => agentAnswer(page));
    await page.screenshot({ path: join(OUTPUT, "web-chat.png") });
    await timed("lookup with reconnect", () => lookupAnswerAfterReconnect(page));
    const growth = await timed("stream and cancel", () => cancelWhileStreaming(page));
    await timed("job error", () => jobError(page));
    const refusal = await timed("rate limit", () => refusedByRateLimit(page));
    const kept = await timed("rename, reload, delete", () => renameReloadDelete(page, dialogs));
    check(dialogs.length === 1 && /Delete this session/.test(dialogs[0]), `only the delete confirmation was a dialog: ${dialogs}`);
    check(problems.length === 0, `no page errors: ${problems.join(" | ")}`);
    console.log(JSON.stringify({ ok: true, ...kept, markdown, growth, refusal, timings, total_ms: Date.now() - started,
      screenshots: ["web-chat.png", "web-chat-reloaded.png"].map((f) => join(OUTPUT, f)) }));
  } catch (err) {
    const shot = join(OUTPUT, "web-chat-failure.png");
    await page.screenshot({ path: shot }).catch(() => {});
    console.log(JSON.stringify({ ok: false, error: err.message, problems, timings, screenshot: shot }));
    process.exitCode = 1;
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.log(JSON.stringify({ ok: false, error: String(err && err.stack || err) }));
  process.exit(1);
});
