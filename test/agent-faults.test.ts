/**
 * One agent doing chat and transcription at once: the slots its translations take are the
 * scheduler's to see, and a crash of a job's engine process fails that job alone while another job
 * and a chat completion on the same agent finish. Real scheduler, agent, engines and child processes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentHandle } from "../agent/index.js";
import type { SchedulerHandle } from "../scheduler/index.js";
import { httpBase, inProcessAgent, inProcessScheduler, MODEL_ID, postChat, tempDir, until, waitForAgents } from "./helpers/fleet.js";
import { makeMedia, QUICK_SPEECH_SECONDS, TEST_VAD, TEST_WHISPER_DIR, twoVoices, upload, waitForJob } from "./helpers/speech.js";

let scheduler: SchedulerHandle;
let key: string;
let media: string;

beforeAll(async () => {
  scheduler = await inProcessScheduler();
  // Enough requests a minute for the first test's chat loop on a slow machine (it must not leave the second one a 429).
  key = (await scheduler.keys.create({ account: "acme", tier: "enterprise", rpm: 1_000_000 })).token;
  media = tempDir();
});
afterAll(() => scheduler?.close());

const chat = (content: string) => postChat(httpBase(scheduler), key, { model: MODEL_ID, messages: [{ role: "user", content }], max_tokens: 16, temperature: 0 });

describe("translation and chat on one node", () => {
  let agent: AgentHandle;
  beforeAll(async () => {
    agent = await inProcessAgent(scheduler, { sequences: "1", whisperDir: TEST_WHISPER_DIR, vadModel: TEST_VAD, asrParallel: "1", asrThreads: "1" });
    await waitForAgents(scheduler, 1);
  });
  afterAll(() => agent?.close());

  // That the scheduler then queues chat instead of dispatching into the taken slot is shown,
  // deterministically, by the fleet's unit test; here, that the slot really reaches it over gRPC.
  it("a translation's slot reaches the scheduler (heartbeat local_busy_slots) while chat shares the one-slot node; every chat completes", async () => {
    const base = `http://127.0.0.1:${agent.http.port}`;
    // no temperature fallback: the fabricated model's noise fails every fallback test (each window decoded six times over); the translation is what takes the slot
    const job = await upload(base, [makeMedia(media, "talk.wav", { seconds: 24, source: twoVoices(24) })], {
      translate: "true",
      target_language: "de",
      source_language: "en",
      temperature_increment: "0",
    });
    expect(job.status).toBe(202);
    let done = false;
    let sawLocal = false;
    const watch = (async () => {
      while (!done) {
        const pool = scheduler.fleet.snapshot()[0]?.pools[0];
        if (pool && pool.local > 0) sawLocal = true;
        await new Promise((r) => setImmediate(r));
      }
    })();
    const finished = waitForJob(base, job.body.job_id, 120_000).finally(() => {
      done = true;
    });
    // One chat after another while the job runs, so some meet a translation holding the only slot.
    const chats: { status: number }[] = [];
    while (!done) chats.push(await chat(`hello ${chats.length}`));
    const { view } = await finished;
    await watch;
    expect(view.status, view.error).toBe("completed");
    expect(view.result.translated_to).toBe("de");
    for (const r of chats) expect(r.status).toBe(200);
    expect(sawLocal).toBe(true);
    expect(agent.engine.modelPools[0]!.peakBusy).toBe(1);
    expect(scheduler.fleet.snapshot()[0]!.pools[0]).toMatchObject({ slots: 1, local: 0, inflight: 0 });
  }, 180_000);
});

describe("a crash of a job's engine process", () => {
  let agent: AgentHandle;
  beforeAll(async () => {
    agent = await inProcessAgent(scheduler, { sequences: "2", whisperDir: TEST_WHISPER_DIR, vadModel: TEST_VAD, asrJobs: "2", asrParallel: "2", asrThreads: "2" });
    await waitForAgents(scheduler, 1);
  });
  afterAll(() => agent?.close());

  it("fails that job alone: another job and a chat completion on the same agent finish, and the crashed engine is never used again", async () => {
    const base = `http://127.0.0.1:${agent.http.port}`;
    const victim = await upload(base, [makeMedia(media, "victim.wav", { seconds: 180 })]);
    const bystander = await upload(base, [makeMedia(media, "bystander.wav", { seconds: 40 })]);
    expect([victim.status, bystander.status]).toEqual([202, 202]);
    let engine: { pid: number } | undefined;
    await until(
      () => {
        engine = agent.whisper.engines().find((e) => e.label === victim.body.job_id);
        return engine !== undefined && agent.whisper.engines().some((e) => e.label === bystander.body.job_id);
      },
      60_000,
      "both jobs to have their engine processes",
    );
    process.kill(engine!.pid, "SIGKILL");

    const answer = await chat("still here?");
    const [v, b] = await Promise.all([waitForJob(base, victim.body.job_id, 120_000), waitForJob(base, bystander.body.job_id, 120_000)]);
    expect(v.view.status).toBe("error");
    expect(v.view.error).toBe("engine fault: the whisper engine process crashed (SIGKILL)");
    expect(b.view.status, b.view.error).toBe("completed");
    expect(b.view.result.segments.length).toBeGreaterThan(0);
    expect(answer.status).toBe(200);
    expect(agent.links?.state).toBe("connected");

    const next = await upload(base, [makeMedia(media, "next.wav", { seconds: QUICK_SPEECH_SECONDS })]);
    expect((await waitForJob(base, next.body.job_id, 60_000)).view.status).toBe("completed");
    expect(agent.whisper.engines().map((e) => e.pid)).not.toContain(engine!.pid);
  }, 240_000);
});
