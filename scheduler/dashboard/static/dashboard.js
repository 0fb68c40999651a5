// Kiln's dashboard: plain JavaScript over /admin/api (admin token) — keys, nodes, the fleet (GPUs, replicas; pin, unload, drain), the model catalog, usage, MCP configurations and accounts' secrets.
const $ = (id) => document.getElementById(id);
const TOKEN = "kiln-admin-token";

/** Starting points for each server type's configuration (every secret named by an *_env member: one of the account's secrets). */
const TEMPLATES = {
  github: {
    authentication: { type: "app", app_id: 0, private_key_env: "GITHUB_PRIVATE_KEY", installation_id: 0 },
    base_url: "https://api.github.com",
    resources: { repositories: ["owner/repo"], include_issues: true, include_prs: true },
  },
  slack: {
    authentication: { type: "oauth", bot_token_env: "SLACK_BOT_TOKEN", scopes: ["channels:read", "channels:history"] },
    resources: { channels: ["general"], history_limit: 100 },
  },
  postgresql: {
    connection: { host: "db.internal", port: 5432, database: "app", ssl_mode: "require" },
    authentication: { type: "credentials", username: "readonly", password_env: "PG_PASSWORD" },
    permissions: { read_only: true, allowed_schemas: ["public"], row_limit: 100, query_timeout: 10 },
  },
  mysql: {
    connection: { host: "db.internal", port: 3306, database: "app" },
    authentication: { type: "credentials", username: "readonly", password_env: "MYSQL_PASSWORD" },
    permissions: { read_only: true, row_limit: 100 },
  },
  mongodb: { connection: { uri: "mongodb://db.internal:27017/app" }, permissions: { allowed_collections: ["users"], document_limit: 50 } },
  rest_api: {
    base_url: "https://api.example.com",
    authentication: { type: "api_key", key_env: "API_KEY", header: "Authorization", prefix: "Bearer " },
    endpoints: [{ name: "list_items", method: "GET", path: "/items", description: "List items" }],
  },
  filesystem: { root_path: "docs", permissions: { read_only: true, allowed_extensions: [".md", ".txt"], max_file_size: 1048576 }, indexing: { enable_search: true } },
  websocket: { url: "wss://feed.example.com/ws", subscription: { topics: ["updates"], buffer_size: 100, max_age: 3600 } },
  mcp: { transport: "http", url: "https://mcp.example.com/mcp" },
};

async function api(path, init = {}) {
  const res = await fetch(`/admin/api${path}`, {
    ...init,
    headers: { authorization: `Bearer ${sessionStorage.getItem(TOKEN)}`, "content-type": "application/json", ...(init.headers ?? {}) },
  });
  const body = res.status === 204 ? null : await res.json().catch(() => null);
  if (res.status === 401) signOut("The admin token was not accepted.");
  if (!res.ok) throw Object.assign(new Error(body?.error?.message ?? `HTTP ${res.status}`), { code: body?.error?.code, status: res.status });
  return body;
}
const el = (tag, text, attrs = {}) => Object.assign(document.createElement(tag), attrs, text !== undefined ? { textContent: text } : {});

function signOut(message = "") {
  sessionStorage.removeItem(TOKEN);
  clearInterval(fleetTimer);
  $("signed-in").hidden = true;
  $("sign-out").hidden = true;
  $("sign-in").hidden = false;
  $("sign-in-error").textContent = message;
}

async function signIn() {
  const session = await api("/session");
  $("sign-in").hidden = true;
  $("signed-in").hidden = false;
  $("sign-out").hidden = false;
  $("key-tier").replaceChildren(...session.tiers.map((t) => el("option", t, { value: t })));
  $("mcp-type").replaceChildren(...session.server_types.map((t) => el("option", t, { value: t })));
  $("mcp-type").value = "filesystem";
  // A tenant never names a program: stdio servers are the operator's, picked by name.
  if (session.stdio_servers?.length) TEMPLATES.mcp = { transport: "stdio", server: session.stdio_servers[0], env_from: {} };
  $("stdio-servers").textContent = session.stdio_servers?.length
    ? `Stdio servers offered by the operator: ${session.stdio_servers.join(", ")}.`
    : "This scheduler offers no stdio servers: use transport http.";
  resetForm();
  await loadKeys();
  await loadNodes();
  await loadFleet();
  startFleet();
  await loadCatalog();
}

