/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
/**
 * The web UI on :7860 in a real browser (Debian's chromium through playwright-core, headless):
 * upload, progress to 100 %, the transcript, the SRT download against /api/result, a bad file's
 * message, the token prompt, screenshots at desktop and phone widths, and an accessibility pass.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { tempDir } from "./helpers/fleet.js";
import { makeMedia, QUICK_SPEECH_SECONDS, startTranscription, TEST_EMBEDDING, TEST_SEGMENTATION, twoVoices, type Transcription } from "./helpers/speech.js";

const CHROMIUM = process.env.KILN_CHROMIUM ?? ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"].find((p) => existsSync(p));
const ARTIFACTS = resolve("test-artifacts");

describe.skipIf(!CHROMIUM)("web UI in chromium", () => {
  let browser: Browser;
  let t: Transcription;
  let media: string;

  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    t = await startTranscription({ segmentationModel: TEST_SEGMENTATION, embeddingModel: TEST_EMBEDDING });
    media = tempDir();
    mkdirSync(ARTIFACTS, { recursive: true });
  });
  afterAll(async () => {
    await browser?.close();
    await t?.agent.close();
  });

  async function open(width = 1280, height = 900, base = t.base): Promise<Page> {
    const page = await browser.newPage({ viewport: { width, height }, acceptDownloads: true });
    await page.goto(base);
    return page;
  }

  it("uploads a file, shows progress to 100 %, the transcript, and downloads the SRT that /api/result gives", async () => {
    const page = await open();
    await expect.poll(() => page.locator("#model option").count()).toBe(10);
    await page.setInputFiles("#audio", makeMedia(media, "hello.wav", { seconds: QUICK_SPEECH_SECONDS }));
    await page.selectOption("#format", "srt");
    const [submitted] = await Promise.all([page.waitForResponse((r) => r.url().endsWith("/api/process")), page.click("#submit")]);
    const { handle } = (await submitted.json()) as { handle: string };
    const row = page.locator(".job").first();
    await row.locator(".status", { hasText: "Completed · 100 %" }).waitFor({ timeout: 60_000 });
    expect(await row.locator("progress").getAttribute("value")).toBe("100");
    await page.locator("#result").waitFor({ state: "visible" });
    expect(await page.locator("#transcript .seg").count()).toBeGreaterThan(0);
    const jobId = await row.getAttribute("data-job");

    const [download] = await Promise.all([page.waitForEvent("download"), page.click("[data-download=srt]")]);
    expect(download.suggestedFilename()).toBe("hello.srt");
    const saved = join(media, "download.srt");
    await download.saveAs(saved);
    // The page read the result with the job's handle, as any client must (no token on this instance).
    expect((await fetch(`${t.base}/api/result/${jobId}?format=srt`)).status).toBe(401);
    const expected = await (await fetch(`${t.base}/api/result/${jobId}?format=srt`, { headers: { authorization: `Bearer ${handle}` } })).text();
    expect(readFileSync(saved, "utf8")).toBe(expected);
    expect(await page.locator("#preview").textContent()).toBe(expected);

    await page.screenshot({ path: join(ARTIFACTS, "web-ui-result-desktop.png"), fullPage: true });
    await page.setViewportSize({ width: 375, height: 812 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(ARTIFACTS, "web-ui-result-phone.png"), fullPage: true });
    await page.close();
  }, 90_000);

  it("shows the words finished so far under a long job's bar while it runs, and the transcript once it is done", async () => {
    const page = await open();
    await expect.poll(() => page.locator("#model option").count()).toBe(10);
    // 270 s: nine chunks, whose words come in over about 3 s (200 s took 15: its last chunk sets the fabricated model off through every fallback)
    await page.setInputFiles("#audio", makeMedia(media, "long.wav", { seconds: 270 }));
    await page.click("#submit");
    const row = page.locator(".job").first();
    const partial = row.locator(".partial");
    // words shown while the job still runs: one look at the page, so that its end cannot slip in between
    await page.waitForFunction(
      () => {
        const job = document.querySelector(".job");
        const words = job?.querySelector<HTMLElement>(".partial");
        return Boolean(words && !words.hidden && words.textContent!.trim() && job!.querySelector(".status")!.textContent!.startsWith("Processing"));
      },
      undefined,
      { timeout: 60_000 },
    );
    await row.locator(".status", { hasText: "Completed · 100 %" }).waitFor({ timeout: 120_000 });
    expect(await partial.isHidden()).toBe(true);
    await page.locator("#result").waitFor({ state: "visible" });
    expect(await page.locator("#transcript .seg").count()).toBeGreaterThan(0);
    await page.close();
  }, 150_000);

  it("shows each speaker in its own colour and marks low-confidence words", async () => {
    const page = await open();
    await expect.poll(() => page.locator("#model option").count()).toBe(10);
    await page.setInputFiles("#audio", makeMedia(media, "voices.wav", { seconds: 16, source: twoVoices(16) }));
    await page.check("#speaker_diarization");
    await page.fill("#min_speakers", "2");
    await page.fill("#max_speakers", "2");
    await page.click("#submit");
    await page.locator(".job .status", { hasText: "Completed · 100 %" }).first().waitFor({ timeout: 60_000 });
    await page.locator("#transcript .seg[data-speaker]").first().waitFor();
    const colours = await page.locator("#transcript .speaker").evaluateAll((els) => [...new Set(els.map((e) => `${e.textContent}=${getComputedStyle(e).backgroundColor}`))]);
    const bySpeaker = new Map(colours.map((c) => c.split("=") as [string, string]));
    expect(bySpeaker.size).toBe(2);
    expect(new Set(bySpeaker.values()).size).toBe(2);
    const words = await page
      .locator("#transcript .word")
      .evaluateAll((els) => els.map((e) => ({ low: e.classList.contains("low"), c: Number(e.getAttribute("title")!.split(" ")[1]) })));
    expect(words.length).toBeGreaterThan(0);
    for (const w of words) expect(w.low).toBe(w.c < 0.5);
    await page.close();
  }, 90_000);

  it("shows the server's message for a bad file, and client-side checks beside their field", async () => {
    const page = await open();
    await expect.poll(() => page.locator("#model option").count()).toBe(10);
    const bad = join(media, "notes.mp3");
    writeFileSync(bad, "not audio\n".repeat(100));
    await page.setInputFiles("#audio", bad);
    await page.click("#submit");
    await page.locator(".job.error .status", { hasText: "notes.mp3 is not an audio or video file" }).waitFor({ timeout: 30_000 });

    const one = makeMedia(media, "one.wav", { seconds: 1 });
    await page.setInputFiles(
      "#audio",
      Array.from({ length: 11 }, (_, i) => ({ name: `f${i}.wav`, mimeType: "audio/wav", buffer: readFileSync(one) })),
    );
    await page.click("#submit");
    expect(await page.locator("#err-audio").textContent()).toMatch(/At most 10 files/);
    await page.close();
  }, 60_000);

  it("asks for the agent token once and keeps it for the session", async () => {
    const guarded = await startTranscription({ agentToken: "ui-secret-token-16" });
    try {
      const page = await open(1280, 900, guarded.base);
      await page.locator("#token-dialog[open]").waitFor();
      await page.fill("#token", "ui-secret-token-16");
      await page.click("#token-form button[type=submit]");
      await expect.poll(() => page.locator("#model option").count()).toBe(10);
      expect(await page.locator("#node").textContent()).toMatch(/Jobs0 running, 0 queued/);
      await page.reload();
      await expect.poll(() => page.locator("#model option").count()).toBe(10);
      expect(await page.locator("#token-dialog[open]").count()).toBe(0);
      await page.close();
    } finally {
      await guarded.agent.close();
    }
  });

  it("passes an accessibility check: labelled controls, landmarks and roles, focus in reading order", async () => {
    const page = await open();
    await expect.poll(() => page.locator("#model option").count()).toBe(10);
    const unlabelled = await page.evaluate(() =>
      [...document.querySelectorAll("input, select, textarea, button, progress")]
        .filter((e) => {
          const named =
            (e as HTMLInputElement).labels?.length || e.getAttribute("aria-label") || e.getAttribute("aria-labelledby") || (e.tagName === "BUTTON" && e.textContent?.trim());
          return !named;
        })
        .map((e) => e.id || e.outerHTML.slice(0, 60)),
    );
    expect(unlabelled).toEqual([]);
    expect(await page.locator("main").count()).toBe(1);
    expect(await page.locator("html[lang]").count()).toBe(1);
    expect(await page.locator("h1").count()).toBe(1);
    for (const id of ["err-audio", "err-model", "err-form"]) expect(await page.locator(`#${id}`).getAttribute("role")).toBe("alert");

    const order: string[] = [];
    for (let i = 0; i < 7; i++) {
      await page.keyboard.press("Tab");
      order.push(await page.evaluate(() => document.activeElement?.id ?? ""));
    }
    expect(order).toEqual(["audio", "model", "language", "format", "translate", "speaker_diarization", "submit"]);
    await page.keyboard.press("Shift+Tab");
    await page.keyboard.press("Space"); // toggles "Identify speakers" from the keyboard
    expect(await page.locator("#min_speakers").isEnabled()).toBe(true);
    await page.close();
  });
});
if (!CHROMIUM)
  describe.skip("web UI in chromium (skipped: no chromium; apt-get install chromium, or set KILN_CHROMIUM)", () => {
    it("browser suite", () => undefined);
  });
