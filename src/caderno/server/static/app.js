// caderno inspector: reads and edits one resource through the REST API (/v1/…).
//
// Every piece of stored text is hostile input (a model wrote it, or someone
// pasted it). This script therefore builds the page with createElement and
// text nodes only — never innerHTML — and the server's Content-Security-
// Policy refuses inline script as a second wall.
//
// Stored ids are hostile input too. Every API URL is built by `path()`, one
// checked and encoded segment per id; an id that cannot travel as one segment
// (see `segment()`) is refused with a message, never fetched.
"use strict";

(() => {
  const KEY = "caderno.inspector.key";
  const PAGE = 200; // messages per request; "Load earlier" fetches the next page
  const TABS = [
    ["threads", "Threads"],
    ["working-memory", "Working memory"],
    ["notebook", "Notebook"],
    ["recall", "Recall"],
    ["facts", "Facts"],
    ["tasks", "Tasks"],
  ];

  const $ = (id) => document.getElementById(id);
  const state = { resources: [], query: "", renderId: 0 };

  // -- DOM helpers: text only ---------------------------------------------------

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
      else if (name === "class") el.className = value;
      else el.setAttribute(name, value === true ? "" : String(value));
    }
    add(el, children);
    return el;
  }

  function add(el, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  function when(iso) {
    if (!iso) return h("span", { class: "muted" }, "—");
    return h("time", { datetime: iso, title: iso }, String(iso).replace("T", " ").slice(0, 19));
  }

  function json(value) {
    return JSON.stringify(value, null, 2);
  }

  function table(label, headers, rows) {
    return h(
      "table",
      { "aria-label": label },
      h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((c) => h("td", {}, c))))),
    );
  }

  function empty(text) {
    return h("p", { class: "muted empty" }, text);
  }

  function setStatus(text) {
    $("status").textContent = text || "";
  }

  function showError(err) {
    const box = $("error");
    if (!err) {
      box.hidden = true;
      box.textContent = "";
      return;
    }
    box.textContent = err instanceof ApiError ? `${err.title}: ${err.detail}` : String(err.message || err);
    box.hidden = false;
  }

  // -- the API --------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, title, detail, body) {
      super(`${title}: ${detail}`);
      this.status = status;
      this.title = title;
      this.detail = detail;
      this.body = body;
    }
  }

  const enc = encodeURIComponent;

  // Ids are names, never paths: the same rule as caderno's check_name, so the
  // page never refuses an id the server takes. encodeURIComponent("..") is
  // still "..", and a browser resolves "." and ".." segments before it sends
  // a request: a message id "../../bob" would turn "Delete message" into
  // DELETE /v1/resources/bob. "/" and control characters are refused too. A
  // backslash, which browsers read as "/" in http URLs, is safe only because
  // enc() always sends it as %5C: never build a URL without path().
  // Invisible characters too (format characters, line separators, blank
  // letters: caderno.core.text.first_invisible), which make the id shown in a
  // confirmation look like another.
  const UNSAFE = /[/\u0000-\u001f\u007f-\u009f\p{Cf}\u034f\u115f\u1160\u17b4\u17b5\u180e\u2028\u2029\u2800\u3164\uffa0]/u;
  const RULE = "ids are names, never paths (no '/', not '.' or '..', no control or invisible characters)";
  // What the id after each collection word is, for the refusal's sentence.
  const NAMES = { resources: "resource id", threads: "thread id", messages: "message id", tasks: "task name", keys: "key id", facts: "fact category" };

  class UnsafeId extends Error {
    constructor(what, id) {
      super(
        `The inspector will not act on ${what} ${JSON.stringify(id)}: ${RULE}. ` +
          "Rename it (copy to a new id) or delete it with caderno's Python API; the README says how.",
      );
      this.id = id;
    }
  }

  // One id as one URL segment, or an UnsafeId.
  function segment(what, id) {
    const text = id === null || id === undefined ? "" : String(id);
    if (!text || text === "." || text === ".." || UNSAFE.test(text)) throw new UnsafeId(what, text);
    return enc(text);
  }

  // The one way this page builds an API URL: path(["resources", rid, "threads", tid, "messages"], {limit: 200}).
  // Words and ids alternate; every part is checked and encoded, so none can become a path.
  function path(parts, query) {
    const segments = parts.map((part, i) => segment((i % 2 && NAMES[parts[i - 1]]) || "id", part));
    const search = query ? `?${new URLSearchParams(query)}` : "";
    return `/v1/${segments.join("/")}${search}`;
  }

  // Whether an id can be acted on; when not, the page says why and nothing is sent.
  function actionable(what, id) {
    try {
      segment(what, id);
      return true;
    } catch (err) {
      showError(err);
      return false;
    }
  }

  async function api(method, url, { body, headers = {}, contentType = "application/json" } = {}) {
    const init = {
      method,
      headers: {
        Accept: "application/json, application/problem+json",
        Authorization: `Bearer ${sessionStorage.getItem(KEY) || ""}`,
        ...headers,
      },
      cache: "no-store",
    };
    if (body !== undefined) {
      init.headers["Content-Type"] = contentType;
      init.body = JSON.stringify(body);
    }
    const response = await fetch(url, init);
    let data = null;
    if (response.status !== 204) {
      const text = await response.text();
      if (text) {
        try {
          data = JSON.parse(text);
        } catch {
          data = text;
        }
      }
    }
    if (!response.ok) {
      const p = data && typeof data === "object" ? data : {};
      const err = new ApiError(response.status, p.title || response.statusText || "Error", p.detail || String(data || ""), p);
      if (response.status === 401) signOut("That key was not accepted (unknown or revoked).");
      throw err;
    }
    return { data, headers: response.headers, status: response.status };
  }

  // -- signing in -----------------------------------------------------------------

  async function signIn(event) {
    event.preventDefault();
    const input = $("key");
    const key = input.value.trim();
    if (!key) return;
    sessionStorage.setItem(KEY, key);
    input.value = "";
    showError(null);
    if (await loadResources()) render();
  }

  function signOut(message) {
    sessionStorage.removeItem(KEY);
    state.resources = [];
    $("app-view").hidden = true;
    $("who").hidden = true;
    $("sign-in-view").hidden = false;
    $("content").replaceChildren();
    $("resources").replaceChildren();
    setStatus("");
    showError(message ? new Error(message) : null);
    $("key").focus();
  }

  async function loadResources() {
    try {
      const { data } = await api("GET", path(["resources"]));
      state.resources = Array.isArray(data) ? data.map(String) : [];
    } catch (err) {
      if (err.status !== 401) showError(err);
      return false;
    }
    const key = sessionStorage.getItem(KEY) || "";
    $("key-hint").textContent = `key ${key.slice(0, 8)}…`;
    $("who").hidden = false;
    $("sign-in-view").hidden = true;
    $("app-view").hidden = false;
    return true;
  }

  // -- routing: #/r/<resource>/<tab>[/<thread>] ------------------------------------

  function route() {
    const parts = location.hash.replace(/^#\/?/, "").split("/").map((p) => {
      try {
        return decodeURIComponent(p);
      } catch {
        return p;
      }
    });
    if (parts[0] !== "r" || !parts[1]) return { rid: null };
    return { rid: parts[1], tab: parts[2] || "threads", tid: parts[3] || null };
  }

  const link = (rid, tab, tid) => `#/r/${enc(rid)}/${tab}${tid ? `/${enc(tid)}` : ""}`;

  function renderResources(current) {
    $("resources").replaceChildren(
      ...state.resources.map((rid) =>
        h("li", {}, h("a", { href: link(rid, "threads"), "aria-current": rid === current ? "page" : null }, rid)),
      ),
    );
    if (!state.resources.length) $("resources").append(h("li", { class: "muted" }, "This key sees no resource yet."));
  }

  async function render() {
    if (!sessionStorage.getItem(KEY)) return signOut();
    const id = ++state.renderId;
    const { rid, tab, tid } = route();
    const content = $("content");
    showError(null);
    renderResources(rid);
    if (!rid) {
      content.replaceChildren(
        h("h2", {}, "Choose a resource"),
        empty(state.resources.length ? "Pick one on the left to see its threads and memory." : "Nothing to show."),
      );
      return;
    }
    const tabs = h(
      "nav",
      { "aria-label": "Sections", class: "tabs" },
      TABS.map(([slug, label]) =>
        h("a", { href: link(rid, slug), "aria-current": slug === tab ? "page" : null }, label),
      ),
    );
    const body = h("section", { "aria-busy": "true" }, empty("Loading…"));
    content.replaceChildren(h("h2", { class: "resource" }, h("span", { class: "muted" }, "resource "), rid), tabs, body);
    try {
      const nodes = await (tid && tab === "threads" ? threadView(rid, tid) : (VIEWS[tab] || notFoundTab)(rid));
      if (id !== state.renderId) return; // a newer navigation won
      body.replaceChildren(...[nodes].flat());
    } catch (err) {
      if (id !== state.renderId) return;
      body.replaceChildren(
        h("h3", {}, err instanceof UnsafeId ? "Refused" : err.status === 404 ? "Not found" : "Could not load this"),
        h("p", {}, err instanceof ApiError ? err.detail : String(err.message || err)),
      );
      showError(err);
    } finally {
      body.removeAttribute("aria-busy");
    }
  }

  async function notFoundTab() {
    return empty("No such section.");
  }

  // -- threads -------------------------------------------------------------------

  async function threadsView(rid) {
    const { data } = await api("GET", path(["resources", rid, "threads"]));
    if (!data.length) return empty("No threads.");
    return table(
      "Threads",
      ["Thread", "Messages", "Updated", "Created"],
      data.map((t) => [
        h("a", { href: link(rid, "threads", t.id) }, t.title || t.id),
        String(t.message_count ?? ""),
        when(t.updated_at),
        when(t.created_at),
      ]),
    );
  }

  async function threadView(rid, tid) {
    const threadPath = ["resources", rid, "threads", tid];
    const [page, summaries, threads] = await Promise.all([
      api("GET", path([...threadPath, "messages"], { limit: PAGE })),
      api("GET", path([...threadPath, "summaries"])),
      api("GET", path(["resources", rid, "threads"])),
    ]);
    const thread = (threads.data || []).find((t) => t.id === tid) || {};
    let messages = page.data;
    const list = h("div", { class: "messages", role: "list", "aria-label": "Messages" });
    const more = h("button", { type: "button", class: "secondary" }, "Load earlier messages");
    const draw = () => {
      list.replaceChildren(...messageCards(rid, messages, summaries.data));
      if (!list.childElementCount) list.append(empty("No messages."));
    };
    more.hidden = messages.length < PAGE;
    more.addEventListener("click", async () => {
      try {
        const before = Math.min(...messages.map((m) => m.position)); // positions: 1, 2, 3… in this thread
        const older = (await api("GET", path([...threadPath, "messages"], { limit: PAGE, before }))).data;
        messages = older.concat(messages);
        more.hidden = older.length < PAGE;
        draw();
      } catch (err) {
        showError(err);
      }
    });
    draw();
    const remove = h("button", { type: "button", class: "danger" }, "Delete thread");
    remove.addEventListener("click", async () => {
      if (!actionable("thread id", tid)) return;
      const ok = await confirmDialog(
        "Delete this thread?",
        `Thread “${tid}” of resource “${rid}” and all its messages will be deleted. This cannot be undone.`,
        "Delete thread",
      );
      if (!ok) return;
      try {
        await api("DELETE", path(threadPath));
        setStatus(`Deleted thread ${tid}.`);
        location.hash = link(rid, "threads");
      } catch (err) {
        showError(err);
      }
    });
    return [
      h("p", {}, h("a", { href: link(rid, "threads") }, "← All threads")),
      h("div", { class: "row between" }, h("h3", {}, h("span", { class: "muted" }, "thread "), thread.title || tid, thread.title ? h("span", { class: "muted" }, ` (${tid})`) : ""), remove),
      more,
      list,
    ];
  }

  // Tool results are folded under the assistant message that made the call;
  // each summary is shown where the span it covers begins (positions in the
  // thread; a summary has none of its own, and one that names no span goes last).
  function messageCards(rid, messages, summaries) {
    const calls = new Set();
    for (const m of messages) for (const c of m.tool_calls || []) calls.add(c.id);
    const results = new Map();
    for (const m of messages) if (m.role === "tool" && calls.has(m.tool_call_id)) results.set(m.tool_call_id, m);
    const pending = (summaries || [])
      .map((s) => ({ ...s, from: (spanOf(s.message) || [Infinity])[0] }))
      .sort((a, b) => a.from - b.from);
    const cards = [];
    for (const m of messages) {
      while (pending.length && pending[0].from <= m.position) cards.push(summaryCard(pending.shift()));
      if (m.role === "tool" && results.has(m.tool_call_id)) continue;
      cards.push(messageCard(rid, m, results));
    }
    for (const s of pending) cards.push(summaryCard(s));
    return cards;
  }

  // A summary's [first, last] positions, or null when it names none.
  function spanOf(message) {
    const span = (message.metadata || {}).span;
    return Array.isArray(span) && span.length === 2 && span.every(Number.isInteger) ? span : null;
  }

  function summaryCard({ message, merged }) {
    const meta = message.metadata || {};
    const span = spanOf(message);
    return h(
      "article",
      { class: `msg summary${merged ? " merged" : ""}`, role: "listitem", "aria-label": "Summary" },
      h(
        "header",
        {},
        h("span", { class: "badge summary" }, "summary"),
        span ? ` of messages #${span[0]}–#${span[1]}` : "",
        meta.count ? ` (${meta.count} messages)` : "",
        merged ? h("span", { class: "badge" }, "merged into a later summary") : "",
        " ",
        when(message.created_at),
      ),
      h("div", { class: "text" }, message.content),
    );
  }

  function messageCard(rid, m, results) {
    const text = h("div", { class: "text" }, m.content || "");
    if (!m.content) text.append(h("span", { class: "muted" }, "(no text)"));
    const card = h(
      "article",
      { class: `msg role-${m.role}`, role: "listitem", "aria-label": `${m.role} message #${m.position}`, "data-id": m.id },
      h(
        "header",
        {},
        h("span", { class: `badge role-${m.role}` }, m.role),
        m.name ? h("span", { class: "muted" }, ` ${m.name}`) : "",
        h("span", { class: "muted" }, ` #${m.position} · `),
        when(m.created_at),
        typeof m.importance === "number" ? h("span", { class: "muted" }, ` · importance ${m.importance.toFixed(2)}`) : "",
        h("span", { class: "spacer" }),
        actions(rid, m, text),
      ),
      text,
    );
    if (m.tool_calls && m.tool_calls.length) {
      const names = m.tool_calls.map((c) => c.name).join(", ");
      card.append(
        h(
          "details",
          { class: "tools" },
          h("summary", {}, `${m.tool_calls.length} tool call${m.tool_calls.length > 1 ? "s" : ""}: ${names}`),
          m.tool_calls.map((c) => {
            const result = results.get(c.id);
            return h(
              "div",
              { class: "call", "aria-label": `Tool call ${c.name}` },
              h("div", {}, h("code", {}, c.name), h("span", { class: "muted" }, ` call ${c.id}`)),
              h("pre", { class: "args" }, typeof c.arguments === "string" ? c.arguments : json(c.arguments)),
              result
                ? h(
                    "div",
                    { class: "result", "data-id": result.id },
                    h("div", { class: "row" }, h("strong", {}, "Result"), h("span", { class: "muted" }, ` #${result.position}`), h("span", { class: "spacer" }), actions(rid, result, null)),
                    h("pre", {}, result.content),
                  )
                : h("p", { class: "muted" }, "No result stored."),
            );
          }),
        ),
      );
    }
    return card;
  }

  function actions(rid, m, textEl) {
    const edit = h("button", { type: "button", class: "small", "aria-label": `Edit message #${m.position}` }, "Edit");
    const del = h("button", { type: "button", class: "small danger", "aria-label": `Delete message #${m.position}` }, "Delete");
    edit.addEventListener("click", () => {
      if (!actionable("message id", m.id)) return;
      const area = h("textarea", { id: `edit-${m.id}`, rows: 4 });
      area.value = m.content || "";
      const reason = h("input", { id: `reason-${m.id}`, type: "text", placeholder: "why (kept in the message log)" });
      const form = h(
        "form",
        { class: "edit", "aria-label": `Edit message #${m.position}` },
        h("p", { class: "muted" }, `Editing message id “${m.id}”; the old text goes to the message log.`),
        h("label", { for: `edit-${m.id}` }, "New content"),
        area,
        h("label", { for: `reason-${m.id}` }, "Reason (optional)"),
        reason,
        h("div", { class: "row" }, h("button", { type: "submit" }, "Save"), h("button", { type: "button", class: "secondary", onclick: () => render() }, "Cancel")),
      );
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        const body = { content: area.value };
        if (reason.value.trim()) body.reason = reason.value.trim();
        try {
          await api("PATCH", path(["resources", rid, "messages", m.id]), { body });
          setStatus(`Saved message #${m.position}.`);
          render();
        } catch (err) {
          showError(err);
        }
      });
      const anchor = textEl || edit.closest(".result").querySelector("pre");
      anchor.replaceWith(form);
      area.focus();
    });
    del.addEventListener("click", async () => {
      if (!actionable("message id", m.id)) return;
      const ok = await confirmDialog(
        "Delete this message?",
        `The ${m.role} message #${m.position} (id “${m.id}”) of resource “${rid}” will be deleted. The log keeps who and when, not the text.`,
        "Delete message",
      );
      if (!ok) return;
      try {
        await api("DELETE", path(["resources", rid, "messages", m.id]));
        setStatus(`Deleted message #${m.position}.`);
        render();
      } catch (err) {
        showError(err);
      }
    });
    return h("span", { class: "actions" }, edit, " ", del);
  }

  function confirmDialog(title, text, okLabel) {
    const dialog = $("confirm");
    $("confirm-title").textContent = title;
    $("confirm-text").textContent = text;
    $("confirm-ok").textContent = okLabel;
    dialog.returnValue = "";
    return new Promise((resolve) => {
      dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
      dialog.showModal();
    });
  }

  // -- working memory ----------------------------------------------------------------

  // RFC 7396: objects merge, everything else replaces, null deletes.
  function mergePatch(target, patch) {
    if (patch === null || typeof patch !== "object" || Array.isArray(patch)) return patch;
    const out = target && typeof target === "object" && !Array.isArray(target) ? { ...target } : {};
    for (const [k, v] of Object.entries(patch)) {
      if (v === null) delete out[k];
      else out[k] = mergePatch(out[k], v);
    }
    return out;
  }

  function leaves(value, prefix, out) {
    if (value && typeof value === "object" && !Array.isArray(value) && Object.keys(value).length) {
      for (const [k, v] of Object.entries(value)) leaves(v, prefix ? `${prefix}.${k}` : k, out);
    } else if (prefix) {
      out.set(prefix, JSON.stringify(value));
    }
    return out;
  }

  function diffLines(before, after) {
    const a = leaves(before, "", new Map());
    const b = leaves(after, "", new Map());
    const lines = [];
    for (const path of [...new Set([...a.keys(), ...b.keys()])].sort()) {
      if (a.get(path) === b.get(path)) continue;
      if (a.has(path)) lines.push(["del", `- ${path}: ${a.get(path)}`]);
      if (b.has(path)) lines.push(["add", `+ ${path}: ${b.get(path)}`]);
    }
    return lines;
  }

  async function workingMemoryView(rid) {
    let current = { data: {}, version: 0, updated_at: null };
    let etag = null;
    try {
      const got = await api("GET", path(["resources", rid, "working-memory"]));
      current = got.data || current;
      etag = got.headers.get("ETag");
    } catch (err) {
      // Never set yet: an empty object. A resource this key may not see is a real 404.
      if (!(err.status === 404 && state.resources.includes(rid))) throw err;
    }
    const log = (await api("GET", path(["resources", rid, "working-memory", "log"]))).data || [];
    const version = current.version || 0;
    const area = h("textarea", { id: "wm-patch", rows: 6, spellcheck: "false" });
    area.value = "{\n  \n}";
    const form = h(
      "form",
      { class: "card", "aria-label": "Patch working memory" },
      h("label", { for: "wm-patch" }, "Merge patch (JSON; null deletes a key)"),
      area,
      h("div", { class: "row" }, h("button", { type: "submit" }, "Apply patch"), h("span", { class: "muted" }, ` against version ${version}`)),
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      let patch;
      try {
        patch = JSON.parse(area.value);
      } catch (err) {
        showError(new Error(`The patch is not JSON: ${err.message}`));
        return;
      }
      const headers = { "If-Match": etag || `"${version}"` };
      try {
        const { data } = await api("PATCH", path(["resources", rid, "working-memory"]), { body: patch, headers, contentType: "application/merge-patch+json" });
        setStatus(`Working memory saved: version ${data && data.version !== undefined ? data.version : "?"}.`);
        render();
      } catch (err) {
        if (err.status === 412) {
          showError(new Error(`Working memory changed since you loaded version ${version}; reload the tab, check it, and apply again.`));
        } else {
          showError(err);
        }
      }
    });
    // Replay the log from the empty object to show each patch as a before/after diff.
    const complete = log.length && log[0].version === 1;
    let state_ = {};
    const rows = log.map((entry) => {
      const after = mergePatch(state_, entry.patch);
      const lines = complete ? diffLines(state_, after) : [["", json(entry.patch)]];
      state_ = after;
      return [
        `v${entry.version}`,
        entry.source || "",
        when(entry.created_at),
        h("pre", { class: "diff", "aria-label": `Change in version ${entry.version}` }, lines.map(([cls, text]) => h("span", { class: cls }, text, "\n"))),
      ];
    });
    return [
      h("div", { class: "row between" }, h("h3", {}, `Working memory · version ${version}`), h("span", { class: "muted" }, "updated ", when(current.updated_at))),
      h("pre", { class: "json", id: "wm-json", "aria-label": "Working memory JSON" }, json(current.data ?? {})),
      form,
      h("h3", {}, "Audit log"),
      rows.length ? table("Working memory log", ["Version", "Who", "When", "Change"], rows.reverse()) : empty("No changes yet."),
    ];
  }

  // -- notebook ------------------------------------------------------------------------

  async function notebookView(rid) {
    // The snapshot of the latest conversation when it took one, else what a new conversation would take.
    const { data: threads } = await api("GET", path(["resources", rid, "threads"]));
    const latest = threads.length ? threads[0].id : null;
    let { data } = await api("GET", path(["resources", rid, "notebook"]) + (latest ? `?thread_id=${encodeURIComponent(latest)}` : ""));
    const froze = latest && ((data.snapshot || {}).memory || (data.snapshot || {}).user);
    if (latest && !froze) ({ data } = await api("GET", path(["resources", rid, "notebook"])));
    const snapshot = data.snapshot || {};
    const entries = data.entries || {};
    const heading = froze ? `Frozen snapshot (conversation ${latest})` : "Snapshot for a new conversation";
    const column = (target, label) => {
      const frozen = snapshot[target];
      const live = entries[target] || [];
      return h(
        "section",
        { class: "card", "aria-label": `Notebook ${label}` },
        h("h4", {}, label),
        h("div", { class: "cols" },
          h("div", {}, h("h5", {}, heading), frozen ? h("pre", { class: "snapshot" }, frozen) : empty("(empty)")),
          h("div", {}, h("h5", {}, "Live entries"), live.length
            ? h("ol", { class: "entries" }, live.map((e) => {
                const text = typeof e === "string" ? e : json(e);
                return h("li", {}, text, frozen && frozen.includes(text) ? "" : h("span", { class: "badge new" }, "new since snapshot"));
              }))
            : empty("(none)")),
        ),
      );
    };
    return [
      h("p", { class: "muted" }, "Each conversation keeps the snapshot it took at its first turn (shown: the latest conversation's, when it has one); a new conversation takes the entries as they are. Live entries are the stored ones."),
      column("memory", "Memory (MEMORY.md)"),
      column("user", "User (USER.md)"),
    ];
  }

  // -- recall --------------------------------------------------------------------------

  async function recallView(rid) {
    const input = h("input", { id: "recall-query", type: "search", required: true, placeholder: "what to look for" });
    input.value = state.query;
    const out = h("div", { "aria-live": "polite" });
    const form = h(
      "form",
      { class: "row", role: "search", "aria-label": "Recall" },
      h("label", { for: "recall-query" }, "Search memory"),
      input,
      h("button", { type: "submit" }, "Search"),
    );
    const search = async () => {
      state.query = input.value;
      out.replaceChildren(empty("Searching…"));
      try {
        const { data } = await api("POST", path(["resources", rid, "recall"]), { body: { query: input.value } });
        out.replaceChildren(data.length ? h("ol", { class: "hits", "aria-label": "Recall results" }, ranked(data).map((hit) => hitItem(rid, hit))) : empty("Nothing found."));
      } catch (err) {
        out.replaceChildren();
        showError(err);
      }
    };
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      search();
    });
    if (state.query) search();
    return [form, out];
  }

  // The API answers in conversation order (what a prompt wants); a person
  // reading hits wants the best first. Rank as recall's own `top` does: fused
  // score, higher first, ties (the recent and salient legs weigh 0) newest
  // first. The API's index breaks what the clock cannot.
  function ranked(hits) {
    const time = (hit) => Date.parse((hit.message || {}).created_at || "") || 0;
    return hits
      .map((hit, i) => ({ hit, i }))
      .sort((a, b) => Number(b.hit.score) - Number(a.hit.score) || time(b.hit) - time(a.hit) || b.i - a.i)
      .map(({ hit }) => hit);
  }

  // Scores are small (reciprocal-rank fusion gives 1/(k + rank); a text
  // rank can be 1e-6): three significant digits say which is higher where a
  // fixed number of decimals printed 0.000 for all of them.
  function formatScore(value) {
    const v = Number(value);
    if (!Number.isFinite(v)) return "?";
    if (v === 0) return "0";
    return Math.abs(v) >= 0.001 && Math.abs(v) < 1000 ? String(Number(v.toPrecision(3))) : v.toExponential(2);
  }

  function hitItem(rid, hit) {
    const m = hit.message || {};
    const legs = [...(hit.reasons || [])].sort();
    const scores = Object.entries(hit.scores || {}).map(([leg, v]) => `${leg} ${formatScore(v)}`);
    return h(
      "li",
      { class: "hit" },
      h(
        "div",
        { class: "row" },
        h("span", { class: "score", title: "fused score: higher ranks first (0: found only by the recent or salient leg)" }, `score ${formatScore(hit.score)}`),
        h("span", { class: "legs", "aria-label": "found by" }, legs.map((leg) => h("span", { class: `badge leg leg-${leg}` }, leg))),
        scores.length ? h("span", { class: "muted" }, scores.join(" · ")) : "",
      ),
      h("div", {}, h("span", { class: `badge role-${m.role}` }, m.role), " ", h("span", { class: "text" }, m.content || "")),
      h("div", { class: "muted" }, h("a", { href: link(rid, "threads", hit.thread_id) }, `thread ${hit.thread_id}`), ` · #${m.position}`),
    );
  }

  // -- facts and tasks -------------------------------------------------------------

  async function factsView(rid) {
    const { data } = await api("GET", path(["resources", rid, "facts"]));
    if (!data.length) return empty("No facts.");
    return table("Facts", ["Category", "Key", "Value", "Source", "Updated"], data.map((f) => [f.category, f.key, f.value, f.source, when(f.updated_at)]));
  }

  async function tasksView(rid) {
    const { data } = await api("GET", path(["resources", rid, "tasks"]));
    if (!data.length) return empty("No scheduled tasks.");
    return table(
      "Scheduled tasks",
      ["Name", "Schedule", "Prompt", "Next run", "Last run", "State"],
      data.map((t) => [
        t.name,
        h("span", {}, t.original_schedule || "", t.cron_expr ? h("code", { class: "muted" }, ` ${t.cron_expr}`) : "", t.timezone ? h("span", { class: "muted" }, ` (${t.timezone})`) : ""),
        t.prompt,
        when(t.next_run_at),
        when(t.last_run_at),
        [t.is_paused ? "paused" : "active", t.is_oneshot ? " · once" : "", t.is_trusted ? " · trusted" : ""].join(""),
      ]),
    );
  }

  const VIEWS = {
    threads: threadsView,
    "working-memory": workingMemoryView,
    notebook: notebookView,
    recall: recallView,
    facts: factsView,
    tasks: tasksView,
  };

  // -- start ---------------------------------------------------------------------------

  document.addEventListener("DOMContentLoaded", async () => {
    $("sign-in").addEventListener("submit", signIn);
    $("sign-out").addEventListener("click", () => signOut());
    window.addEventListener("hashchange", () => {
      if (sessionStorage.getItem(KEY)) render();
    });
    if (sessionStorage.getItem(KEY) && (await loadResources())) render();
    else if (!sessionStorage.getItem(KEY)) signOut();
  });
})();