async function loadNodes() {
  const { data } = await api("/nodes");
  const round = (v) => (v === null ? "–" : String(Math.round(v)));
  $("nodes").replaceChildren(
    ...data.map((n) => {
      const tr = el("tr");
      const state = n.distrusted ? `drained: ${n.distrusted.reason}` : n.draining ? "draining" : "serving";
      tr.append(
        el("td", n.node_id),
        el("td", n.models.join(", ")),
        el("td", String(n.slots)),
        el("td", String(n.inflight)),
        el("td", round(n.ttft_ms)),
        el("td", round(n.tokens_per_second)),
        el("td", state, n.distrusted ? { className: "error" } : {}),
      );
      return tr;
    }),
  );
}
$("nodes-load").addEventListener("click", () => void loadNodes().catch(() => undefined));

// --- The fleet: each node's GPUs and replicas, each catalog model's status; pin, unpin, unload, drain ---

/** Bytes as a person reads them. */
function bytes(n) {
  if (n >= 2 ** 30) return `${(n / 2 ** 30).toFixed(1)} GiB`;
  if (n >= 2 ** 20) return `${(n / 2 ** 20).toFixed(1)} MiB`;
  return `${Math.round(n / 1024)} KiB`;
}
/** How long ago `ms` (Unix ms) was, roughly. */
function ago(ms) {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
}
const FLEET_REFRESH_MS = 3000;
let fleetTimer;
let fleetLoading = false;
/** The node picked in each model's "Pin to a node" list, kept across refreshes. */
const pinChoice = new Map();

/** Asks before an action, runs it, shows its refusal, and refreshes the fleet. */
async function fleetAction(question, run) {
  if (!confirm(question)) return;
  $("fleet-error").textContent = "";
  try {
    await run();
  } catch (err) {
    $("fleet-error").textContent = err.message;
  }
  await loadFleet().catch(() => undefined);
}

const pinReplica = (model, node) =>
  fleetAction(`Pin ${model} on ${node}? Placement will never unload it; a node without it loads it when it fits, unloading its idle, unpinned replicas.`, () =>
    api("/fleet/pins", { method: "POST", body: JSON.stringify({ model, node }) }),
  );
const unpinReplica = (model, node) =>
  fleetAction(`Unpin ${model} on ${node}? Placement may then unload it to make room.`, () => api("/fleet/pins", { method: "DELETE", body: JSON.stringify({ model, node }) }));
const unloadReplica = (model, node) =>
  fleetAction(`Unload ${model} from ${node}?`, async () => {
    try {
      await api("/fleet/unload", { method: "POST", body: JSON.stringify({ model, node }) });
    } catch (err) {
      // a replica answering requests: asked again, then unloaded once they end
      if (err.code !== "replica_busy" || !confirm(`${err.message}\n\nUnload it anyway? It takes no new request; its node lets these finish, stopping them after a minute.`))
        throw err;
      await api("/fleet/unload", { method: "POST", body: JSON.stringify({ model, node, force: true }) });
    }
  });
const drainNode = (node) =>
  fleetAction(`Drain ${node}? It takes no new work from this scheduler, and leaves once its requests end (within 60 s); it comes back only when its agent restarts.`, () =>
    api(`/fleet/nodes/${encodeURIComponent(node)}/drain`, { method: "POST", body: "{}" }),
  );

/** A table cell labelled with its column (shown beside it on a phone, where the table's rows stack). */
function cell(label, content, attrs = {}) {
  const td = el("td", typeof content === "string" ? content : undefined, attrs);
  if (typeof content !== "string") td.append(...content);
  td.dataset.label = label;
  return td;
}

