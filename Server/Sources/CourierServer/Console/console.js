// Courier console: a page of the server's own REST API, signed in with the app secret or an API key (kept in
// sessionStorage, this tab only); a key sees what its scopes allow, and keys are the app secret's alone. No build step and no external resource; every value from the server is inserted as text.

const secretKey = "courier.console.secret";
const root = document.getElementById("view");
// Each page load draws into a container of its own: a load that finishes after the user moved on draws into a
// container no longer shown, never over the page shown now.
let currentView = root;
const status = document.getElementById("status");
let poller = null;
let page = 0;  // which page load is current: a page left while it loads starts nothing afterwards

// MARK: Helpers

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function say(text, isError = false) {
  status.textContent = text;
  status.className = isError ? "error" : "";
}

class APIError extends Error {
  constructor(status, code, detail) {
    super(`${status} ${code}: ${detail}`);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(secretKey) ?? ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  if (!response.ok) {
    let problem = {};
    try { problem = JSON.parse(text); } catch { /* not JSON */ }
    throw new APIError(response.status, problem.code ?? "http.error", problem.detail ?? text.slice(0, 200));
  }
  const type = response.headers.get("Content-Type") ?? "";
  return type.includes("json") && text ? JSON.parse(text) : text;
}

function time(milliseconds) {
  if (milliseconds === undefined || milliseconds === null) return "";
  return new Date(milliseconds).toISOString().replace("T", " ").replace("Z", " UTC");
}

function table(caption, columns, rows) {
  return el("div", { class: "table-wrap" },
    el("table", {},
      el("caption", {}, caption),
      el("thead", {}, el("tr", {}, columns.map((c) => el("th", { scope: "col", class: c.num ? "num" : null }, c.title)))),
      el("tbody", {}, rows.length === 0
        ? el("tr", {}, el("td", { colspan: columns.length }, "None."))
        : rows.map((row) => el("tr", {}, columns.map((c) => el("td", { class: c.num ? "num" : null }, c.cell(row))))))));
}

function form(id, fields, submitLabel, onSubmit) {
  const node = el("form", { id });
  for (const field of fields) {
    const inputID = `${id}-${field.name}`;
    const input = field.options
      ? el("select", { id: inputID, name: field.name }, field.options.map((o) => el("option", { value: o, selected: o === field.value }, o)))
      : el("input", { id: inputID, name: field.name, value: field.value ?? "", required: field.required, placeholder: field.placeholder });
    node.append(el("div", { class: "field" }, el("label", { for: inputID }, field.label), input));
  }
  node.append(el("button", { type: "submit" }, submitLabel));
  node.addEventListener("submit", (event) => {
    event.preventDefault();
    onSubmit(Object.fromEntries(new FormData(node).entries()));
  });
  return node;
}

function go(route, parameters = {}) {
  const query = new URLSearchParams(Object.entries(parameters).filter(([, v]) => v)).toString();
  location.hash = `#/${route}${query ? "?" + query : ""}`;
}

function link(text, route, parameters) {
  const query = new URLSearchParams(parameters).toString();
  return el("a", { href: `#/${route}?${query}` }, text);
}

// Runs `work` with a status line: "Loading…", then what it returns (a message), or nothing.
async function guarded(work) {
  try {
    say("Loading…");
    say((await work()) ?? "");
  } catch (error) {
    if (error instanceof APIError && error.status === 401) {
      sessionStorage.removeItem(secretKey);
      route();
      say("The credential was refused.", true);
      return;
    }
    if (error instanceof APIError && error.code === "auth.scopeMissing") {
      say(`This key may not do that: ${error.message}`, true);
      return;
    }
    say(error.message, true);
  }
}

// MARK: Sign in

document.getElementById("sign-in-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  sessionStorage.setItem(secretKey, document.getElementById("secret").value);
  try {
    // Any answer but 401 means the credential is good: a key without the webhooks scope gets 403.
    await api("GET", "/v1/webhooks").catch((error) => {
      if (!(error instanceof APIError && error.code === "auth.scopeMissing")) throw error;
    });
    document.getElementById("secret").value = "";
    if (!location.hash || location.hash === "#/") go("overview"); else route();
  } catch (error) {
    sessionStorage.removeItem(secretKey);
    say(error instanceof APIError && error.status === 401 ? "The credential was refused." : error.message, true);
  }
});

