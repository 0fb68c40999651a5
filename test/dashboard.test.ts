/// <reference lib="dom" />
/**
 * The scheduler's dashboard in a real browser (Debian's chromium through playwright-core):
 * sign in with the admin token, create a key (shown once), create a filesystem MCP
 * configuration, press Test and see its tools; the fleet page with a placeable agent (its GPU, a
 * replica pinned from the page, the catalog's statuses, a refusal shown). Plus the admin API's guard.
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../core/log.js";
import { openStore } from "../scheduler/store/index.js";
import { testDb } from "./helpers/db.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import type { AgentHandle } from "../agent/index.js";
import { catalogFile, httpBase, inProcessAgent, inProcessScheduler, tempDir, TINY_MODEL, until } from "./helpers/fleet.js";

const CHROMIUM = process.env.KILN_CHROMIUM ?? ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"].find((p) => existsSync(p));
const ADMIN = "dashboard-admin-token-0123";

describe("dashboard admin API", () => {
  it("is off without an admin token and refuses a wrong one", async () => {
    const off = await inProcessScheduler();
    const on = await inProcessScheduler({ adminToken: ADMIN });
    try {
      expect((await fetch(`${httpBase(off)}/admin/api/session`)).status).toBe(404);
      expect((await fetch(`${httpBase(on)}/admin/api/session`, { headers: { authorization: "Bearer wrong-token-wrong-token" } })).status).toBe(401);
      expect((await fetch(`${httpBase(on)}/admin/api/session`, { headers: { authorization: `Bearer ${ADMIN}` } })).status).toBe(200);
      expect((await fetch(`${httpBase(on)}/dashboard`)).headers.get("content-type")).toMatch(/text\/html/);
    } finally {
      await off.close();
      await on.close();
    }
  });
});

describe("the dashboard's catalog API", () => {
  it("needs the admin token; GET, PUT (checked: a 400 invalid_catalog names the entry and field) and DELETE the whole catalog", async () => {
    const on = await inProcessScheduler({ adminToken: ADMIN });
    const call = (method: string, body?: unknown, token = ADMIN) =>
      fetch(`${httpBase(on)}/admin/api/catalog`, {
        method,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
      });
    try {
      expect((await call("GET", undefined, "wrong-token-wrong-token")).status).toBe(401);
      expect((await call("PUT", { models: [{ id: "x", source: "/m/x.gguf" }] }, "wrong-token-wrong-token")).status).toBe(401);
      expect((await call("DELETE", undefined, "wrong-token-wrong-token")).status).toBe(401);
      expect(await (await call("GET")).json()).toEqual({ active: false, version: 0, updated_at: null, models: [] });

      const put = await call("PUT", { models: [{ id: "house/chat", source: "hf:org/repo:Q4_K_M", aliases: ["gpt-4o"] }] });
      expect(put.status).toBe(200);
      const stored = await put.json();
      expect(stored).toMatchObject({ active: true, version: 1, models: [{ id: "house/chat", aliases: ["gpt-4o"], context_size: 4096, max_replicas: 1 }] });
      expect(stored.updated_at).toBeGreaterThan(Date.now() / 1000 - 60);
      expect(await (await call("GET")).json()).toEqual(stored);

      const cases: [unknown, string, string][] = [
        [
          {
            models: [
              { id: "a", source: "/m/a.gguf" },
              { id: "b", source: "/m/b.gguf", aliases: ["a"] },
            ],
          },
          'models[1] ("b"): aliases[0]: "a" already names models[0]',
          "models[1].aliases[0]",
        ],
        [{ models: [{ id: "a", source: "/m/a.gguf", sequences: 1000 }] }, 'models[0] ("a"): sequences: must be a whole number from 1 to 256, got 1000', "models[0].sequences"],
        [{ models: [{ id: "a", source: "whisper:base" }] }, expect.stringMatching(/^models\[0\] \("a"\): source: must be hf:/) as unknown as string, "models[0].source"],
        [[], '(top): must be an object {"models": […]}', "models"],
      ];
      for (const [body, message, param] of cases) {
        const res = await call("PUT", body);
        expect(res.status).toBe(400);
        expect((await res.json()).error).toEqual({ type: "invalid_request_error", code: "invalid_catalog", message, param });
      }
      expect((await call("PUT", "{")).status).toBe(400); // not JSON: the body's own error
      expect((await (await call("GET")).json()).version).toBe(1); // nothing refused was stored

      expect((await call("DELETE")).status).toBe(204);
      expect(await (await call("GET")).json()).toMatchObject({ active: false, version: 2, models: [] });
    } finally {
      await on.close();
    }
  });
});

const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

describe("dashboard hardening", () => {
  it("serves the page and its files with the CSP, no framing, no sniffing, no referrer", async () => {
    const on = await inProcessScheduler({ adminToken: ADMIN });
    try {
      for (const path of ["/dashboard", "/dashboard/dashboard.js", "/dashboard/dashboard.css", "/dashboard/nope.js"]) {
        const res = await fetch(`${httpBase(on)}${path}`);
        expect(res.headers.get("content-security-policy"), path).toBe(CSP);
        expect(res.headers.get("x-frame-options"), path).toBe("DENY");
        expect(res.headers.get("x-content-type-options"), path).toBe("nosniff");
        expect(res.headers.get("referrer-policy"), path).toBe("no-referrer");
        expect(res.headers.get("strict-transport-security"), path).toBeNull();
      }
      // Nothing the CSP would block: no inline script, style or event-handler attribute, no HTML built from strings.
      const html = await (await fetch(`${httpBase(on)}/dashboard`)).text();
      expect(html.match(/<script\b[^>]*>/g)).toEqual(['<script src="/dashboard/dashboard.js" type="module">']);
      expect(html).not.toMatch(/<style\b|\sstyle\s*=|\son[a-z]+\s*=|javascript:/i);
      const js = await (await fetch(`${httpBase(on)}/dashboard/dashboard.js`)).text();
      expect(js).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|\.style\b|setAttribute\(\s*["'](?:style|on)/);
    } finally {
      await on.close();
    }
  });

  it("refuses a key for an account that is not a plain folder name", async () => {
    const on = await inProcessScheduler({ adminToken: ADMIN });
    try {
      for (const account of ["..", ".", ".hidden", "a/b", "x".repeat(65)]) {
        const res = await fetch(`${httpBase(on)}/admin/api/keys`, {
          method: "POST",
          headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
          body: JSON.stringify({ account, tier: "standard" }),
        });
        expect(res.status, account).toBe(400);
        expect((await res.json()).error.code).toBe("invalid_account");
      }
    } finally {
      await on.close();
    }
  });
});

describe.skipIf(!CHROMIUM)("dashboard in chromium", () => {
  let browser: Browser;
  let scheduler: SchedulerHandle;
  let fsBase: string;
  let db: string;
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    fsBase = tempDir();
    db = testDb();
    scheduler = await inProcessScheduler({ adminToken: ADMIN, mcpFsBase: fsBase, db });
  });
  afterAll(async () => {
    await browser?.close();
    await scheduler?.close();
  });

  /** A new page of the dashboard, signed in with the admin token. */
  async function signedIn(): Promise<Page> {
    const page = await browser.newPage();
    await page.goto(`${httpBase(scheduler)}/dashboard`);
    await page.fill("#admin-token", ADMIN);
    await page.click("#sign-in-form button[type=submit]");
    await page.locator("#signed-in").waitFor();
    return page;
  }

  it("signs in, creates a key, sets a write-only secret, creates a filesystem configuration and tests it", async () => {
    mkdirSync(join(fsBase, "acme", "docs"), { recursive: true });
    writeFileSync(join(fsBase, "acme", "docs", "guide.md"), "# guide");
    const page = await signedIn();

    await page.fill("#key-account", "acme");
    await page.selectOption("#key-tier", "standard");
    await page.click("#key-form button[type=submit]");
    await expect.poll(() => page.locator("#new-key-token").textContent()).toMatch(/^eyJ/);
    const token = (await page.locator("#new-key-token").textContent())!;
    expect(token.split(".")).toHaveLength(3);
    await page.locator("#keys tr", { hasText: "acme" }).waitFor();
    // The key works against the public API.
    expect((await fetch(`${httpBase(scheduler)}/v1/models`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);

    await page.fill("#mcp-account", "acme");
    await page.click("#mcp-load");
    // A secret is set once and listed by name only; its value is never shown again.
    await page.fill("#secret-name", "PG_PASSWORD");
    await page.fill("#secret-value", "dashboard-secret-value");
    await page.click("#secret-form button[type=submit]");
    await page.locator("#secret-list li", { hasText: "PG_PASSWORD" }).waitFor();
    expect(await page.locator("#secret-value").inputValue()).toBe("");
    expect(await page.content()).not.toContain("dashboard-secret-value");
    const listed = await (await fetch(`${httpBase(scheduler)}/admin/api/accounts/acme/secrets`, { headers: { authorization: `Bearer ${ADMIN}` } })).json();
    expect(listed.data.map((x: { name: string }) => x.name)).toEqual(["PG_PASSWORD"]);
    expect(JSON.stringify(listed)).not.toContain("dashboard-secret-value");
    // Each type has its own fields, from its template; the JSON follows them.
    await page.selectOption("#mcp-type", "rest_api");
    for (const id of ["field-base_url", "field-authentication-key_env", "field-endpoints-0-method"]) expect(await page.locator(`#${id}`).count()).toBe(1);
    await page.selectOption("#mcp-type", "filesystem");
    await page.fill("#mcp-name", "docs");
    await page.fill("#field-root_path", "docs");
    await page.fill("#field-permissions-allowed_extensions", ".md");
    expect(JSON.parse(await page.locator("#mcp-config").inputValue())).toMatchObject({ root_path: "docs", permissions: { read_only: true, allowed_extensions: [".md"] } });
    await page.click("#mcp-form button[type=submit]");
    await page.locator("#mcp-list li", { hasText: "docs" }).waitFor();
    await page.click("button[aria-label='Test docs']");
    await page.locator("#mcp-result", { hasText: "docs: ok" }).waitFor();
    const text = await page.locator("#mcp-result").textContent();
    for (const tool of ["list_files", "read_file", "search_files"]) expect(text).toContain(tool);
    expect(text).toContain("guide.md");

    // An inlined secret is refused with the member's name.
    await page.selectOption("#mcp-type", "postgresql");
    await page.fill("#mcp-name", "db");
    await page.fill("#mcp-config", JSON.stringify({ connection: { host: "db", port: 5432 }, authentication: { type: "credentials", username: "u", password: "hunter2" } }));
    await page.click("#mcp-form button[type=submit]");
    await expect.poll(() => page.locator("#mcp-error").textContent()).toMatch(/config\.authentication\.password: holds a secret value/);
    await page.screenshot({ path: resolve("test-artifacts", "dashboard.png"), fullPage: true });
    await page.close();
  }, 60_000);

  it("shows an account's usage by day and model from the ledger, with totals; a bad date is named", async () => {
    // rows as the ledger writes them, one account's two days and another account's day
    const store = await openStore(db, { logger: createLogger("test", "silent") });
    const row = (day: string, account: string, model: string, prompt: number, completion: number, audio: number) =>
      store.run(
        "INSERT INTO usage (at, day, account, key_id, model, kind, prompt_tokens, completion_tokens, audio_seconds, request_id) VALUES (?, ?, ?, 'key_x', ?, 'chat', ?, ?, ?, 'r')",
        [Date.parse(`${day}T12:00:00Z`), day, account, model, prompt, completion, audio],
      );
    await row("2026-11-20", "metered", "famB-v3.1", 10, 5, 0);
    await row("2026-11-20", "metered", "famB-v3.1", 7, 3, 0);
    await row("2026-11-21", "metered", "whisper-1", 0, 0, 12.5);
    await row("2026-11-21", "stranger", "famB-v3.1", 1000, 1000, 0);
    await store.close();
    const page = await signedIn();
    await page.fill("#usage-account", "metered");
    await page.fill("#usage-start", "2026-11-19");
    await page.fill("#usage-end", "2026-11-22");
    await page.click("#usage-form button[type=submit]");
    await page.locator("#usage-table").waitFor();
    const rows = await page.locator("#usage-rows tr").evaluateAll((trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    expect(rows).toEqual([
      ["2026-11-20", "famB-v3.1", "2", "17", "8", "25", "0"],
      ["2026-11-21", "whisper-1", "1", "0", "0", "0", "12.5"],
    ]);
    expect(await page.locator("#usage-total").evaluate((tr) => [...tr.children].map((td) => td.textContent))).toEqual(["Total", "", "3", "17", "8", "25", "12.5"]);
    await page.fill("#usage-start", "2026-11-23");
    await page.click("#usage-form button[type=submit]");
    await expect.poll(() => page.locator("#usage-error").textContent()).toBe("start_date: after end_date");
    await page.close();
  });

  it("shows the model catalog, saves one from its JSON editor, shows a refusal naming the entry and field, at desktop and phone widths", async () => {
    const page = await signedIn();
    await page.setViewportSize({ width: 1280, height: 900 });
    const admin = async () => (await fetch(`${httpBase(scheduler)}/admin/api/catalog`, { headers: { authorization: `Bearer ${ADMIN}` } })).json();
    try {
      // none stored: the built-in ids, said so; the editor starts from a template
      await expect.poll(() => page.locator("#catalog-state").textContent()).toMatch(/No operator catalog: the eight built-in ids/);
      expect(await page.locator("#catalog-table").isHidden()).toBe(true);
      expect(JSON.parse(await page.locator("#catalog-json").inputValue()).models[0]).toMatchObject({ id: "chat-small" });

      const catalog = {
        models: [
          { id: "house/chat", source: "hf:org/repo:Q4_K_M", aliases: ["gpt-4o", "chat"] },
          { id: "famB-v3.1", source: "hf:org/a-long-repository-name-GGUF/model-Q4_K_M-00002-of-00003.gguf", min_replicas: 1, max_replicas: 2, context_size: 8192 },
        ],
      };
      await page.fill("#catalog-json", JSON.stringify(catalog));
      await page.click("#catalog-form button[type=submit]");
      await expect.poll(() => page.locator("#catalog-rows tr").count()).toBe(2);
      const rows = await page.locator("#catalog-rows tr").evaluateAll((trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
      expect(rows).toEqual([
        ["house/chat", "gpt-4o, chat", "hf:org/repo:Q4_K_M", "4096", "4", "0–1", "600"],
        ["famB-v3.1", "", "hf:org/a-long-repository-name-GGUF/model-Q4_K_M-00001-of-00003.gguf", "8192", "4", "1–2", "600"],
      ]);
      const stored = await admin();
      expect(stored).toMatchObject({ active: true, version: 1 });
      expect(await page.locator("#catalog-state").textContent()).toMatch(/^Version 1, saved .*: 2 models/);
      // the editor now holds the stored catalog, its defaults filled in
      expect(JSON.parse(await page.locator("#catalog-json").inputValue())).toEqual({ models: stored.models });

      // a refusal names the entry and the field, and stores nothing
      const bad = { models: [...catalog.models.slice(0, 1), { ...catalog.models[1], min_replicas: 3 }] };
      await page.fill("#catalog-json", JSON.stringify(bad));
      await page.click("#catalog-form button[type=submit]");
      await expect.poll(() => page.locator("#catalog-error").textContent()).toBe('models[1] ("famB-v3.1"): max_replicas: must be ≥ min_replicas (3), got 2');
      await page.fill("#catalog-json", "{ not json");
      await page.click("#catalog-form button[type=submit]");
      await expect.poll(() => page.locator("#catalog-error").textContent()).toMatch(/^catalog: not valid JSON/);
      expect((await admin()).version).toBe(1);
      await page.click("#catalog-load");
      await expect.poll(() => page.locator("#catalog-error").textContent()).toBe("");

      await page.screenshot({ path: resolve("test-artifacts", "dashboard-catalog-desktop.png"), fullPage: true });
      await page.setViewportSize({ width: 375, height: 812 });
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      expect(overflow).toBeLessThanOrEqual(0);
      expect(await page.locator("#catalog-form button[type=submit]").isVisible()).toBe(true);
      await page.screenshot({ path: resolve("test-artifacts", "dashboard-catalog-phone.png"), fullPage: true });
    } finally {
      await fetch(`${httpBase(scheduler)}/admin/api/catalog`, { method: "DELETE", headers: { authorization: `Bearer ${ADMIN}` } });
      await page.close();
    }
  }, 60_000);

  it("works under its CSP, and a configuration's __proto__/constructor keys pollute nothing", async () => {
    const page = await browser.newPage();
    const violations: string[] = [];
    page.on("console", (m) => {
      if (/Content[- ]Security[- ]Policy|Refused to/i.test(m.text())) violations.push(m.text());
    });
    page.on("pageerror", (e) => violations.push(String(e)));
    const res = await page.goto(`${httpBase(scheduler)}/dashboard`);
    expect(res!.headers()["content-security-policy"]).toBe(CSP);
    await page.locator("#sign-in-form #admin-token").waitFor();
    expect(await page.locator("#sign-in-form button[type=submit]").isVisible()).toBe(true);
    await page.fill("#admin-token", ADMIN);
    await page.click("#sign-in-form button[type=submit]");
    await page.locator("#signed-in").waitFor();
    // The stylesheet applied (a file, not inline): the error line for an empty message is hidden.
    expect(await page.locator("#mcp-error").evaluate((e) => getComputedStyle(e).display)).toBe("none");

    // A configuration (as a tenant could store it) whose keys walk up to Object.prototype.
    await page.selectOption("#mcp-type", "filesystem");
    await page.fill(
      "#mcp-config",
      '{"root_path":"docs","__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted2":"yes"}},"a":{"__proto__":{"polluted3":"yes"}},"toString":{"x":"y"}}',
    );
    expect(await page.locator("#field-root_path").count()).toBe(1);
    await page.fill("#field-root_path", "docs2"); // rebuilds the configuration from the fields
    await page.fill("#field-toString-x", "z");
    const after = await page.evaluate(() => {
      const probe = {} as Record<string, unknown>;
      return { polluted: [probe.polluted, probe.polluted2, probe.polluted3], toStringX: (Object.prototype.toString as unknown as Record<string, unknown>).x };
    });
    expect(after).toEqual({ polluted: [undefined, undefined, undefined], toStringX: undefined });
    expect(await page.locator("[id^='field-__proto__'], [id^='field-constructor'], [id*='-__proto__']").count()).toBe(0);
    expect(JSON.parse(await page.locator("#mcp-config").inputValue())).toEqual({ root_path: "docs2", toString: { x: "z" } });
    expect(violations).toEqual([]);
    await page.close();
  }, 60_000);
});
describe.skipIf(!CHROMIUM)("the fleet page in chromium", () => {
  const MB = 1_000_000;
  let browser: Browser;
  let scheduler: SchedulerHandle;
  let agent: AgentHandle;
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    const shape = { source: TINY_MODEL, context_size: 512, sequences: 2, idle_unload_s: 0, memory_bytes: 40 * MB };
    const file = catalogFile([
      { id: "house/chat", aliases: ["chat"], ...shape },
      { id: "house/code", ...shape },
      { id: "house/huge", ...shape, memory_bytes: 10 ** 15 },
    ]);
    scheduler = await inProcessScheduler({ adminToken: ADMIN, catalog: file });
    // a placeable agent (no --serve): its memory budget stands in for a GPU's memory on this CPU machine
    agent = await inProcessAgent(scheduler, { serve: [], nodeId: "gpu-node-1", memoryBudget: String(100 * MB) });
    await until(() => scheduler.fleet.snapshot().length === 1, 15_000, "the agent to join");
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await agent?.close();
    await scheduler?.close();
  });

  it("shows each node's GPU memory, its replicas and the catalog's statuses; pins a replica from the page, shows a refusal, unloads it; at desktop and phone widths", async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const dialogs: string[] = [];
    page.on("dialog", (d) => {
      dialogs.push(d.message());
      void d.accept();
    });
    await page.goto(`${httpBase(scheduler)}/dashboard`);
    await page.fill("#admin-token", ADMIN);
    await page.click("#sign-in-form button[type=submit]");
    await page.locator("#signed-in").waitFor();

    const node = page.locator("#fleet-nodes li", { hasText: "gpu-node-1" });
    await node.waitFor();
    expect(await node.locator(".badge").textContent()).toBe("takes placed replicas");
    expect(await node.locator("meter").evaluate((m: HTMLMeterElement) => [m.value, m.max])).toEqual([0, 100 * MB]);
    expect(await node.locator(".device .muted").textContent()).toBe("0 KiB used of 95.4 MiB · 95.4 MiB free");
    expect(await node.textContent()).toContain("No replicas.");
    const statuses = () => page.locator("#fleet-models tr").evaluateAll((trs) => trs.map((tr) => [tr.children[0]!.textContent, tr.children[1]!.textContent]));
    // the page refreshes itself (every 3 s): the statuses come once the sizes are known
    await expect.poll(statuses, { timeout: 15_000 }).toEqual([
      ["house/chat", "placeable"],
      ["house/code", "placeable"],
      ["house/huge", "too_large"],
    ]);

    // pin house/chat to the node from the catalog table: asked first, then loaded there and shown pinned
    await page.click("button[aria-label='Pin house/chat to a node']");
    await node.locator("tr", { hasText: "house/chat" }).waitFor();
    await expect
      .poll(() => node.locator("tr", { hasText: "house/chat" }).evaluate((tr) => [...tr.children].slice(0, 3).map((td) => td.textContent)), { timeout: 30_000 })
      .toEqual(["house/chat", "ready", "0 / 2"]);
    expect(dialogs[0]).toMatch(/^Pin house\/chat on gpu-node-1\?/);
    const row = node.locator("tr", { hasText: "house/chat" });
    expect(await row.evaluate((tr) => [...tr.children].slice(3, 6).map((td) => td.textContent))).toEqual(["38.1 MiB", expect.stringMatching(/ s ago$/), "yes"]);
    expect(await node.locator("meter").evaluate((m: HTMLMeterElement) => m.value)).toBe(40 * MB);
    expect(await node.locator(".device .muted").textContent()).toBe("38.1 MiB used of 95.4 MiB · 57.2 MiB free");
    expect(await row.locator("button[aria-label='Unpin house/chat on gpu-node-1']").isVisible()).toBe(true);
    await expect.poll(statuses).toContainEqual(["house/chat", "available"]);
    expect(scheduler.fleet.snapshot()[0]!.replicas).toMatchObject([{ model: "house/chat", state: "ready", pinned: true }]);

    // a refusal is shown as the API words it
    await page.click("button[aria-label='Pin house/huge to a node']");
    await expect.poll(() => page.locator("#fleet-error").textContent()).toBe('node: "gpu-node-1" offers 95.4 MiB in all, and a replica of "house/huge" needs 931322.6 GiB');
    await page.screenshot({ path: resolve("test-artifacts", "dashboard-fleet-desktop.png"), fullPage: true });

    await page.setViewportSize({ width: 375, height: 812 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)).toBeLessThanOrEqual(0);
    // the fleet's tables stack their rows on a phone: every action is within the page's width, none scrolled away
    for (const label of ["Unload house/chat from gpu-node-1", "Unpin house/chat on gpu-node-1", "Drain gpu-node-1", "Pin house/code to a node"]) {
      const box = await page.locator(`button[aria-label='${label}']`).boundingBox();
      expect(box, label).not.toBeNull();
      expect(box!.x + box!.width, label).toBeLessThanOrEqual(375);
    }
    await page.screenshot({ path: resolve("test-artifacts", "dashboard-fleet-phone.png"), fullPage: true });
    await page.locator("section", { has: page.locator("#fleet-title") }).screenshot({ path: resolve("test-artifacts", "dashboard-fleet-phone-section.png") });

    // unload it from the page: asked first, then gone from the node
    await page.click("button[aria-label='Unload house/chat from gpu-node-1']");
    await expect.poll(() => node.textContent(), { timeout: 15_000 }).toContain("No replicas.");
    expect(dialogs.at(-1)).toBe("Unload house/chat from gpu-node-1?");
    expect(agent.engine.modelPools).toHaveLength(0);
    await page.close();
  }, 90_000);
});

if (!CHROMIUM)
  describe.skip("dashboard in chromium (skipped: no chromium; apt-get install chromium, or set KILN_CHROMIUM)", () => {
    it("browser suite", () => undefined);
  });