function button(text, label, onClick) {
  const b = el("button", text, { type: "button" });
  b.setAttribute("aria-label", label);
  b.addEventListener("click", onClick);
  return b;
}

function renderDevice(node, d, i) {
  const used = d.total_bytes - d.free_bytes;
  const wrap = el("div", undefined, { className: "device" });
  const meter = el("meter", undefined, { min: 0, max: Math.max(1, d.total_bytes), value: used, low: d.total_bytes * 0.7, high: d.total_bytes * 0.9, optimum: 0 });
  meter.setAttribute("aria-label", `${node.node_id} ${d.name}: memory used`);
  wrap.append(
    el("span", `Device ${i}: ${d.name}`, { className: "device-name" }),
    meter,
    el("span", `${bytes(used)} used of ${bytes(d.total_bytes)} · ${bytes(d.free_bytes)} free`, { className: "muted" }),
  );
  return wrap;
}

function renderReplicas(node) {
  if (!node.replicas.length) return [el("p", "No replicas.", { className: "muted" })];
  const table = el("table", undefined, { className: "replicas stacks" });
  const head = el("tr");
  head.append(...["Model", "State", "Load", "Memory", "Last used", "Pinned", ""].map((h) => el("th", h, { scope: "col" })));
  table.append(el("thead"), el("tbody"));
  table.tHead.append(head);
  for (const r of node.replicas) {
    const tr = el("tr");
    const state = cell("State", r.state === "loading" ? `loading ${Math.round(r.progress * 100)}%` : r.state);
    if (r.state === "loading") {
      const bar = el("progress", undefined, { max: 1, value: r.progress });
      bar.setAttribute("aria-label", `${r.model} on ${node.node_id}: loaded`);
      state.append(" ", bar);
    }
    const actions = cell("", [], { className: "actions" });
    if (r.state !== "unloading") {
      actions.append(
        r.pinned
          ? button("Unpin", `Unpin ${r.model} on ${node.node_id}`, () => unpinReplica(r.model, node.node_id))
          : button("Pin", `Pin ${r.model} on ${node.node_id}`, () => pinReplica(r.model, node.node_id)),
        " ",
        button("Unload", `Unload ${r.model} from ${node.node_id}`, () => unloadReplica(r.model, node.node_id)),
      );
    }
    tr.append(
      cell("Model", r.model),
      state,
      cell("Load", r.slots ? `${r.inflight} / ${r.slots}` : "–"),
      cell(
        "Memory",
        r.bytes
          .filter((b) => b > 0)
          .map(bytes)
          .join(" + ") || "–",
      ),
      cell("Last used", ago(r.last_used_at)),
      cell("Pinned", r.pinned ? "yes" : "no"),
      actions,
    );
    table.tBodies[0].append(tr);
  }
  return [table];
}

function renderNode(node) {
  const li = el("li", undefined, { className: "node" });
  li.dataset.node = node.node_id;
  const title = el("div", undefined, { className: "node-title" });
  const state = node.distrusted ? `drained: ${node.distrusted.reason}` : node.draining ? "draining" : node.placeable ? "takes placed replicas" : "serves its --serve list";
  title.append(el("h3", node.node_id), el("span", state, { className: node.distrusted ? "badge error" : "badge" }));
  if (!node.draining) title.append(button("Drain", `Drain ${node.node_id}`, () => drainNode(node.node_id)));
  li.append(title);
  if (node.placeable) {
    li.append(...node.devices.map((d, i) => renderDevice(node, d, i)), ...renderReplicas(node));
  } else {
    li.append(
      el("p", node.pools.map((p) => `${p.models.join(", ")}: ${p.inflight} / ${p.slots} slots busy`).join(" · ") || "No models.", {
        className: "muted",
      }),
    );
  }
  return li;
}