document.getElementById("sign-out").addEventListener("click", () => {
  sessionStorage.removeItem(secretKey);
  location.hash = "";
  route();
});

// MARK: Overview: live metrics

function parseMetrics(text) {
  const values = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const value = Number(match[3]);
    if (!Number.isFinite(value)) continue;
    values.set(match[1], (values.get(match[1]) ?? 0) + value);
    // REST answers with a 5xx status, summed apart.
    if (match[1] === "courier_http_requests_total" && /status="5\d\d"/.test(match[2] ?? "")) {
      values.set("courier_http_5xx", (values.get("courier_http_5xx") ?? 0) + value);
    }
  }
  return values;
}

function chart(samples) {
  // One sample draws a flat line; the line spans the box, whatever its width.
  const values = samples.length === 1 ? [samples[0], samples[0]] : samples;
  const width = 600, height = 160, pad = 8;
  const max = Math.max(1, ...values);
  const points = values.map((v, i) => {
    const x = (i * width) / (values.length - 1);
    const y = height - pad - (v / max) * (height - 2 * pad);
    return `${x.toFixed(1)},${y.toFixed(1)}`;
  }).join(" ");
  const now = samples.at(-1) ?? 0;
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "chart");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `Requests per second over the last ${samples.length * 2} seconds: now ${now.toFixed(1)}, peak ${max.toFixed(1)}`);
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", points);
  svg.append(line);
  return el("figure", {}, svg,
    el("figcaption", {}, `Requests per second, last ${samples.length * 2} s: now ${now.toFixed(1)}, peak ${max.toFixed(1)}`));
}

async function overview() {
  const view = currentView;
  const cards = el("div", { class: "cards", id: "metric-cards" });
  const chartBox = el("div", { id: "metric-chart" });
  view.replaceChildren(el("h2", {}, "Overview"), el("p", {}, "This node's metrics (GET /metrics), every 2 seconds."), cards, chartBox);
  const samples = [];
  let previous = null;
  const tick = async () => {
    const metrics = parseMetrics(await api("GET", "/metrics"));
    const requests = metrics.get("courier_frames_in_total") ?? 0;
    const now = Date.now();
    if (previous) samples.push(Math.max(0, (requests - previous.requests) / ((now - previous.at) / 1000)));
    if (samples.length > 60) samples.shift();
    previous = { requests, at: now };
    const shown = [
      ["Connections", "courier_connections"], ["Devices online", "courier_devices_online"],
      ["Requests received", "courier_frames_in_total"], ["Errors", "courier_errors_total"],
      ["Webhook backlog", "courier_webhook_backlog"], ["Webhooks delivered", "courier_webhook_deliveries_total"],
      ["Webhooks failed", "courier_webhook_failures_total"], ["Slow consumers cut", "courier_slow_consumer_disconnects_total"],
      ["REST requests", "courier_http_requests_total"], ["REST server errors (5xx)", "courier_http_5xx"],
    ];
    cards.replaceChildren(...shown.map(([label, name]) =>
      el("div", { class: "card" }, el("div", { class: "value" }, String(Math.round(metrics.get(name) ?? 0))), el("div", { class: "label" }, label))));
    chartBox.replaceChildren(chart(samples.length ? samples : [0]));
  };
  const mine = page;
  await tick();
  if (mine !== page) return;
  poller = setInterval(() => tick().catch((error) => say(error.message, true)), 2000);
}

// MARK: Accounts

function accountState(a) {
  return a.deactivatedAt ? `Deactivated ${time(a.deactivatedAt)}` : "Active";
}

// An action that changes something for users: asked for confirmation first, then the page is shown again.
function confirmed(question, work) {
  return () => { if (window.confirm(question)) guarded(work); };
}

