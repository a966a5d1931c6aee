// The console's only script (issue 30). It fills the server-rendered page shells with the client API's
// JSON. Everything it shows may come from an attacker (tool arguments, model text, provider errors), so
// every value becomes DOM text (textContent, createTextNode), never HTML (no HTML-parsing sink, no code
// from strings), and the only links it makes point into /console. Live updates: the execution's SSE event
// stream (read with fetch, so every event type arrives and the reader stops at a final one); the inbox
// re-reads its list.
"use strict";

(function () {
  if (document.getElementById("oidc-done")) {
    window.location.replace("/console/inbox");
    return;
  }
  const signIn = document.getElementById("sign-in");
  if (signIn) {
    // Sent as JSON: the token stays out of any URL, and the OE's body guard reads bodies as JSON.
    signIn.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const form = new FormData(signIn);
      const response = await fetch("/console/sign-in", {
        method: "POST",
        credentials: "same-origin",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify({ token: form.get("token"), login_csrf: form.get("login_csrf") }),
      });
      let answer = {};
      try {
        answer = await response.json();
      } catch (err) {
        answer = { detail: `HTTP ${response.status}` };
      }
      if (response.ok) {
        window.location.assign(answer.next === "/console/inbox" ? answer.next : "/console/inbox");
        return;
      }
      let alert = document.getElementById("sign-in-error");
      if (!alert) {
        alert = document.createElement("p");
        alert.id = "sign-in-error";
        alert.className = "error";
        alert.setAttribute("role", "alert");
        signIn.before(alert);
      }
      alert.textContent = String(answer.detail || `HTTP ${response.status}`);
      if (response.status === 403) window.setTimeout(() => window.location.reload(), 1500);
    });
    return;
  }
  const signOut = document.getElementById("sign-out");
  const app = document.getElementById("app");
  if (!app) return;
  const csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  const page = app.dataset.page;
  const executionId = app.dataset.execution || "";
  const FINAL = new Set(["completed", "failed", "cancelled"]);
  const INBOX_POLL_MS = 1500;
  let me = { username: "", namespaces: [], agents: [] };

  // -- DOM helpers: text only ------------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "text") node.textContent = String(value);
      else if (key === "href") node.setAttribute("href", consoleHref(value));
      else if (key === "dataset") Object.assign(node.dataset, value);
      else if (key === "on") for (const [ev, fn] of Object.entries(value)) node.addEventListener(ev, fn);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function consoleHref(value) {
    // Links the script makes go into the console only: never a value's own URL (javascript:, data:).
    const href = String(value);
    return href.startsWith("/console/") ? href : "/console/inbox";
  }

  function pretty(value) {
    if (value === undefined) return "";
    try {
      return JSON.stringify(value, null, 2);
    } catch (err) {
      return String(value);
    }
  }

  function pre(value, cls) {
    return el("pre", { class: cls || "value", text: typeof value === "string" ? value : pretty(value) });
  }

  function when(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    return isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
  }

  function who(identity) {
    return identity && identity.username ? identity.username : "";
  }

  function usageText(usage, cost, model) {
    // A model step's tokens and cost as the OE counted them (the audit record's usage, model, cost).
    if (!usage || typeof usage !== "object") return "";
    const parts = [`in ${usage.input_tokens ?? 0}`, `out ${usage.output_tokens ?? 0}`];
    if (usage.cached_tokens) parts.push(`cached ${usage.cached_tokens}`);
    if (cost !== undefined && cost !== null) parts.push(`cost ${cost}`);
    if (model) parts.push(String(model));
    return parts.join(" · ");
  }

  function field(dl, label, value) {
    if (value === undefined || value === null || value === "") return;
    dl.append(el("dt", { text: label }), el("dd", {}, value instanceof Node ? value : String(value)));
  }

  function setStatus(text, isError) {
    let node = document.getElementById("status");
    if (!node) {
      node = el("p", { id: "status", class: "hint" });
      app.prepend(node);
    }
    node.textContent = text || "";
    node.className = isError ? "error" : "hint";
    node.setAttribute("role", isError ? "alert" : "status");
  }

  function clearMain(title) {
    app.replaceChildren(el("h1", { text: title }), el("p", { id: "status", class: "hint", role: "status" }));
  }

  // -- the API ---------------------------------------------------------------------------------------

  async function call(method, path, body) {
    const headers = { accept: "application/json" };
    const init = { method, headers, credentials: "same-origin", cache: "no-store" };
    if (method !== "GET") {
      headers["x-csrf-token"] = csrf;
      headers["content-type"] = "application/json";
      init.body = JSON.stringify(body === undefined ? {} : body);
    }
    const response = await fetch(path, init);
    if (response.status === 401) {
      window.location.assign("/console/sign-in");
      throw new Error("signed out");
    }
    let data = null;
    try {
      data = await response.json();
    } catch (err) {
      data = null;
    }
    return { status: response.status, ok: response.ok, data };
  }

  if (signOut) {
    signOut.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      await fetch("/console/sign-out", { method: "POST", credentials: "same-origin", headers: { "x-csrf-token": csrf } });
      window.location.assign("/console/sign-in");
    });
  }

  const get = (path) => call("GET", path);
  const post = (path, body) => call("POST", path, body);

  function problemText(answer) {
    const data = answer.data || {};
    if (Array.isArray(data.detail)) return data.detail.map((p) => `${p.field}: ${p.problem}`).join("; ");
    return data.message || data.detail || data.error || `HTTP ${answer.status}`;
  }

  function rightsIn(namespace) {
    return me.namespaces.find((ns) => ns.name === namespace) || {};
  }

  function query(params) {
    const q = new URLSearchParams();
    for (const [key, value] of Object.entries(params)) if (value) q.set(key, value);
    const s = q.toString();
    return s ? `?${s}` : "";
  }

  function executionHref(id) {
    return `/console/executions/${encodeURIComponent(id)}`;
  }

  // -- JSON Schema check for edited arguments (the subset tool schemas use) ---------------------------

  function typeOf(value) {
    if (value === null) return "null";
    if (Array.isArray(value)) return "array";
    if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
    return typeof value;
  }

  function resolve(schema, root) {
    if (schema && typeof schema.$ref === "string" && schema.$ref.startsWith("#/")) {
      let node = root;
      for (const part of schema.$ref.slice(2).split("/")) node = node ? node[part] : undefined;
      return node || {};
    }
    return schema || {};
  }

  function validate(value, schema, root, path, out) {
    schema = resolve(schema, root);
    const at = path || "(arguments)";
    const alternatives = schema.anyOf || schema.oneOf;
    if (Array.isArray(alternatives)) {
      if (!alternatives.some((alt) => validate(value, alt, root, path, []).length === 0)) {
        out.push(`${at}: does not match any allowed form`);
      }
      return out;
    }
    if (Array.isArray(schema.allOf)) for (const part of schema.allOf) validate(value, part, root, path, out);
    const actual = typeOf(value);
    if (schema.type !== undefined) {
      const types = Array.isArray(schema.type) ? schema.type : [schema.type];
      const fits = types.some((t) => t === actual || (t === "number" && actual === "integer"));
      if (!fits) {
        out.push(`${at}: must be ${types.join(" or ")}, got ${actual}`);
        return out;
      }
    }
    if (Array.isArray(schema.enum) && !schema.enum.some((v) => JSON.stringify(v) === JSON.stringify(value))) {
      out.push(`${at}: must be one of ${schema.enum.map((v) => JSON.stringify(v)).join(", ")}`);
    }
    if ("const" in schema && JSON.stringify(schema.const) !== JSON.stringify(value)) {
      out.push(`${at}: must be ${JSON.stringify(schema.const)}`);
    }
    if (actual === "integer" || actual === "number") {
      if (schema.minimum !== undefined && value < schema.minimum) out.push(`${at}: must be at least ${schema.minimum}`);
      if (schema.maximum !== undefined && value > schema.maximum) out.push(`${at}: must be at most ${schema.maximum}`);
      if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) {
        out.push(`${at}: must be more than ${schema.exclusiveMinimum}`);
      }
      if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) {
        out.push(`${at}: must be less than ${schema.exclusiveMaximum}`);
      }
    }
    if (actual === "string") {
      if (schema.minLength !== undefined && value.length < schema.minLength) {
        out.push(`${at}: at least ${schema.minLength} characters`);
      }
      if (schema.maxLength !== undefined && value.length > schema.maxLength) {
        out.push(`${at}: at most ${schema.maxLength} characters`);
      }
      if (typeof schema.pattern === "string") {
        try {
          if (!new RegExp(schema.pattern, "u").test(value)) out.push(`${at}: must match ${schema.pattern}`);
        } catch (err) {
          /* a pattern this browser cannot compile is left to the tool's own check */
        }
      }
    }
    if (actual === "array" && schema.items) {
      value.forEach((item, i) => validate(item, schema.items, root, `${at}[${i}]`, out));
    }
    if (actual === "object") {
      const props = schema.properties || {};
      for (const name of schema.required || []) {
        if (!(name in value)) out.push(`${path ? path + "." : ""}${name}: required`);
      }
      for (const [name, item] of Object.entries(value)) {
        const where = path ? `${path}.${name}` : name;
        if (name in props) validate(item, props[name], root, where, out);
        else if (schema.additionalProperties === false) out.push(`${where}: not an argument of this tool`);
        else if (typeof schema.additionalProperties === "object") {
          validate(item, schema.additionalProperties, root, where, out);
        }
      }
    }
    return out;
  }

  const toolCache = new Map();
  async function toolSchema(agent, tool) {
    if (!toolCache.has(agent)) {
      toolCache.set(
        agent,
        get(`/console/data/tools${query({ agent })}`).then((a) => (a.ok ? a.data.tools : []))
      );
    }
    const tools = await toolCache.get(agent);
    const found = tools.find((t) => t.name === tool);
    return found ? found.input_schema || {} : null;
  }

  // -- a held call and its decision ------------------------------------------------------------------

  function heldCard(item, { onDecided, heading } = {}) {
    const asks = item.asks || {};
    const card = el("article", {
      class: "card held",
      dataset: { execution: item.execution_id, step: String(asks.step ?? "") },
      "aria-label": `Held call ${asks.tool || ""} of ${item.agent}`,
    });
    card.append(el(heading || "h2", {}, asks.tool || asks.kind || "suspended", el("span", { class: "muted", text: ` · ${item.agent}` })));
    const dl = el("dl");
    field(dl, "Execution", el("a", { href: executionHref(item.execution_id), text: item.execution_id }));
    field(dl, "Step", asks.step);
    field(dl, "Kind", asks.kind === "approval_required" ? "approval required" : asks.kind);
    field(dl, "Reason", asks.reason);
    field(dl, "User", item.user_id);
    field(dl, "Waiting since", when(item.waiting_since));
    card.append(dl);
    if ("args" in asks) card.append(el("h3", { text: "Arguments" }), pre(asks.args, "value args"));
    if (asks.payload !== undefined && asks.payload !== null) card.append(el("h3", { text: "Payload" }), pre(asks.payload));
    card.append(ledTo(item));
    const child = item.asks && item.asks.kind === "child" && item.asks.payload;
    if (child) {
      // Held on its child (issue 38): decided in the child's own review, so a link there, no buttons.
      card.append(el("p", { class: "child-hold" }, "Decide it in the child's review: ", el("a", { href: `/console/executions/${encodeURIComponent(child.child_execution_id)}`, text: child.child_execution_id }), ` (${child.child_agent})`));
    } else if (rightsIn(item.project_id).approve) card.append(decisionForm(item, onDecided));
    else card.append(el("p", { class: "hint", text: "You may read this call but not decide it (no approve right here)." }));
    return card;
  }

  function ledTo(item) {
    const details = el("details", { class: "led-to" }, el("summary", { text: "What led to it" }));
    let loaded = false;
    details.addEventListener("toggle", async () => {
      if (!details.open || loaded) return;
      loaded = true;
      const id = encodeURIComponent(item.execution_id);
      const [view, audit] = await Promise.all([get(`/console/api/execution/${id}`), get(`/console/api/execution/${id}/audit`)]);
      if (view.ok && view.data.input !== undefined) details.append(el("h4", { text: "Input" }), pre(view.data.input));
      const steps = el("ol", { class: "steps" });
      for (const record of (audit.ok ? audit.data.records : []).filter((r) => r.kind === "tool" || r.kind === "llm")) {
        steps.append(el("li", { text: `step ${record.step}: ${record.tool || record.llm_id || record.kind} · ${record.decision}${record.status ? " · " + record.status : ""}` }));
      }
      details.append(el("h4", { text: "Steps before" }), steps.childElementCount ? steps : el("p", { class: "hint", text: "none" }));
    });
    return details;
  }

  function decisionForm(item, onDecided) {
    const asks = item.asks || {};
    const form = el("div", { class: "decide" });
    const alert = el("p", { class: "error", role: "alert", hidden: true });
    const resume = `/console/api/api/v1/projects/${encodeURIComponent(item.project_id)}/executions/${encodeURIComponent(item.execution_id)}/resume`;

    async function send(body, label) {
      alert.hidden = true;
      for (const button of form.querySelectorAll("button")) button.disabled = true;
      const answer = await post(resume, body);
      for (const button of form.querySelectorAll("button")) button.disabled = false;
      if (!answer.ok) {
        alert.textContent = `${label} refused: ${problemText(answer)}`;
        alert.hidden = false;
        return;
      }
      const reviews = answer.data.reviews || [];
      const last = reviews[reviews.length - 1] || {};
      if (onDecided) onDecided(item, body.decision, who(last.decided_by) || me.username);
    }

    const approve = el("button", { type: "button", class: "approve", text: "Approve" });
    approve.addEventListener("click", () => send({ decision: "approved" }, "Approval"));
    const notes = el("textarea", { rows: "2", "aria-label": "Notes for the rejection", placeholder: "Why (sent with the rejection)" });
    const reject = el("button", { type: "button", class: "reject", text: "Reject with notes" });
    reject.addEventListener("click", () => {
      const text = notes.value.trim();
      send(text ? { decision: "rejected", reviewer_notes: text } : { decision: "rejected" }, "Rejection");
    });
    form.append(el("div", { class: "row" }, approve), el("div", { class: "row" }, notes, reject));

    if (item.may_edit_args) {
      const editor = el("textarea", {
        class: "json",
        rows: "6",
        spellcheck: "false",
        "aria-label": "Edited arguments (JSON)",
      });
      editor.value = pretty(asks.args || {});
      const approveEdited = el("button", { type: "button", class: "approve-edited", text: "Approve with these arguments" });
      approveEdited.addEventListener("click", async () => {
        let parsed;
        try {
          parsed = JSON.parse(editor.value);
        } catch (err) {
          alert.textContent = `Not JSON: ${err.message}`;
          alert.hidden = false;
          return;
        }
        if (typeOf(parsed) !== "object") {
          alert.textContent = "The arguments must be a JSON object.";
          alert.hidden = false;
          return;
        }
        const schema = await toolSchema(item.agent, asks.tool);
        const problems = schema ? validate(parsed, schema, schema, "", []) : [];
        if (problems.length) {
          alert.textContent = `Not valid for ${asks.tool}: ${problems.join("; ")}`;
          alert.hidden = false;
          return; // nothing is sent
        }
        send({ decision: "approved", args: parsed }, "Approval");
      });
      form.append(el("details", { class: "edit" }, el("summary", { text: "Edit the arguments" }), editor, approveEdited));
    }
    form.append(alert);
    return form;
  }

  // -- pages -----------------------------------------------------------------------------------------

  function filterBar(fields, onChange) {
    const bar = el("form", { class: "filters", role: "search" });
    bar.addEventListener("submit", (ev) => ev.preventDefault());
    for (const f of fields) {
      const id = `filter-${f.name}`;
      let input;
      if (f.options) {
        input = el("select", { id, name: f.name }, el("option", { value: "", text: f.any }), ...f.options.map((o) => el("option", { value: o, text: o })));
      } else {
        input = el("input", { id, name: f.name, type: "search", placeholder: f.placeholder || "" });
      }
      input.value = f.value || "";
      input.addEventListener("change", () => onChange(bar));
      bar.append(el("label", { for: id, text: f.label }), input);
    }
    return bar;
  }

  function filterValues(bar) {
    const out = {};
    for (const input of bar.querySelectorAll("select, input")) out[input.name] = input.value;
    return out;
  }

  async function inboxPage() {
    clearMain("Inbox");
    const params = new URLSearchParams(window.location.search);
    const state = { namespace: params.get("namespace") || "", agent: params.get("agent") || "" };
    const list = el("section", { id: "inbox", "aria-label": "Held calls" });
    const decided = el("ul", { id: "decided", "aria-label": "Your decisions" });
    const bar = filterBar(
      [
        { name: "namespace", label: "Namespace", any: "every namespace", options: me.namespaces.map((n) => n.name), value: state.namespace },
        { name: "agent", label: "Agent", any: "every Agent", options: me.agents, value: state.agent },
      ],
      (b) => {
        Object.assign(state, filterValues(b));
        history.replaceState(null, "", `/console/inbox${query(state)}`);
        list.replaceChildren();
        refresh();
      }
    );
    app.append(bar, list, el("h2", { text: "Decided here" }), decided);

    function onDecided(item, decision, by) {
      const card = list.querySelector(`[data-execution="${CSS.escape(item.execution_id)}"]`);
      if (card) card.remove();
      decided.prepend(el("li", { class: `decision ${decision}`, text: `${decision} by ${by}: ${item.asks.tool || item.asks.kind} (step ${item.asks.step}) of ${item.agent}` }, " · ", el("a", { href: executionHref(item.execution_id), text: "timeline" })));
    }

    async function refresh() {
      const answer = await get(`/console/data/inbox${query(state)}`);
      if (!answer.ok) {
        setStatus(problemText(answer), true);
        return;
      }
      const items = answer.data.items;
      const wanted = new Set(items.map((i) => `${i.execution_id}#${i.asks.step}`));
      for (const card of [...list.children]) {
        // decided elsewhere (or here): it leaves the inbox without a reload
        if (!wanted.has(`${card.dataset.execution}#${card.dataset.step}`)) card.remove();
      }
      const shown = new Set([...list.children].map((c) => `${c.dataset.execution}#${c.dataset.step}`));
      let before = list.firstChild;
      for (const item of items) {
        const key = `${item.execution_id}#${item.asks.step}`;
        if (shown.has(key)) {
          before = list.querySelector(`[data-execution="${CSS.escape(item.execution_id)}"]`).nextSibling;
          continue;
        }
        list.insertBefore(heldCard(item, { onDecided }), before);
      }
      setStatus(items.length ? `${items.length} held call${items.length === 1 ? "" : "s"} you may decide${answer.data.next_cursor ? " (newest shown)" : ""}` : "Nothing waits for your decision.");
    }

    await refresh();
    setInterval(() => refresh().catch(() => setStatus("The OE did not answer; retrying.", true)), INBOX_POLL_MS);
  }

  const STATUSES = ["queued", "pending", "running", "suspended", "completed", "failed", "cancelled"];

  async function executionsPage() {
    clearMain("Executions");
    const params = new URLSearchParams(window.location.search);
    const state = { agent: params.get("agent") || "", status: params.get("status") || "", invoked_by: params.get("invoked_by") || "" };
    const body = el("tbody");
    const table = el(
      "div",
      { class: "scroll" },
      el("table", { id: "executions" }, el("thead", {}, el("tr", {}, ...["Created", "Agent", "Status", "Steps", "Invoked by", "Execution"].map((h) => el("th", { scope: "col", text: h })))), body)
    );
    const more = el("button", { type: "button", id: "more", text: "Load more", hidden: true });
    let cursor = null;
    const bar = filterBar(
      [
        { name: "agent", label: "Agent", any: "every Agent", options: me.agents, value: state.agent },
        { name: "status", label: "Status", any: "any status", options: STATUSES, value: state.status },
        { name: "invoked_by", label: "Invoked by", placeholder: "user name", value: state.invoked_by },
      ],
      (b) => {
        Object.assign(state, filterValues(b));
        history.replaceState(null, "", `/console/executions${query(state)}`);
        body.replaceChildren();
        cursor = null;
        load();
      }
    );
    app.append(bar, table, more);

    async function load() {
      // Who invoked is filtered by the OE across the whole list (/console/data/executions), not in the page.
      const wantedBy = state.invoked_by.trim();
      const source = wantedBy ? "/console/data/executions" : "/console/api/executions";
      const answer = await get(`${source}${query({ agent: state.agent, status: state.status, invoked_by: wantedBy, limit: "50", cursor })}`);
      if (!answer.ok) {
        setStatus(problemText(answer), true);
        return;
      }
      for (const item of answer.data.items) {
        body.append(
          el(
            "tr",
            { dataset: { execution: item.execution_id } },
            el("td", { text: when(item.created_at) }),
            el("td", { text: item.agent }),
            el("td", {}, el("span", { class: `state ${item.status}`, text: item.status })),
            el("td", { text: String(item.step_count) }),
            el("td", { text: who(item.invoked_by) }),
            el("td", {}, el("a", { href: executionHref(item.execution_id), text: item.execution_id }))
          )
        );
      }
      cursor = answer.data.next_cursor;
      more.hidden = !cursor;
      setStatus(`${body.childElementCount} shown`);
    }

    more.addEventListener("click", load);
    await load();
  }

  async function executionPage() {
    clearMain("Execution");
    const id = encodeURIComponent(executionId);
    const summary = el("section", { id: "summary", "aria-label": "Summary" });
    const held = el("section", { id: "held", "aria-label": "Held call" });
    const decisions = el("section", { id: "decisions", "aria-label": "Decisions" });
    const timeline = el("ol", { id: "timeline", "aria-label": "Timeline" });
    const links = el("p", {}, el("a", { href: `/console/executions/${id}/audit`, text: "Audit records" }));
    app.append(summary, held, decisions, links, el("h2", { text: "Timeline" }), timeline);
    let view = null;

    async function loadView() {
      const answer = await get(`/console/api/execution/${id}`);
      if (!answer.ok) {
        setStatus(problemText(answer), true);
        return null;
      }
      view = answer.data;
      renderSummary();
      return view;
    }

    function renderSummary() {
      const dl = el("dl");
      field(dl, "Execution", view.execution_id);
      field(dl, "Agent", view.agent);
      field(dl, "Status", el("span", { class: `state ${view.status}`, id: "execution-status", text: view.status }));
      field(dl, "Invoked by", who(view.invoked_by));
      field(dl, "User", view.user_id);
      field(dl, "Created", when(view.created_at));
      field(dl, "Finished", when(view.finished_at));
      field(dl, "Runs", view.runs);
      field(dl, "Cancelled by", who(view.cancelled_by));
      if (view.parent) {
        // A child an agentRef call started (issue 38): the parent execution and the step that called it.
        const p = view.parent;
        field(dl, "Parent", el("span", {}, el("a", { href: `/console/executions/${encodeURIComponent(p.execution_id)}`, id: "parent-link", text: p.execution_id }), ` step ${p.step} (${p.agent})`));
      }
      const parts = [dl];
      if (view.result !== undefined) parts.push(el("h3", { text: "Result" }), pre(view.result, "value result"));
      if (view.error) parts.push(el("h3", { text: "Error" }), pre(view.error, "value error"));
      const rights = rightsIn(view.project_id);
      if (rights.cancel && !FINAL.has(view.status)) {
        const cancel = el("button", { type: "button", id: "cancel", class: "reject", text: "Cancel the execution" });
        const alert = el("p", { class: "error", role: "alert", hidden: true });
        cancel.addEventListener("click", async () => {
          const answer = await post(`/console/api/execution/${id}/cancel`, {});
          if (!answer.ok) {
            alert.textContent = `Cancel refused: ${problemText(answer)}`;
            alert.hidden = false;
          } else loadView();
        });
        parts.push(el("div", { class: "row" }, cancel), alert);
      }
      summary.replaceChildren(...parts);
      held.replaceChildren();
      const waitsOn = view.suspension && view.suspension.kind === "child" && view.suspension.payload;
      if (view.status === "suspended" && waitsOn) {
        // Held on its child: decided in the child's own review, so a link there, not decision buttons.
        const c = view.suspension.payload;
        const asked = c.held ? ` (${c.held.tool} at step ${c.held.step})` : "";
        held.append(el("h2", { text: "Held call" }), el("p", { id: "child-hold" }, `Waits on child execution `, el("a", { href: `/console/executions/${encodeURIComponent(c.child_execution_id)}`, id: "child-link", text: c.child_execution_id }), ` of ${c.child_agent}${asked}: decide it there; this execution goes on with the child's answer.`));
      } else if (view.status === "suspended" && view.suspension) {
        const s = view.suspension;
        const item = {
          execution_id: view.execution_id,
          agent: view.agent,
          project_id: view.project_id,
          user_id: view.user_id,
          waiting_since: view.updated_at,
          asks: { kind: s.kind || "suspend", step: s.step, tool: s.tool, args: s.args, reason: s.reason, payload: s.payload },
          may_edit_args: s.kind === "approval_required",
        };
        held.append(heldCard(item, { heading: "h2", onDecided: () => loadView() }));
      }
      decisions.replaceChildren();
      if (view.reviews && view.reviews.length) {
        decisions.append(el("h2", { text: "Decisions" }));
        const ul = el("ul");
        for (const r of view.reviews) {
          ul.append(el("li", { class: `decision ${r.decision}`, text: `step ${r.step}: ${r.decision} by ${who(r.decided_by) || "(not recorded)"} at ${when(r.at)}${r.reviewer_notes ? " — " + r.reviewer_notes : ""}` }));
        }
        decisions.append(ul);
      }
    }

    const steps = new Map();
    const running = new Set(); // rows started and not finished: where Interrupt applies
    let count = 0;
    let rendered = 0; // step rows, replays included
    let replaying = true; // reading the backlog: the view was just loaded

    function stepRow(step) {
      // A step seen again after it finished is a later run's replay of it: a row of its own.
      let row = steps.get(step);
      if (!row || row.done) {
        row = { li: el("li", { class: "step", dataset: { step: String(step) } }), line: el("span", { class: "line" }), text: null, started: null };
        row.li.append(row.line);
        steps.set(step, row);
        timeline.append(row.li);
      }
      return row;
    }

    function describe(row, data, finished) {
      const d = Object.assign(row.data || {}, data);
      row.data = d;
      const kind = d.tool === "invoke_llm" || d.llm ? "model" : "tool";
      const bits = [`Step ${row.li.dataset.step}`, `${kind} ${d.tool || ""}`.trim()];
      if (d.route) bits.push(`route ${d.route}`);
      if (finished) {
        if (d.status === "suspend") bits.push("held for a human decision");
        else {
          bits.push(d.status || "finished");
          bits.push(d.from_cache ? "from the replay cache" : "executed");
        }
        if (row.duration !== undefined) bits.push(`${row.duration} ms`);
        if (d.error_category) bits.push(`error: ${d.error_category}`);
      } else bits.push("running");
      const usage = d.usage;
      if (usage && typeof usage === "object") {
        const tokens = ["input_tokens", "output_tokens", "total_tokens"].filter((k) => usage[k] !== undefined).map((k) => `${k.replace("_tokens", "")} ${usage[k]}`);
        if (tokens.length) bits.push(`tokens: ${tokens.join(", ")}`);
        if (usage.cost !== undefined && usage.cost !== null) bits.push(`cost ${usage.cost}`);
      }
      row.done = finished;
      row.line.textContent = bits.join(" · ");
      row.li.className = `step ${finished ? "done " + (d.status || "") : "running"}`;
      if (finished) {
        running.delete(row);
        interruptButton(row, false);
      } else running.add(row);
    }

    async function showUsage() {
      // Token usage is counted per model step in the audit (usage, model, cost): shown on those steps and
      // summed for the execution.
      const audit = await get(`/console/api/execution/${id}/audit`);
      if (!audit.ok) return;
      let input = 0;
      let output = 0;
      let cost = 0;
      let priced = false;
      for (const r of audit.data.records) {
        if (r.kind !== "llm" || !r.usage) continue;
        input += r.usage.input_tokens || 0;
        output += r.usage.output_tokens || 0;
        if (typeof r.cost === "number") {
          cost += r.cost;
          priced = true;
        }
        const rows = [...timeline.querySelectorAll(`li.step[data-step="${CSS.escape(String(r.step))}"]`)];
        const row = rows[rows.length - 1];
        if (row && !row.querySelector(".usage")) row.append(el("span", { class: "usage muted", text: ` · ${usageText(r.usage, r.cost, r.model)}` }));
      }
      if (input || output) {
        summary.append(el("p", { id: "usage", text: `Tokens: in ${input} · out ${output}${priced ? ` · cost ${Math.round(cost * 1e6) / 1e6}` : ""}` }));
      }
    }

    function refreshInterrupts() {
      // After a batch of events, not per event: a backlog's started-then-finished steps never get one.
      for (const row of running) interruptButton(row, row.data.route === "tool_pod");
    }

    function interruptButton(row, wanted) {
      const existing = row.li.querySelector("button.interrupt");
      if (!wanted || !view || !rightsIn(view.project_id).interrupt) {
        if (existing) existing.remove();
        return;
      }
      if (existing) return;
      const button = el("button", { type: "button", class: "interrupt", text: "Interrupt this call" });
      button.addEventListener("click", async () => {
        const answer = await post(`/console/api/execution/${id}/interrupt`, { step: Number(row.li.dataset.step) });
        button.textContent = answer.ok ? "Interrupt asked" : `Interrupt refused: ${problemText(answer)}`;
        button.disabled = true;
      });
      row.li.append(button);
    }

    function onEvent(type, event) {
      count += 1;
      const data = event.data || {};
      if (type === "step_started" && event.step !== null && event.step !== undefined) {
        const row = stepRow(event.step);
        rendered += 1;
        row.started = event.at;
        describe(row, data, false);
      } else if (type === "step_finished" && event.step !== null && event.step !== undefined) {
        const row = stepRow(event.step);
        rendered += row.started === null ? 1 : 0;
        if (row.started !== null && typeof event.at === "number") row.duration = Math.round((event.at - row.started) * 1000);
        describe(row, data, true);
      } else if (type === "llm_delta" && event.step !== null && event.step !== undefined) {
        const row = stepRow(event.step);
        if (!row.text) {
          row.text = el("pre", { class: "model-text" });
          row.li.append(row.text);
        }
        row.text.append(document.createTextNode(String(data.text ?? data.delta ?? "")));
        if (data.usage) describe(row, { usage: data.usage }, row.li.classList.contains("done"));
      } else {
        const extra = data.decision ? ` (${data.decision})` : data.error ? ` (${data.error.category || data.error.code || "error"})` : "";
        timeline.append(el("li", { class: `event ${type}`, text: `${type}${event.step ? " at step " + event.step : ""}${extra} · ${new Date(event.at * 1000).toLocaleTimeString()}` }));
      }
      if (!replaying && ["suspended", "resumed", "running", "cancelled", "completed", "failed"].includes(type)) {
        loadView();
      }
    }

    await loadView();
    if (!view) return;
    app.dataset.ready = "true";
    let after = 0;
    let ended = false;
    // The backlog in one read (a long execution's thousands of events), then the stream after it.
    const backlog = await get(`/console/data/events${query({ execution: executionId })}`);
    if (backlog.ok) {
      for (const event of backlog.data.events) {
        onEvent(event.type, event);
        after = event.seq;
        if (FINAL.has(event.type)) ended = true;
      }
      refreshInterrupts();
    }
    replaying = false;
    if (backlog.ok && backlog.data.events.length) await loadView();
    // The execution's event stream: read with fetch so every event type (llm_delta too) arrives and the
    // reader stops at a final event; a dropped connection resumes after the last event seen.
    for (let attempt = 0; !ended && attempt < 1000; attempt += 1) {
      const final = await follow(`/console/api/execution/${id}/events?after=${after}`, (type, raw, seq) => {
        after = seq || after;
        let event;
        try {
          event = JSON.parse(raw);
        } catch (err) {
          return false;
        }
        onEvent(type, event);
        refreshInterrupts();
        return FINAL.has(type);
      });
      if (final) break;
      await new Promise((r) => setTimeout(r, 1000));
    }
    await showUsage();
    app.dataset.events = String(count);
    // Milliseconds from the navigation's start until the final event was shown (the benchmark reads it).
    app.dataset.finalAt = String(Math.round(performance.now()));
    app.dataset.final = "true";
    setStatus(`${steps.size} steps (${rendered} rows with replays) · ${count} events`);
  }

  async function follow(url, onMessage) {
    let response;
    try {
      response = await fetch(url, { credentials: "same-origin", headers: { accept: "text/event-stream" }, cache: "no-store" });
    } catch (err) {
      return false;
    }
    if (response.status === 401) {
      window.location.assign("/console/sign-in");
      return true;
    }
    if (!response.ok || !response.body) {
      setStatus(`The event stream answered HTTP ${response.status}`, true);
      return response.status === 404 || response.status === 403;
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let message = { type: "message", data: [], id: 0 };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      // Split each chunk once (slicing the buffer line by line is quadratic in a long backlog).
      const lines = (buffer + value).split("\n");
      buffer = lines.pop();
      for (const raw of lines) {
        const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
        if (line === "") {
          if (message.data.length && onMessage(message.type, message.data.join("\n"), message.id)) {
            reader.cancel();
            return true;
          }
          message = { type: "message", data: [], id: 0 };
        } else if (line.startsWith("event:")) message.type = line.slice(6).trim();
        else if (line.startsWith("data:")) message.data.push(line.slice(5).replace(/^ /, ""));
        else if (line.startsWith("id:")) message.id = Number(line.slice(3).trim());
      }
    }
  }

  async function auditPage() {
    clearMain("Audit records");
    const id = encodeURIComponent(executionId);
    app.append(el("p", {}, el("a", { href: `/console/executions/${id}`, text: "Back to the timeline" })));
    const answer = await get(`/console/api/execution/${id}/audit`);
    if (!answer.ok) {
      setStatus(problemText(answer), true);
      return;
    }
    const body = el("tbody");
    const cols = ["At", "Step", "Kind", "Tool", "Decision", "Route", "Cache", "Status", "Error", "ms", "By", "Usage", "Arguments"];
    for (const r of answer.data.records) {
      const args = r.args && typeof r.args === "object" && "requested" in r.args && "executed" in r.args
        ? el("div", {}, el("h4", { text: "requested" }), pre(r.args.requested), el("h4", { text: "executed" }), pre(r.args.executed))
        : pre(r.args === undefined ? null : r.args);
      body.append(
        el(
          "tr",
          {},
          el("td", { text: new Date(r.at * 1000).toLocaleTimeString() }),
          el("td", { text: r.step ?? "" }),
          el("td", { text: r.kind }),
          el("td", { text: r.tool || r.llm_id || "" }),
          el("td", { text: r.decision + (r.reason ? ` (${r.reason})` : "") }),
          el("td", { text: r.route || "" }),
          el("td", { text: r.from_cache ? "cached" : "" }),
          el("td", { text: r.status || "" }),
          el("td", { text: r.error_category || "" }),
          el("td", { text: r.duration_ms !== null && r.duration_ms !== undefined ? Math.round(r.duration_ms) : "" }),
          el("td", { text: who(r.decided_by) }),
          el("td", { class: "usage", text: usageText(r.usage, r.cost, r.model) }),
          el("td", {}, args)
        )
      );
    }
    app.append(el("div", { class: "scroll" }, el("table", { id: "audit" }, el("thead", {}, el("tr", {}, ...cols.map((c) => el("th", { scope: "col", text: c })))), body)));
    // The audit chain (each record hashed into the next, the head signed by the OE): verified by the OE.
    const chain = el("p", { id: "chain", class: "hint", text: "Verifying the audit chain…" });
    app.append(chain);
    const verdict = await get(`/console/api/execution/${id}/audit/verify`);
    if (!verdict.ok) {
      chain.textContent = `The audit chain could not be verified: ${problemText(verdict)}`;
      chain.className = "error";
    } else if (verdict.data.intact) {
      chain.textContent = `Audit chain intact: ${verdict.data.records} records${verdict.data.head_signed ? ", head signed by the OE" : ", head not signed (no signing key)"}.`;
      chain.className = "ok";
    } else {
      chain.textContent = `Audit chain BROKEN at record ${verdict.data.broken_at}: ${verdict.data.reason}`;
      chain.className = "error";
      chain.setAttribute("role", "alert");
    }
    setStatus(`${answer.data.records.length} records`);
  }

  function agentStatus(status) {
    // The Agent's conditions and bundle digest as the operator last wrote them (carried in the registration).
    if (!status) return [el("h3", { text: "Status" }), el("p", { class: "hint", id: "no-status", text: "No status yet: the operator has not reported on this Agent (or this OE reads registrations from files)." })];
    const rows = (status.conditions || []).map((c) =>
      el("tr", { dataset: { condition: c.type } }, el("td", { text: c.type }), el("td", { class: c.status === "True" ? "ok" : "bad", text: c.status }), el("td", { text: c.reason }), el("td", { text: c.message }), el("td", { text: c.lastTransitionTime }))
    );
    return [
      el("h3", { text: "Status" }),
      el("p", {}, "Bundle digest: ", el("code", { class: "bundle-digest", text: status.bundleDigest || "none" }), status.observedGeneration ? ` · generation ${status.observedGeneration}` : ""),
      el("div", { class: "scroll" }, el("table", { class: "conditions" }, el("thead", {}, el("tr", {}, ...["Condition", "Status", "Reason", "Message", "Since"].map((h) => el("th", { text: h })))), el("tbody", {}, ...rows))),
    ];
  }

  async function agentsPage() {
    clearMain("Agents and connectors");
    const params = new URLSearchParams(window.location.search);
    const state = { namespace: params.get("namespace") || "" };
    const list = el("section", { id: "agents" });
    const bar = filterBar([{ name: "namespace", label: "Namespace", any: "every namespace", options: me.namespaces.map((n) => n.name), value: state.namespace }], (b) => {
      Object.assign(state, filterValues(b));
      history.replaceState(null, "", `/console/agents${query(state)}`);
      load();
    });
    const types = el("ul", { id: "connector-types" });
    app.append(bar, list, el("h2", { text: "Connector types this OE offers" }), types);

    async function load() {
      const answer = await get(`/console/data/agents${query(state)}`);
      if (!answer.ok) {
        setStatus(problemText(answer), true);
        return;
      }
      list.replaceChildren();
      for (const agent of answer.data.items) {
        const rows = agent.tools.map((t) =>
          el("tr", {}, el("td", {}, t.title ? el("span", { class: "title", text: `${t.title} ` }) : null, t.title ? el("code", { text: t.name }) : t.name, t.sensitive ? el("strong", { class: "sensitive", text: " sensitive" }) : null), el("td", { text: t.location }), el("td", { text: t.description }))
        );
        list.append(
          el(
            "article",
            { class: "card", dataset: { agent: agent.agent } },
            el("h2", { text: agent.agent }),
            el("h3", { text: "Policy" }),
            pre(agent.policy),
            el("h3", { text: "Tools" }),
            agent.tools_listed_by_aer ? null : el("p", { class: "hint", text: "The AER did not list its tools just now: the registration's are shown." }),
            el("div", { class: "scroll" }, el("table", {}, el("thead", {}, el("tr", {}, el("th", { text: "Tool" }), el("th", { text: "Runs" }), el("th", { text: "Description" }))), el("tbody", {}, ...rows))),
            ...agentStatus(agent.status),
            el("p", {}, el("a", { class: "consent-link", href: `/console/connectors/consent?agent=${encodeURIComponent(agent.agent)}`, text: "Give an MCP connector of this Agent your OAuth consent" }))
          )
        );
      }
      setStatus(`${answer.data.items.length} Agents`);
    }

    await load();
    const answer = await get("/console/api/connector-types");
    if (answer.ok) {
      const items = answer.data.items || answer.data.types || answer.data.connector_types || [];
      for (const t of items) types.append(el("li", { text: typeof t === "string" ? t : `${t.type || t.name}${t.description ? " — " + t.description : ""}` }));
    }
  }

  async function main() {
    const answer = await get("/console/data/me");
    if (answer.ok) me = answer.data;
    const pages = { inbox: inboxPage, executions: executionsPage, execution: executionPage, audit: auditPage, agents: agentsPage };
    const run = pages[page];
    if (run) await run();
    app.dataset.ready = "true";
  }

  main().catch((err) => setStatus(`The console failed: ${err.message}`, true));
})();