function renderFleetModels(fleet) {
  const targets = fleet.nodes.filter((n) => n.placeable && !n.draining).map((n) => n.node_id);
  $("fleet-models-table").hidden = !fleet.catalog_active;
  $("fleet-models").replaceChildren(
    ...fleet.models.map((m) => {
      const tr = el("tr");
      const pin = cell("Pin to a node", [], { className: "actions" });
      if (targets.length) {
        const select = el("select", undefined, { id: `fleet-pin-${m.id.replace(/[^\w-]/g, "_")}` });
        select.setAttribute("aria-label", `Node to pin ${m.id} to`);
        select.append(...targets.map((t) => el("option", t, { value: t })));
        if (targets.includes(pinChoice.get(m.id))) select.value = pinChoice.get(m.id);
        select.addEventListener("change", () => pinChoice.set(m.id, select.value));
        pin.append(
          select,
          " ",
          button("Pin", `Pin ${m.id} to a node`, () => pinReplica(m.id, select.value)),
        );
      } else pin.append(el("span", "no node takes replicas", { className: "muted" }));
      const status = cell("Status", m.status, { className: `status-${m.status}` });
      tr.append(cell("Model", m.id), status, cell("Replicas", `${m.ready} ready of ${m.replicas} (min ${m.min_replicas}, max ${m.max_replicas})`), pin);
      return tr;
    }),
  );
}

async function loadFleet() {
  if (fleetLoading) return;
  fleetLoading = true;
  try {
    const fleet = await api("/fleet");
    const placeable = fleet.nodes.filter((n) => n.placeable).length;
    $("fleet-state").textContent =
      `${fleet.nodes.length} node${fleet.nodes.length === 1 ? "" : "s"} connected, ${placeable} taking placed replicas` +
      (fleet.catalog_active ? "" : "; no operator catalog, so nothing is placed") +
      ` · ${new Date().toLocaleTimeString()}`;
    $("fleet-nodes").replaceChildren(...fleet.nodes.map(renderNode));
    renderFleetModels(fleet);
  } finally {
    fleetLoading = false;
  }
}
$("fleet-load").addEventListener("click", () => void loadFleet().catch((err) => ($("fleet-error").textContent = err.message)));
function startFleet() {
  clearInterval(fleetTimer);
  fleetTimer = setInterval(() => {
    if (!document.hidden && !$("signed-in").hidden) void loadFleet().catch(() => undefined);
  }, FLEET_REFRESH_MS);
}

/** What the editor starts from while no operator catalog is stored. */
const CATALOG_TEMPLATE = {
  models: [{ id: "chat-small", source: "hf:org/repo:Q4_K_M", aliases: [], context_size: 4096, sequences: 4, min_replicas: 0, max_replicas: 1, idle_unload_s: 600 }],
};

function renderCatalog(catalog) {
  $("catalog-state").textContent = catalog.active
    ? `Version ${catalog.version}, saved ${new Date(catalog.updated_at * 1000).toLocaleString()}: ${catalog.models.length} model${catalog.models.length === 1 ? "" : "s"}, served by every scheduler on this database.`
    : "No operator catalog: the eight built-in ids are accepted, each served by the agents whose --serve offers it.";
  $("catalog-table").hidden = !catalog.active;
  $("catalog-rows").replaceChildren(
    ...catalog.models.map((m) => {
      const tr = el("tr");
      const source = el("td");
      source.append(el("code", m.source));
      tr.append(
        el("td", m.id),
        el("td", m.aliases.join(", ")),
        source,
        el("td", String(m.context_size)),
        el("td", String(m.sequences)),
        el("td", `${m.min_replicas}–${m.max_replicas}`),
        el("td", String(m.idle_unload_s)),
      );
      return tr;
    }),
  );
}

async function loadCatalog() {
  const catalog = await api("/catalog");
  renderCatalog(catalog);
  $("catalog-json").value = JSON.stringify(catalog.active ? { models: catalog.models } : CATALOG_TEMPLATE, null, 2);
  $("catalog-error").textContent = "";
}
$("catalog-load").addEventListener("click", () => void loadCatalog().catch((err) => ($("catalog-error").textContent = err.message)));
$("catalog-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  $("catalog-error").textContent = "";
  let catalog;
  try {
    catalog = JSON.parse($("catalog-json").value);
  } catch (err) {
    return void ($("catalog-error").textContent = `catalog: not valid JSON (${err.message})`);
  }
  try {
    const saved = await api("/catalog", { method: "PUT", body: JSON.stringify(catalog) });
    renderCatalog(saved);
    $("catalog-json").value = JSON.stringify({ models: saved.models }, null, 2);
  } catch (err) {
    $("catalog-error").textContent = err.message;
  }
});