async function account(parameters) {
  const view = currentView;
  const id = parameters.get("id"), prefix = parameters.get("prefix") ?? "", cursor = parameters.get("cursor");
  view.replaceChildren(el("h2", {}, "Accounts"),
    form("accounts-search", [{ name: "prefix", label: "Accounts starting with", value: prefix }], "Search",
      (v) => go("account", { prefix: v.prefix })),
    form("account-form", [{ name: "id", label: "Account", value: id, required: true }], "Look up", (v) => go("account", v)));
  if (!id) {
    const query = new URLSearchParams({ limit: "50" });
    if (prefix) query.set("prefix", prefix);
    if (cursor) query.set("cursor", cursor);
    const listed = await api("GET", `/v1/accounts?${query}`);
    view.append(table(prefix ? `Accounts starting with ${prefix}` : "Accounts", [
      { title: "Account", cell: (a) => link(a.id, "account", { id: a.id }) },
      { title: "Registered", cell: (a) => time(a.createdAt) },
      { title: "State", cell: (a) => accountState(a) },
    ], listed.accounts));
    if (listed.nextCursor) {
      view.append(el("p", {}, el("button", { type: "button", id: "next-accounts",
        onclick: () => go("account", { prefix, cursor: listed.nextCursor }) }, "Next page")));
    }
    return;
  }
  const path = `/v1/accounts/${encodeURIComponent(id)}`;
  const [found, unread, settings, listed, devices, joined, profile] = await Promise.all([
    api("GET", path), api("GET", `${path}/unread`), api("GET", `${path}/read-receipt-settings`),
    api("GET", `/v1/accounts?prefix=${encodeURIComponent(id)}&limit=1`), api("GET", `${path}/devices`),
    api("GET", `/v1/conversations?member=${encodeURIComponent(id)}&limit=100`), api("GET", `${path}/profile`),
  ]);
  const status = listed.accounts.find((a) => a.id === id) ?? {};
  const conversations = Object.entries(unread.conversations).sort((a, b) => b[1] - a[1]);
  const act = (action, done) => confirmed(`${action} ${id}?`, async () => {
    await api("POST", `${path}/${action.toLowerCase().replace(" ", "-")}`);
    await account(parameters);
    return done;
  });
  view.append(
    el("h3", {}, found.id),
    el("p", { id: "account-state" }, accountState(status),
      status.tokensRevokedAt ? ` · tokens issued before ${time(status.tokensRevokedAt)} refused` : ""),
    // The profile as text only (an avatar address is the user's own input: shown, never followed or loaded).
    el("p", { id: "account-profile" }, profile.displayName ? `Shown as “${profile.displayName}”` : "No display name",
      profile.avatar ? ` · avatar ${profile.avatar}` : "",
      profile.updatedAt ? ` · changed ${time(profile.updatedAt)}` : ""),
    form("profile-form", [{ name: "displayName", label: "Display name", value: profile.displayName ?? "",
      placeholder: "empty: none" }], "Save display name", (v) => confirmed(
      `Change ${id}'s display name to “${v.displayName}”? Their devices and their contacts' are told.`, async () => {
        await api("PUT", `${path}/profile`, { displayName: v.displayName });
        await account(parameters);
        return `${id}'s display name was changed.`;
      })()),
    el("p", { class: "actions" },
      status.deactivatedAt
        ? el("button", { type: "button", onclick: act("Reactivate", `${id} can connect again.`) }, "Reactivate")
        : el("button", { type: "button", class: "danger", onclick: act("Deactivate", `${id} is deactivated: its devices were disconnected.`) }, "Deactivate"),
      " ",
      el("button", { type: "button", class: "secondary", onclick: act("Revoke tokens", `${id}'s tokens issued until now are refused.`) }, "Revoke tokens"),
      " ",
      el("button", { type: "button", class: "danger", id: "purge-account",
        onclick: confirmed(`Erase every message ${id} has sent until now, in every conversation and on every device? This cannot be undone.`,
          () => purgeAll(path, `${id}'s messages`, () => account(parameters))) }, "Purge messages")),
    el("div", { class: "cards" },
      el("div", { class: "card" }, el("div", { class: "value" }, String(devices.devices.length)), el("div", { class: "label" }, "Devices online")),
      el("div", { class: "card" }, el("div", { class: "value" }, String(unread.total)), el("div", { class: "label" }, "Unread in all"))),
    table("Connected devices", [
      { title: "Device", cell: (d) => d.device },
      { title: "Node", cell: (d) => el("code", { class: "id" }, d.node) },
      { title: "Since", cell: (d) => time(d.connectedAt) },
      { title: "", cell: (d) => el("button", { type: "button", class: "secondary",
          onclick: confirmed(`Disconnect ${id}'s device ${d.device}? It may connect again.`, async () => {
            await api("POST", `${path}/devices/${encodeURIComponent(d.device)}/disconnect`);
            await account(parameters);
            return `${d.device} was disconnected.`;
          }) }, "Disconnect") },
    ], devices.devices),
    table("Conversations", [
      { title: "Conversation", cell: (c) => link(c.id, "conversation", { id: c.id, as: id }) },
      { title: "Members", num: true, cell: (c) => String(c.memberCount) },
      { title: "Last entry", cell: (c) => c.lastSeq ? `seq ${c.lastSeq}, ${time(c.lastTime)}` : "none" },
    ], joined.conversations),
    table("Unread by conversation", [
      { title: "Conversation", cell: ([c]) => link(c, "conversation", { id: c, as: id }) },
      { title: "Unread", num: true, cell: ([, n]) => String(n) },
    ], conversations),
    table("Read-receipt settings", [
      { title: "Scope", cell: (r) => r[0] }, { title: "Shares reads", cell: (r) => r[1] },
    ], [["Server policy", settings.policy], ["Account-wide", settings.sendReadReceipts ? "yes" : "no"],
        ...Object.entries(settings.conversations).map(([c, v]) => [c, v ? "yes" : "no"])]));
}

