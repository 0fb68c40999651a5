import { appendFile, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { tempDir } from "../../test/helpers/temp.js";
import { Checkpoint } from "./checkpoint.js";

const chunk = (index: number) => ({
  index,
  start: index * 480_000,
  samples: 480_000,
  seconds: 30,
  segments: [{ start: index * 30, end: index * 30 + 2, text: `chunk ${index}`, words: [] }],
  lang: "en",
});

describe("Checkpoint", () => {
  it("keeps the chunks a run finished; a record cut short by a crash is dropped and does not swallow the next run's first", async () => {
    const dir = tempDir();
    const first = new Checkpoint(dir);
    await first.saveChunk(chunk(0));
    await first.saveChunk(chunk(1));
    await appendFile(join(dir, "chunks.jsonl"), '\n{"index":2,"seconds":30,"segm'); // the crash, mid-write
    const resumed = new Checkpoint(dir);
    expect([...(await resumed.chunks()).keys()]).toEqual([0, 1]);
    await resumed.saveChunk(chunk(2));
    const kept = await new Checkpoint(dir).chunks();
    expect([...kept.keys()]).toEqual([0, 1, 2]);
    expect(kept.get(2)!.segments[0]!.text).toBe("chunk 2");
  });

  it("counts decoded audio only when it is whole: the marker written and the file the size it names", async () => {
    const dir = tempDir();
    const cp = new Checkpoint(dir);
    await writeFile(cp.pcmPath, Buffer.alloc(4 * 1000));
    expect(await cp.decoded()).toBeUndefined(); // ffmpeg was still writing: no marker
    await cp.saveDecoded(1000);
    expect(await cp.decoded()).toBe(1000);
    await writeFile(cp.pcmPath, Buffer.alloc(4 * 999));
    expect(await cp.decoded()).toBeUndefined();
    expect((await readdir(dir)).sort()).toEqual(["audio.f32", "decoded.json"]); // written whole, no .partial left
  });

  it("treats a kept file that does not parse as absent: the step runs again", async () => {
    const dir = tempDir();
    await writeFile(join(dir, "speech.json"), '[{"start":0,');
    await writeFile(join(dir, "transcript.json"), "{}");
    const cp = new Checkpoint(dir);
    expect(await cp.speech()).toBeUndefined();
    expect(await cp.transcript()).toBeUndefined();
    await cp.saveSpeech([{ start: 0, end: 16000 }]);
    expect(await cp.speech()).toEqual([{ start: 0, end: 16000 }]);
  });

  it("tells each step it keeps", async () => {
    const cp = new Checkpoint(tempDir());
    let saved = 0;
    cp.onSaved = () => saved++;
    await cp.saveDecoded(10);
    await cp.saveChunk(chunk(0));
    await cp.saveTranslated({ id: 0, text: "hallo" });
    expect(saved).toBe(3);
    expect(await cp.translated()).toEqual(new Map([[0, "hallo"]]));
  });
});