async function loadKeys() {
  const { data } = await api("/accounts");
  $("account-names").replaceChildren(...data.map((a) => el("option", undefined, { value: a.name })));
  $("keys").replaceChildren(
    ...data.flatMap((a) =>
      a.keys.map((k) => {
        const row = el("tr");
        row.append(el("td", a.name), el("td", k.tier), el("td", k.id), el("td", k.state));
        const cell = el("td");
        if (k.state === "active") {
          const revoke = el("button", "Revoke", { type: "button" });
          revoke.setAttribute("aria-label", `Revoke key ${k.id}`);
          revoke.addEventListener("click", async () => {
            await api(`/keys/${k.id}`, { method: "DELETE" });
            await loadKeys();
          });
          cell.append(revoke);
        }
        row.append(cell);
        return row;
      }),
    ),
  );
}

// --- Per-type fields: every leaf of the configuration as a labelled input -------------------

/**
 * Keys that reach a prototype when used as a path (a stored configuration comes from a tenant):
 * never turned into fields, never written.
 */
const UNSAFE_KEYS = new Set(["__proto__", "constructor", "prototype"]);

/** Leaves of a configuration: [path, value] with paths like "connection.port" or "endpoints.0.name". */
function leaves(value, path = []) {
  if (Array.isArray(value) && value.every((v) => typeof v === "string")) return [[path, value]];
  if (value && typeof value === "object")
    return Object.entries(value)
      .filter(([k]) => !UNSAFE_KEYS.has(k))
      .flatMap(([k, v]) => leaves(v, [...path, k]));
  return [[path, value]];
}

/** Sets `value` at `path` in `target`, through own members only (never an inherited one). */
function setPath(target, path, value) {
  if (!Array.isArray(path) || path.some((key) => typeof key !== "string" || UNSAFE_KEYS.has(key))) return target;
  let node = target;
  path.forEach((key, i) => {
    if (i === path.length - 1) {
      node[key] = value;
      return;
    }
    if (!Object.hasOwn(node, key) || !node[key] || typeof node[key] !== "object") node[key] = /^\d+$/.test(path[i + 1]) ? [] : {};
    node = node[key];
  });
  return target;
}

function renderFields(config) {
  const box = $("mcp-fields");
  box.replaceChildren(el("legend", `Settings for ${$("mcp-type").value}`));
  for (const [path, value] of leaves(config)) {
    const id = `field-${path.join("-")}`;
    const name = path.join(".");
    const wrap = el("div");
    const label = el("label", name, { htmlFor: id });
    const input =
      typeof value === "boolean"
        ? el("input", undefined, { id, type: "checkbox", checked: value })
        : el("input", undefined, { id, type: typeof value === "number" ? "number" : "text", value: Array.isArray(value) ? value.join(", ") : String(value ?? "") });
    input.dataset.path = JSON.stringify(path);
    input.dataset.kind = Array.isArray(value) ? "list" : typeof value;
    if (name.endsWith("_env")) input.title = "the name of one of the account's secrets (set under Secrets), never the secret itself";
    if (name === "root_path") input.title = "a folder relative to the account's folder on the scheduler (empty for the folder itself)";
    input.addEventListener(input.type === "checkbox" ? "change" : "input", syncFromFields);
    wrap.append(label, input);
    box.append(wrap);
  }
}