// Purges a page at a time (`POST …/purge`) until nothing is left before now, then shows the page again.
async function purgeAll(path, what, reload) {
  const before = Date.now();
  let purged = 0;
  for (;;) {
    const page = await api("POST", `${path}/purge`, { before, limit: 1000 });
    purged += page.purged;
    if (!page.more) break;
  }
  await reload();
  return `${purged} of ${what} erased.`;
}

// MARK: Conversations and receipts

async function conversation(parameters) {
  const view = currentView;
  const id = parameters.get("id"), as = parameters.get("as");
  const member = parameters.get("member") ?? "", kind = parameters.get("kind") ?? "", prefix = parameters.get("prefix") ?? "";
  view.replaceChildren(el("h2", {}, "Conversations"),
    form("conversations-search", [
      { name: "member", label: "With member", value: member },
      { name: "kind", label: "Kind", value: kind, options: ["", "direct", "group"] },
      { name: "prefix", label: "Id starting with", value: prefix },
    ], "Search", (v) => go("conversation", Object.fromEntries(Object.entries(v).filter(([, x]) => x)))),
    form("conversation-form", [
      { name: "id", label: "Conversation (d:A:B or g:GROUP)", value: id, required: true },
      { name: "as", label: "As member", value: as, required: true },
    ], "Show", (v) => go("conversation", v)));
  if (!id || !as) {
    const query = new URLSearchParams({ limit: "50" });
    for (const [name, value] of [["member", member], ["kind", kind], ["prefix", prefix], ["cursor", parameters.get("cursor")]]) {
      if (value) query.set(name, value);
    }
    const listed = await api("GET", `/v1/conversations?${query}`);
    view.append(table("Conversations", [
      { title: "Conversation", cell: (c) => link(c.id, "conversation",
          member || c.kind === "direct" ? { id: c.id, as: member || c.id.split(":")[1] } : { id: c.id }) },
      { title: "Kind", cell: (c) => c.kind },
      { title: "Members", num: true, cell: (c) => String(c.memberCount) },
      { title: "Last entry", cell: (c) => c.lastSeq ? `seq ${c.lastSeq}, ${time(c.lastTime)}` : "none" },
    ], listed.conversations));
    if (listed.nextCursor) {
      view.append(el("p", {}, el("button", { type: "button", id: "next-conversations",
        onclick: () => go("conversation", { member, kind, prefix, cursor: listed.nextCursor }) }, "Next page")));
    }
    return;
  }
  const conversationPath = `/v1/conversations/${encodeURIComponent(id)}`;
  view.append(el("p", { class: "actions" }, el("button", { type: "button", class: "danger", id: "purge-conversation",
    onclick: confirmed(`Erase every message of ${id} sent until now, on every device? This cannot be undone.`,
      () => purgeAll(conversationPath, `${id}'s messages`, () => conversation(parameters))) }, "Purge history")));
  const history = await api("GET", `/v1/conversations/${encodeURIComponent(id)}/messages?account=${encodeURIComponent(as)}&limit=100`);
  if (id.startsWith("d:")) {
    // A direct conversation: what each member has and has read, as the other member sees it.
    const state = await api("GET", `/v1/conversations/${encodeURIComponent(id)}/receipts`);
    const mark = (w) => w.seq ? `up to seq ${w.seq} (${time(w.time)})` : "nothing yet";
    view.append(table(`Delivered and read in ${id} (last seq ${state.lastSeq})`, [
      { title: "Member", cell: (m) => m.account },
      { title: "Delivered", cell: (m) => mark(m.delivered) },
      { title: "Read", cell: (m) => mark(m.read) },
      { title: "Also read", cell: (m) => m.readSeqs.length ? m.readSeqs.join(", ") : "" },
    ], state.members));
  }
  view.append(table(`Newest messages of ${id}${history.hasMore ? " (older ones exist)" : ""}`, [
    { title: "Seq", num: true, cell: (m) => String(m.seq) },
    { title: "Id", cell: (m) => el("code", { class: "id" }, m.id) },
    { title: "Time", cell: (m) => time(m.time) },
    { title: "Sender", cell: (m) => m.sender },
    { title: "Message", cell: (m) => m.recalled ? el("span", { class: "tombstone" }, "Recalled") :
        m.recall ? el("span", { class: "tombstone" }, `Recall notice for ${m.recall.messageId}`) :
        m.group ? el("span", { class: "tombstone" }, groupChange(m.group)) : m.body },
    { title: "Receipts", cell: (m) => m.needsReadReceipt && !m.recalled
        ? link("Read and unread", "receipts", { conversation: id, message: m.id, list: "unread" }) : "" },
  ], [...history.messages].reverse()));
}

