/// <reference lib="dom" />
/**
 * The scheduler's dashboard in a real browser (Debian's chromium through playwright-core):
 * sign in with the admin token, create a key (shown once), create a filesystem MCP
 * configuration, press Test and see its tools. Plus the admin API's guard.
 */
import { existsSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SchedulerHandle } from "../scheduler/index.js";
import { httpBase, inProcessScheduler, tempDir } from "./helpers/fleet.js";

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

describe.skipIf(!CHROMIUM)("dashboard in chromium", () => {
  let browser: Browser;
  let scheduler: SchedulerHandle;
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    scheduler = await inProcessScheduler({ adminToken: ADMIN });
  });
  afterAll(async () => {
    await browser?.close();
    await scheduler?.close();
  });

  it("signs in, creates a key, creates a filesystem configuration and tests it", async () => {
    const root = tempDir();
    writeFileSync(join(root, "guide.md"), "# guide");
    const page = await browser.newPage();
    await page.goto(`${httpBase(scheduler)}/dashboard`);
    await page.fill("#admin-token", ADMIN);
    await page.click("#sign-in-form button[type=submit]");
    await page.locator("#signed-in").waitFor();

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
    // Each type has its own fields, from its template; the JSON follows them.
    await page.selectOption("#mcp-type", "rest_api");
    for (const id of ["field-base_url", "field-authentication-key_env", "field-endpoints-0-method"]) expect(await page.locator(`#${id}`).count()).toBe(1);
    await page.selectOption("#mcp-type", "filesystem");
    await page.fill("#mcp-name", "docs");
    await page.fill("#field-root_path", root);
    await page.fill("#field-permissions-allowed_extensions", ".md");
    expect(JSON.parse(await page.locator("#mcp-config").inputValue())).toMatchObject({ root_path: root, permissions: { read_only: true, allowed_extensions: [".md"] } });
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
});
if (!CHROMIUM) describe.skip("dashboard in chromium (skipped: no chromium; apt-get install chromium, or set KILN_CHROMIUM)", () => { it("browser suite", () => undefined); });