function syncFromFields() {
  const config = {};
  for (const input of $("mcp-fields").querySelectorAll("input")) {
    const kind = input.dataset.kind;
    const value =
      kind === "boolean"
        ? input.checked
        : kind === "number"
          ? input.value === ""
            ? undefined
            : Number(input.value)
          : kind === "list"
            ? input.value
                .split(",")
                .map((x) => x.trim())
                .filter(Boolean)
            : input.value;
    if (value !== undefined && value !== "") setPath(config, JSON.parse(input.dataset.path), value);
  }
  $("mcp-config").value = JSON.stringify(config, null, 2);
}

function resetForm() {
  $("mcp-id").value = "";
  $("mcp-name").value = "";
  $("mcp-description").value = "";
  $("mcp-form-title").textContent = "New configuration";
  $("mcp-config").value = JSON.stringify(TEMPLATES[$("mcp-type").value], null, 2);
  renderFields(TEMPLATES[$("mcp-type").value]);
  $("mcp-error").textContent = "";
}

async function loadSecrets(account) {
  const { data } = await api(`/accounts/${encodeURIComponent(account)}/secrets`);
  $("secret-list").replaceChildren(
    ...data.map((secret) => {
      const li = el("li");
      li.append(el("code", secret.name), el("span", ` · set ${new Date(secret.updated_at * 1000).toLocaleString()}`, { className: "muted" }), " ");
      const del = el("button", "Delete", { type: "button" });
      del.setAttribute("aria-label", `Delete secret ${secret.name}`);
      del.addEventListener("click", async () => {
        await api(`/accounts/${encodeURIComponent(account)}/secrets/${secret.name}`, { method: "DELETE" });
        await loadSecrets(account);
      });
      li.append(del);
      return li;
    }),
  );
}

async function loadMcp() {
  const account = $("mcp-account").value.trim();
  if (!account) return;
  await loadSecrets(account);
  const { data } = await api(`/accounts/${encodeURIComponent(account)}/mcp`);
  $("mcp-list").replaceChildren(
    ...data.map((s) => {
      const li = el("li");
      li.append(el("strong", s.name), el("span", ` · ${s.server_type} · ${s.id}`, { className: "muted" }), el("br"));
      const test = el("button", "Test", { type: "button" });
      test.setAttribute("aria-label", `Test ${s.name}`);
      test.addEventListener("click", () => runTest(account, s));
      const edit = el("button", "Edit", { type: "button" });
      edit.setAttribute("aria-label", `Edit ${s.name}`);
      edit.addEventListener("click", () => {
        $("mcp-id").value = s.id;
        $("mcp-name").value = s.name;
        $("mcp-description").value = s.description ?? "";
        $("mcp-type").value = s.server_type;
        $("mcp-config").value = JSON.stringify(s.config, null, 2);
        renderFields(s.config);
        $("mcp-form-title").textContent = `Edit ${s.name}`;
        $("mcp-name").focus();
      });
      const del = el("button", "Delete", { type: "button" });
      del.setAttribute("aria-label", `Delete ${s.name}`);
      del.addEventListener("click", async () => {
        await api(`/accounts/${encodeURIComponent(account)}/mcp/${s.id}`, { method: "DELETE" });
        await loadMcp();
      });
      li.append(test, " ", edit, " ", del);
      return li;
    }),
  );
}

async function runTest(account, server) {
  const out = $("mcp-result");
  out.replaceChildren(el("p", `Testing ${server.name}…`));
  try {
    const r = await api(`/accounts/${encodeURIComponent(account)}/mcp/${server.id}/test`, { method: "POST" });
    const list = (title, items, label) =>
      [el("h3", `${title} (${items.length})`), el("ul", undefined, { className: "test-list" })].map((node, i) => {
        if (i === 1) node.append(...items.map((it) => el("li", label(it))));
        return node;
      });
    out.replaceChildren(
      el("p", `${server.name}: ok in ${r.latency_ms} ms`),
      ...list("Tools", r.tools, (t) => `${t.name}${t.description ? ` — ${t.description}` : ""}`),
      ...list("Resources", r.resources, (x) => `${x.name} (${x.uri})`),
    );
  } catch (err) {
    out.replaceChildren(el("p", `${server.name}: ${err.message}`, { className: "error" }));
  }
}