/** A group log entry in words: the change and whom it names; for a profile change, the fields it set. */
function groupChange(change) {
  if (change.action !== "profileChanged") return `Group: ${change.action} ${change.accounts.join(", ")}`;
  const profile = change.profile || {};
  const fields = ["name", "avatar", "announcement", "ext"].filter((field) => field in profile).map((field) => {
    const value = profile[field];
    if (typeof value !== "string") return `${field} ${JSON.stringify(value)}`;
    return `${field} ${value === "" ? "cleared" : `“${value}”`}`;
  });
  return `Group profile: ${fields.join(", ")}`;
}

async function receipts(parameters) {
  const view = currentView;
  const conversationID = parameters.get("conversation"), message = parameters.get("message");
  const asked = parameters.get("list");
  const list = ["read", "unread", "delivered"].includes(asked) ? asked : "unread", cursor = parameters.get("cursor");
  view.replaceChildren(el("h2", {}, "Receipts"),
    form("receipts-form", [
      { name: "conversation", label: "Group conversation", value: conversationID, required: true },
      { name: "message", label: "Message id", value: message, required: true },
      { name: "list", label: "List", value: list, options: ["read", "unread", "delivered"] },
    ], "Show", (v) => go("receipts", v)));
  if (!conversationID || !message) return;
  const path = `/v1/conversations/${encodeURIComponent(conversationID)}/messages/${encodeURIComponent(message)}/receipts/${list}`;
  const page = await api("GET", `${path}?limit=20${cursor ? "&cursor=" + encodeURIComponent(cursor) : ""}`);
  if (page.recalled) { view.append(el("p", { class: "tombstone" }, "The message was recalled: its receipts are gone.")); return; }
  view.append(
    el("p", { id: "receipt-total" }, `${page.total} ${list === "read" ? "have read it" : list === "unread" ? "have not read it" : "have it on a device"}.`),
    table(`${list[0].toUpperCase()}${list.slice(1)} list`, [
      { title: "Account", cell: (e) => link(e.account, "account", { id: e.account }) },
      ...(list === "unread" ? [] : [{ title: "Time", cell: (e) => time(e.time) }]),
    ], page.entries));
  if (page.nextCursor) {
    view.append(el("p", {}, el("button", { type: "button", id: "next-page",
      onclick: () => go("receipts", { conversation: conversationID, message, list, cursor: page.nextCursor }) }, "Next page")));
  }
}

// MARK: Webhooks

async function webhooks(parameters) {
  const view = currentView;
  view.replaceChildren(el("h2", {}, "Webhooks"));
  const endpoints = (await api("GET", "/v1/webhooks")).endpoints;
  // A secret is shown once, when it is made: here, until the page is left.
  const secretBox = el("p", { id: "new-secret", class: "secret", hidden: true });
  // The box of the page as shown now (an action may have drawn the page again).
  const showSecret = (id, secret) => {
    const box = document.getElementById("new-secret");
    box.replaceChildren(`Secret of ${id}, shown this once: `, el("code", {}, secret));
    box.hidden = false;
  };
  view.append(form("endpoint-form", [
    { name: "url", label: "New endpoint URL (http or https)", required: true, placeholder: "https://backend.example.com/courier" },
    { name: "events", label: "Event types (comma-separated; empty for all)" },
  ], "Add endpoint", (v) => guarded(async () => {
    const events = (v.events ?? "").split(",").map((e) => e.trim()).filter(Boolean);
    const created = await api("POST", "/v1/webhooks", events.length ? { url: v.url, events } : { url: v.url });
    await webhooks(parameters);
    showSecret(created.id, created.secret);
    return `${created.id} added.`;
  })), secretBox);
  const change = (e, action, done) => async () => {
    await api("POST", `/v1/webhooks/${encodeURIComponent(e.id)}/${action}`);
    await webhooks(parameters);
    return done;
  };
  view.append(table("Endpoints", [
    { title: "Id", cell: (e) => link(e.id, "webhooks", { endpoint: e.id, state: "pending" }) },
    { title: "URL", cell: (e) => e.url },
    { title: "Events", cell: (e) => (e.events ?? ["*"]).join(", ") },
    { title: "State", cell: (e) => e.pausedAt ? `Paused ${time(e.pausedAt)}` : "Active" },
    { title: "Action", cell: (e) => el("span", { class: "actions" },
        e.pausedAt
          ? el("button", { type: "button", "aria-label": `Resume ${e.id}`, onclick: () => guarded(change(e, "resume", `${e.id} resumed.`)) }, "Resume")
          : el("button", { type: "button", class: "secondary", "aria-label": `Pause ${e.id}`,
              onclick: confirmed(`Pause ${e.id}? Its deliveries wait until it is resumed.`, change(e, "pause", `${e.id} paused.`)) }, "Pause"),
        " ",
        el("button", { type: "button", class: "secondary", "aria-label": `Rotate the secret of ${e.id}`,
          onclick: confirmed(`Give ${e.id} a new secret? The old one keeps signing for 24 hours.`, async () => {
            const rotated = await api("POST", `/v1/webhooks/${encodeURIComponent(e.id)}/secret`);
            showSecret(e.id, rotated.secret);
            return `${e.id} has a new secret; the old one signs too for 24 hours.`;
          }) }, "Rotate secret"),
        " ",
        el("button", { type: "button", class: "danger", "aria-label": `Delete ${e.id}`,
          onclick: confirmed(`Delete ${e.id} and its deliveries, pending ones included?`, async () => {
            await api("DELETE", `/v1/webhooks/${encodeURIComponent(e.id)}`);
            if (parameters.get("endpoint") === e.id) {
              // Its deliveries are gone with it: the list of endpoints alone (no hashchange, so this message stays).
              history.replaceState(null, "", "#/webhooks");
              await webhooks(new URLSearchParams());
            } else {
              await webhooks(parameters);
            }
            return `${e.id} deleted.`;
          }) }, "Delete")) },
  ], endpoints));
  const endpoint = parameters.get("endpoint");
  if (!endpoint) return;
  const state = ["failed", "pending", "delivered"].includes(parameters.get("state")) ? parameters.get("state") : "pending";
  view.append(form("deliveries-form", [
    { name: "state", label: "Deliveries", value: state, options: ["pending", "failed", "delivered"] },
  ], "Show", (v) => go("webhooks", { endpoint, state: v.state })));
  const base = `/v1/webhooks/${encodeURIComponent(endpoint)}`;
  const page = await api("GET", `${base}/deliveries?state=${state}&limit=50`);
  const retry = async (seq) => guarded(async () => {
    await api("POST", `${base}/deliveries/${seq}/retry`);
    await webhooks(parameters);
    return `Delivery ${seq} is pending again.`;
  });
  view.append(table(`${state[0].toUpperCase()}${state.slice(1)} deliveries of ${endpoint}`, [
    { title: "Seq", num: true, cell: (d) => String(d.seq) },
    { title: "Event", cell: (d) => d.type },
    { title: "Conversation", cell: (d) => d.conversation ?? `account ${d.account}` },
    { title: "Created", cell: (d) => time(d.createdAt) },
    { title: "Attempts", num: true, cell: (d) => String(d.attempts) },
    ...(state === "pending" ? [{ title: "Next attempt", cell: (d) => time(d.nextAttemptAt) }] : []),
    { title: "Last error", cell: (d) => [d.lastStatus ? `HTTP ${d.lastStatus}` : "", d.lastError ?? ""].filter(Boolean).join(": ") },
    { title: "Action", cell: (d) => d.state === "failed"
        ? el("button", { type: "button", class: "retry", "aria-label": `Retry delivery ${d.seq}`, onclick: () => retry(d.seq) }, "Retry") : "" },
  ], page.deliveries));
  if (state === "failed" && page.deliveries.length > 0) {
    view.append(el("p", {}, el("button", { type: "button", class: "secondary", onclick: () => guarded(async () => {
      const answer = await api("POST", `${base}/retry-failed`);
      await webhooks(parameters);
      return `${answer.retried} deliveries are pending again.`;
    }) }, "Retry all failed")));
  }
}