$("sign-in-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  sessionStorage.setItem(TOKEN, $("admin-token").value.trim());
  try {
    await signIn();
  } catch (err) {
    signOut(err.message);
  }
});
$("sign-out").addEventListener("click", () => signOut());
$("key-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  $("key-error").textContent = "";
  try {
    const created = await api("/keys", { method: "POST", body: JSON.stringify({ account: $("key-account").value, tier: $("key-tier").value, rpm: $("key-rpm").value }) });
    $("new-key-token").textContent = created.token;
    $("new-key").hidden = false;
    await loadKeys();
  } catch (err) {
    $("key-error").textContent = err.message;
  }
});
$("mcp-load").addEventListener("click", () => void loadMcp());
$("usage-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  $("usage-error").textContent = "";
  const account = $("usage-account").value.trim();
  const query = new URLSearchParams();
  if ($("usage-start").value) query.set("start_date", $("usage-start").value);
  if ($("usage-end").value) query.set("end_date", $("usage-end").value);
  try {
    const report = await api(`/accounts/${encodeURIComponent(account)}/usage?${query}`);
    const cells = (values, tag = "td") => values.map((v) => el(tag, String(v)));
    $("usage-caption").textContent = `${report.account}, ${report.start_date} to ${report.end_date} (UTC)`;
    $("usage-rows").replaceChildren(
      ...report.data.map((d) => {
        const tr = el("tr");
        tr.append(...cells([d.date, d.model, d.requests, d.prompt_tokens, d.completion_tokens, d.total_tokens, d.audio_seconds]));
        return tr;
      }),
    );
    const sum = (k) => report.data.reduce((n, d) => n + d[k], 0);
    $("usage-total").replaceChildren(
      el("th", "Total", { scope: "row" }),
      el("td", ""),
      ...cells([sum("requests"), sum("prompt_tokens"), sum("completion_tokens"), sum("total_tokens"), Math.round(sum("audio_seconds") * 1000) / 1000]),
    );
    $("usage-table").hidden = false;
  } catch (err) {
    $("usage-error").textContent = err.message;
  }
});
$("secret-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  $("secret-error").textContent = "";
  const account = $("mcp-account").value.trim();
  if (!account) return void ($("secret-error").textContent = "Choose the account first.");
  const name = $("secret-name").value.trim();
  try {
    await api(`/accounts/${encodeURIComponent(account)}/secrets/${encodeURIComponent(name)}`, { method: "PUT", body: JSON.stringify({ value: $("secret-value").value }) });
    $("secret-value").value = ""; // write-only: the value is never shown again
    $("secret-name").value = "";
    await loadSecrets(account);
  } catch (err) {
    $("secret-error").textContent = err.message;
  }
});
$("mcp-type").addEventListener("change", () => {
  if (!$("mcp-id").value) resetForm();
});
$("mcp-new").addEventListener("click", resetForm);
$("mcp-config").addEventListener("input", () => {
  try {
    renderFields(JSON.parse($("mcp-config").value));
  } catch {
    /* mid-edit: the fields follow once it parses */
  }
});
$("mcp-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  $("mcp-error").textContent = "";
  const account = $("mcp-account").value.trim();
  if (!account) return void ($("mcp-error").textContent = "Choose the account first.");
  let config;
  try {
    config = JSON.parse($("mcp-config").value);
  } catch (err) {
    return void ($("mcp-error").textContent = `config: not valid JSON (${err.message})`);
  }
  const body = JSON.stringify({ name: $("mcp-name").value, description: $("mcp-description").value || undefined, server_type: $("mcp-type").value, config });
  const id = $("mcp-id").value;
  try {
    await api(`/accounts/${encodeURIComponent(account)}/mcp${id ? `/${id}` : ""}`, { method: id ? "PUT" : "POST", body });
    resetForm();
    await loadMcp();
  } catch (err) {
    $("mcp-error").textContent = err.message;
  }
});
if (sessionStorage.getItem(TOKEN)) signIn().catch((err) => signOut(err.message));