// MARK: Keys

const scopes = ["accounts", "messages", "groups", "webhooks", "moderation", "import", "server", "audit", "read", "metrics"];

async function keys() {
  const view = currentView;
  view.replaceChildren(el("h2", {}, "Keys"),
    el("p", {}, "API keys let your backend, monitoring and tools call what their scopes allow (docs/security.md). Only the app secret manages keys."));
  const [apiKeys, signing] = [(await api("GET", "/v1/keys")).keys, (await api("GET", "/v1/signing-keys")).keys];
  // A credential is shown once, when it is made: here, until the page is left.
  const shown = el("p", { id: "new-credential", class: "secret", hidden: true });
  const show = (label, value) => {
    const box = document.getElementById("new-credential");
    box.replaceChildren(`${label}, shown this once: `, el("code", {}, value));
    box.hidden = false;
  };
  const create = el("form", { id: "key-form" },
    el("div", { class: "field" }, el("label", { for: "key-name" }, "Name"),
      el("input", { id: "key-name", name: "name", required: true, placeholder: "prometheus" })),
    el("fieldset", {}, el("legend", {}, "Scopes"),
      scopes.map((scope) => el("label", { class: "choice", for: `scope-${scope}` },
        el("input", { type: "checkbox", name: "scope", value: scope, id: `scope-${scope}` }), ` ${scope} `))),
    el("div", { class: "field" }, el("label", { for: "key-days" }, "Expires after (days, empty for never)"),
      el("input", { id: "key-days", name: "days", type: "number", min: "1" })),
    el("button", { type: "submit" }, "Make key"));
  create.addEventListener("submit", (event) => {
    event.preventDefault();
    const data = new FormData(create);
    guarded(async () => {
      const chosen = data.getAll("scope");
      if (chosen.length === 0) throw new Error("Choose at least one scope.");
      const body = { name: data.get("name"), scopes: chosen };
      const days = Number(data.get("days"));
      if (days > 0) body.expiresAt = Date.now() + days * 86400000;
      const created = await api("POST", "/v1/keys", body);
      await keys();
      show(`Key ${created.key.id}`, created.credential);
      return `${created.key.id} made.`;
    });
  });
  view.append(create, shown, table("API keys", [
    { title: "Id", cell: (k) => k.id },
    { title: "Name", cell: (k) => k.name },
    { title: "Scopes", cell: (k) => k.scopes.join(", ") },
    { title: "Made", cell: (k) => time(k.createdAt) },
    { title: "State", cell: (k) => k.revokedAt ? `Revoked ${time(k.revokedAt)}`
        : k.expiresAt && k.expiresAt <= Date.now() ? `Expired ${time(k.expiresAt)}`
        : k.expiresAt ? `Expires ${time(k.expiresAt)}` : "Active" },
    { title: "Action", cell: (k) => k.revokedAt ? "" : el("button", { type: "button", class: "danger", "aria-label": `Revoke ${k.id}`,
        onclick: confirmed(`Revoke ${k.id} (${k.name})? Calls with it are refused from now on.`, async () => {
          await api("DELETE", `/v1/keys/${encodeURIComponent(k.id)}`);
          await keys();
          return `${k.id} revoked.`;
        }) }, "Revoke") },
  ], apiKeys));
  view.append(el("h3", {}, "Signing keys"),
    el("p", {}, "The keys that sign client tokens. A new key signs from now on; the others keep verifying their tokens for a day."),
    el("p", {}, el("button", { type: "button", id: "rotate-signing-key", class: "secondary",
      onclick: confirmed("Make a new signing key? The current one retires in 24 hours.", async () => {
        const created = await api("POST", "/v1/signing-keys", {});
        await keys();
        show(`Secret of signing key ${created.kid}`, created.secret);
        return `${created.kid} signs from now on.`;
      }) }, "New signing key")),
    table("Signing keys", [
      { title: "Kid", cell: (k) => k.kid },
      { title: "Made", cell: (k) => time(k.createdAt) },
      { title: "State", cell: (k) => k.signing ? "Signs" : k.retiresAt && k.retiresAt <= Date.now() ? `Retired ${time(k.retiresAt)}`
          : k.retiresAt ? `Retires ${time(k.retiresAt)}` : "Verifies" },
      { title: "Action", cell: (k) => k.signing || (k.retiresAt && k.retiresAt <= Date.now()) ? ""
          : el("button", { type: "button", class: "danger", "aria-label": `Retire ${k.kid}`,
            onclick: confirmed(`Retire ${k.kid} now? Tokens it signed are refused from now on.`, async () => {
              await api("DELETE", `/v1/signing-keys/${encodeURIComponent(k.kid)}`);
              await keys();
              return `${k.kid} retired.`;
            }) }, "Retire now") },
    ], signing));
}

// MARK: Audit trail

async function audit(parameters) {
  const view = currentView;
  const credential = parameters.get("credential") ?? "";
  const action = parameters.get("action") ?? "";
  const before = parameters.get("before") ?? "";
  view.replaceChildren(el("h2", {}, "Audit trail"),
    el("p", {}, "Every administrative call: who (root is the app secret, else a key's id), what, on what, from where, and how it ended."),
    form("audit-form", [
      { name: "credential", label: "Credential", value: credential, placeholder: "root or a key id" },
      { name: "action", label: "Action", value: action, placeholder: "deactivateAccount" },
    ], "Filter", (v) => go("audit", { credential: v.credential, action: v.action })));
  const query = new URLSearchParams(Object.entries({ credential, action, before, limit: "50" }).filter(([, v]) => v));
  const page = await api("GET", `/v1/audit?${query}`);
  view.append(table("Audit trail, newest first", [
    { title: "Time", cell: (r) => time(r.at) },
    { title: "Credential", cell: (r) => r.credential },
    { title: "Action", cell: (r) => r.action },
    { title: "Target", cell: (r) => r.target },
    { title: "Client", cell: (r) => r.clientAddress ?? "" },
    { title: "Outcome", cell: (r) => r.status === undefined ? "committed (answer not recorded)" : r.code ? `${r.status} ${r.code}` : String(r.status) },
    { title: "Request", cell: (r) => r.requestId },
  ], page.entries));
  if (page.nextBefore) {
    view.append(el("p", {}, el("button", { type: "button", id: "older",
      onclick: () => go("audit", { credential, action, before: String(page.nextBefore) }) }, "Older")));
  }
}

// MARK: Configuration

async function configuration() {
  const view = currentView;
  const answer = await api("GET", "/v1/server/configuration");
  const file = answer.settings.find((s) => s.name === "config")?.value;
  view.replaceChildren(el("h2", {}, "Configuration"),
    el("p", {}, file && file !== "none"
      ? `This node's settings, read at start from flags, COURIER_* variables and ${file}; the app secret is never shown.`
      : "This node's settings, read at start from flags, COURIER_* variables and defaults; the app secret is never shown."),
    table("Effective settings", [
      { title: "Setting", cell: (s) => s.name }, { title: "Value", cell: (s) => s.value },
    ], answer.settings));
}

// MARK: Routing

const routes = { overview, account, conversation, receipts, webhooks, keys, audit, configuration };

function route() {
  page += 1;
  if (poller) { clearInterval(poller); poller = null; }
  const signedIn = sessionStorage.getItem(secretKey) !== null;
  document.getElementById("sign-in").hidden = signedIn;
  document.querySelector("nav").hidden = !signedIn;
  if (!signedIn) { root.replaceChildren(); document.getElementById("secret").focus(); return; }
  currentView = el("div");
  root.replaceChildren(currentView);
  const [name, query] = location.hash.replace(/^#\//, "").split("?");
  const shown = Object.hasOwn(routes, name) ? name : "overview";
  for (const a of document.querySelectorAll("nav a")) {
    if (a.getAttribute("href") === `#/${shown}`) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  document.title = `Courier console — ${shown}`;
  guarded(() => routes[shown](new URLSearchParams(query ?? "")));
}

window.addEventListener("hashchange", route);
route();
