import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { speechModelFor, type SpeechCatalogModel } from "../models/speech.js";
import { WhisperCatalog } from "../models/whisper.js";
import { sha256Hex, startHub, type TestHub } from "../test/helpers/hub.js";
import { tempDir } from "../test/helpers/temp.js";
import { until } from "../test/helpers/fleet.js";
import { ModelHub, PullError, type PullProgress } from "./index.js";

let hub: TestHub;
beforeAll(async () => {
  hub = await startHub();
});
afterAll(() => hub.close());

/** Made-up weights: the hub serves them, the catalog pins them. */
const weights = (bytes: number) => randomBytes(bytes);

const DATA = process.env.KILN_TEST_DATA;

function modelHub(extra: Parameters<WhisperCatalog["extend"]>[0] = [], token?: string, speechModels?: SpeechCatalogModel[]) {
  const whisperDir = tempDir();
  const modelsDir = tempDir();
  const models = new ModelHub({
    source: { url: hub.url, ...(token ? { token } : {}) },
    whisperDir,
    modelsDir,
    catalog: WhisperCatalog.builtin.extend(extra),
    reserveBytes: 0,
    ...(speechModels ? { speechModels } : {}),
  });
  return { models, whisperDir, modelsDir };
}

/** Every file under `dir`, the record and partial folder included. */
const everything = (dir: string): string[] => readdirSync(dir, { recursive: true, encoding: "utf8" }).sort();

const failure = async (p: Promise<unknown>): Promise<PullError> => {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(PullError);
  return err as PullError;
};

describe("kiln models pull from a hub in Hugging Face's layout", () => {
  it("pulls a whisper catalog file, checked against the catalog's sha256, and records it", async () => {
    const body = weights(300_000);
    hub.put("acme/whisper-test", "ggml-tiny-test.bin", { body, sha256: null }, "v2");
    const { models, whisperDir } = modelHub([
      { name: "tiny-test", repo: "acme/whisper-test", file: "ggml-tiny-test.bin", sha256: sha256Hex(body), size_bytes: body.length, languages: 99, revision: "v2" },
    ]);
    const seen: PullProgress[] = [];
    const pulled = await models.pull("whisper:tiny-test", { onProgress: (p) => seen.push(p) });
    expect(pulled).toMatchObject({ ref: "whisper:tiny-test", path: join(whisperDir, "ggml-tiny-test.bin"), sha256: sha256Hex(body), cached: false });
    expect(readFileSync(pulled.path).equals(body)).toBe(true);
    expect(seen.at(-1)).toMatchObject({ downloadedBytes: body.length, totalBytes: body.length });
    // nothing else is left but the record (and the emptied partial folder)
    expect(everything(whisperDir)).toEqual([".kiln-models.json", ".partial", "ggml-tiny-test.bin"]);
    expect(await models.list()).toEqual([{ kind: "whisper", path: pulled.path, size: body.length, sha256: sha256Hex(body), ids: ["tiny-test"], verified: true }]);
    // a file copied in by hand under a catalog name is listed, and said not to be the catalog's
    writeFileSync(join(whisperDir, "ggml-small.bin"), "other weights");
    expect((await models.list()).find((f) => f.path.endsWith("ggml-small.bin"))).toMatchObject({ kind: "whisper", ids: ["small"], verified: false });
  });

  it("pulls a speech model from its pinned commit into the whisper folder under the agent's default name, lists it verified, and refuses other bytes", async () => {
    const body = weights(200_000);
    const pinned: SpeechCatalogModel = {
      name: "vad-test",
      role: "vad",
      repo: "acme/vad",
      revision: "0123abc",
      path: "v5/silero_vad_v5.onnx",
      file: "silero_vad.onnx",
      sha256: sha256Hex(body),
      sizeBytes: body.length,
      licence: "MIT",
    };
    hub.put("acme/vad", "v5/silero_vad_v5.onnx", { body, sha256: null }, "0123abc");
    const { models, whisperDir } = modelHub([], undefined, [pinned, { ...pinned, name: "vad-tampered", sha256: "0".repeat(64), file: "tampered.onnx" }]);
    const pulled = await models.pull("speech:vad-test");
    expect(pulled).toMatchObject({ ref: "speech:vad-test", path: join(whisperDir, "silero_vad.onnx"), sha256: sha256Hex(body), cached: false });
    expect(readFileSync(pulled.path).equals(body)).toBe(true);
    expect((await models.list()).find((f) => f.path === pulled.path)).toEqual({
      kind: "speech",
      path: pulled.path,
      size: body.length,
      sha256: sha256Hex(body),
      ids: ["speech:vad-test"],
      verified: true,
    });
    const err = await failure(models.pull("speech:vad-tampered"));
    expect(err.code).toBe("checksum_mismatch");
    expect(existsSync(join(whisperDir, "tampered.onnx"))).toBe(false);
    expect((await failure(models.pull("speech:nonesuch"))).message).toMatch(/speech:nonesuch is not a speech model Kiln knows \(vad-test, vad-tampered\)/);
  });

  it.skipIf(!DATA)(
    `the built-in speech pins are the real files' (${DATA ? "KILN_TEST_DATA" : "skipped: KILN_TEST_DATA is not set"}): Silero VAD and the pyannote segmentation model pulled and verified`,
    async () => {
      const { models, whisperDir } = modelHub();
      for (const [role, file] of [
        ["vad", "silero_vad.onnx"],
        ["segmentation", "pyannote-segmentation-3.0.int8.onnx"],
      ] as const) {
        const model = speechModelFor(role);
        hub.put(model.repo, model.path, { body: readFileSync(join(DATA!, "models", file)), sha256: null }, model.revision);
        const pulled = await models.pull(`speech:${model.name}`);
        expect(pulled).toMatchObject({ path: join(whisperDir, model.file), sha256: model.sha256, size: model.sizeBytes });
      }
    },
  );

  it("pulls a GGUF by file and by quantization, checked against the hub's x-linked-etag", async () => {
    const body = weights(200_000);
    hub.put("acme/chat-GGUF", "chat-Q4_K_M.gguf", { body });
    hub.manifest("acme/chat-GGUF", "Q4_K_M", "chat-Q4_K_M.gguf");
    const { models, modelsDir } = modelHub();
    const byFile = await models.pull("hf:acme/chat-GGUF/chat-Q4_K_M.gguf");
    expect(byFile.path).toMatch(new RegExp(`^${modelsDir}/hf_acme_chat-GGUF_chat-Q4_K_M\\.[0-9a-f]{12}\\.gguf$`));
    expect(readFileSync(byFile.path).equals(body)).toBe(true);

    const other = modelHub();
    const byQuant = await other.models.pull("hf:acme/chat-GGUF:Q4_K_M");
    expect(byQuant).toMatchObject({ ref: "hf:acme/chat-GGUF:Q4_K_M", sha256: sha256Hex(body), cached: false });
    expect(readFileSync(byQuant.path).equals(body)).toBe(true);
    // the tag's file is recorded: asked again, it is found without the hub
    const before = hub.requests.length;
    expect(await other.models.pull("hf:acme/chat-GGUF:Q4_K_M")).toMatchObject({ path: byQuant.path, cached: true });
    expect(hub.requests.length).toBe(before);
    expect((await other.models.list()).map((f) => f.ids)).toEqual([["hf:acme/chat-GGUF:Q4_K_M"]]);
  });

  it("takes up a download the hub cuts off halfway from its last whole chunk, and ends with the right sha256", async () => {
    // 24 MiB: the downloader keeps its progress in 5-MiB chunks, and resumes from the last whole one
    const body = weights(24 * 1024 ** 2);
    const cutAt = 12 * 1024 ** 2;
    hub.put("acme/cut-GGUF", "cut.gguf", { body, cutAt });
    const { models } = modelHub();
    const pulled = await models.pull("hf:acme/cut-GGUF/cut.gguf");
    expect(pulled.sha256).toBe(sha256Hex(body));
    expect(readFileSync(pulled.path).equals(body)).toBe(true);
    const gets = hub.requests.filter((r) => r.path.endsWith("/cut.gguf") && r.range);
    const cut = gets.findIndex((r) => r.cut);
    expect(cut).toBeGreaterThanOrEqual(0);
    const from = (r: { range?: string }) => Number(/^bytes=(\d+)-/.exec(r.range!)![1]);
    // asked again past the file's start, at a chunk the cut connection had reached
    expect(gets.slice(cut + 1).some((r) => from(r) > 0 && from(r) >= from(gets[cut]!) && from(r) <= cutAt)).toBe(true);
  });

  it("keeps none of the downloader's progress record in a file when its write of the record lands after its final truncate", async () => {
    // ipull writes its progress record after a file's bytes without waiting for it, and cuts it off at the end: the two race
    // (seen once in 300 downloads unforced). Forced here: each record's write waits for its file's truncate.
    const probe = await open(join(tempDir(), "probe"), "w");
    const proto = Object.getPrototypeOf(probe) as { write: (...args: unknown[]) => Promise<unknown>; truncate: (...args: unknown[]) => Promise<void> };
    await probe.close();
    const { write, truncate } = proto;
    const truncated = new WeakMap<object, { done: Promise<void>; release: () => void }>();
    const of = (handle: object) => {
      let t = truncated.get(handle);
      if (!t) {
        let release!: () => void;
        const done = new Promise<void>((r) => (release = r));
        truncated.set(handle, (t = { done, release }));
      }
      return t;
    };
    let held = 0;
    proto.write = function (this: object, buffer: unknown, ...rest: unknown[]) {
      if (buffer instanceof Uint8Array && Buffer.from(buffer.subarray(0, 8)).toString() === '{"part":') {
        held++;
        return of(this).done.then(() => write.call(this, buffer, ...rest)); // right after the truncate, before the file is closed
      }
      return write.call(this, buffer, ...rest);
    };
    proto.truncate = async function (this: object, ...args: unknown[]) {
      await truncate.apply(this, args);
      of(this).release();
    };
    try {
      for (const sha256 of [undefined, null]) {
        const body = weights(60_000);
        const file = `record-${sha256 === null ? "unsigned" : "signed"}.gguf`;
        hub.put("acme/record-GGUF", file, { body, sha256 });
        const { models } = modelHub();
        const pulled = await models.pull(`hf:acme/record-GGUF/${file}`);
        expect(pulled).toMatchObject({ sha256: sha256Hex(body), size: body.length });
        expect(readFileSync(pulled.path).equals(body)).toBe(true);
      }
      expect(held).toBe(2);
    } finally {
      proto.write = write;
      proto.truncate = truncate;
    }
  });

  it("resumes a pull stopped midway at the next pull, fetching only the chunks it lacks", async () => {
    const body = weights(24 * 1024 ** 2);
    hub.put("acme/stop-GGUF", "stop.gguf", { body, bytesPerSecond: 8 * 1024 ** 2 });
    const first = modelHub();
    const stopped = first.models.pull("hf:acme/stop-GGUF/stop.gguf", {
      onProgress: (p) => {
        if (p.downloadedBytes > body.length * 0.75) first.models.close();
      },
    });
    expect((await failure(stopped)).message).toContain("Kiln is shutting down");
    expect(readdirSync(first.modelsDir).filter((f) => f.endsWith(".gguf"))).toEqual([]);
    // listed as a partial download, with what it holds so far
    const [part] = await first.models.list();
    expect(part).toMatchObject({ kind: "partial", sha256: null, verified: null });
    expect(part!.path).toMatch(/\/\.partial\/hf_acme_stop-GGUF_stop\.[0-9a-f]{12}\.gguf\.ipull$/);
    expect(part!.size).toBeGreaterThan(0);
    const asked = hub.requests.length;
    hub.put("acme/stop-GGUF", "stop.gguf", { body });
    const again = new ModelHub({ source: { url: hub.url }, whisperDir: first.whisperDir, modelsDir: first.modelsDir, catalog: WhisperCatalog.builtin, reserveBytes: 0 });
    const pulled = await again.pull("hf:acme/stop-GGUF/stop.gguf");
    expect(pulled.sha256).toBe(sha256Hex(body));
    const ranges = hub.requests.slice(asked).flatMap((r) => (r.range ? [/^bytes=(\d+)-(\d+)$/.exec(r.range)!.slice(1).map(Number) as [number, number]] : []));
    expect(ranges.length).toBeGreaterThan(0);
    // the chunks it kept (whole 5-MiB chunks of three connections, stopped past three quarters) are not asked for again
    expect(ranges.reduce((sum, [from, to]) => sum + to - from + 1, 0)).toBeLessThanOrEqual(body.length * 0.75);
  });

  it("refuses a file whose sha256 is not the catalog's, leaving nothing in place", async () => {
    const body = weights(100_000);
    hub.put("acme/whisper-test", "ggml-wrong.bin", { body, sha256: null });
    const pinned = "a".repeat(64);
    const { models, whisperDir } = modelHub([{ name: "wrong", repo: "acme/whisper-test", file: "ggml-wrong.bin", sha256: pinned, size_bytes: body.length, languages: 99 }]);
    const err = await failure(models.pull("whisper:wrong"));
    expect(err.code).toBe("checksum_mismatch");
    expect(err.message).toContain(`whisper:wrong could not be fetched from ${hub.url}`);
    expect(err.message).toContain(sha256Hex(body));
    expect(everything(whisperDir).filter((f) => f !== ".partial")).toEqual([]);
    expect(await models.cached("whisper:wrong")).toBeUndefined();
  });

  it("refuses a GGUF whose bytes differ from the hub's x-linked-etag, leaving nothing in place", async () => {
    const body = weights(100_000);
    hub.put("acme/bad-GGUF", "bad.gguf", { body, sha256: "b".repeat(64) });
    const { models, modelsDir } = modelHub();
    const err = await failure(models.pull("hf:acme/bad-GGUF/bad.gguf"));
    expect(err.code).toBe("checksum_mismatch");
    expect(everything(modelsDir).filter((f) => f !== ".partial")).toEqual([]);
  });

  it("refuses a file larger than the free disk before a byte is written", async () => {
    hub.put("acme/huge-GGUF", "huge.gguf", { body: weights(1000), announcedSize: 2 ** 50 });
    const { models, modelsDir } = modelHub();
    const err = await failure(models.pull("hf:acme/huge-GGUF/huge.gguf"));
    expect(err.code).toBe("insufficient_disk");
    expect(err.message).toMatch(
      new RegExp(`^hf:acme/huge-GGUF/huge\\.gguf could not be fetched from ${hub.url}: it needs 1125899\\.9 GB more on the disk of .+, which has .+ free`),
    );
    expect(hub.requests.filter((r) => r.path.endsWith("/huge.gguf") && r.method === "GET")).toEqual([]);
    expect(everything(modelsDir).filter((f) => f !== ".partial")).toEqual([]);
  });

  it("shares one download between pulls of the same file", async () => {
    const body = weights(1_000_000);
    hub.put("acme/shared-GGUF", "shared.gguf", { body, bytesPerSecond: 2_000_000 });
    const { models } = modelHub();
    const [a, b] = await Promise.all([models.pull("hf:acme/shared-GGUF/shared.gguf"), models.pull("hf:acme/shared-GGUF/shared.gguf")]);
    expect(a.path).toBe(b.path);
    expect(readFileSync(a.path).equals(body)).toBe(true);
    // one download: the hub was asked about the file once
    expect(hub.requests.filter((r) => r.path.endsWith("/shared.gguf") && r.method === "HEAD")).toHaveLength(1);
  });

  it("sends HF_TOKEN to the hub's origin only: not to the CDN its redirect names", async () => {
    const token = "hf_test_secret_token_redirected";
    const body = weights(6 * 1024 ** 2);
    const cdn = await startHub();
    try {
      cdn.put("cdn", "blob", { body, noHead: true }); // signed for GET: a HEAD is refused

      hub.put("acme/cdn-GGUF", "cdn.gguf", { body, token, redirect: `${cdn.url}/cdn/resolve/main/blob?signature=abc` });
      const pulled = await modelHub([], token).models.pull("hf:acme/cdn-GGUF/cdn.gguf");
      expect(readFileSync(pulled.path).equals(body)).toBe(true);
      expect(hub.requests.filter((r) => r.path.endsWith("/cdn.gguf")).every((r) => r.authorization === `Bearer ${token}`)).toBe(true);
      expect(cdn.requests.filter((r) => r.method === "GET").length).toBeGreaterThan(0);
      expect(cdn.requests.filter((r) => r.authorization !== undefined)).toEqual([]);
    } finally {
      await cdn.close();
    }
  });

  it("refuses a hub that sends more than it announced", async () => {
    hub.put("acme/liar-GGUF", "liar.gguf", { body: weights(200_000), sha256: null, announcedSize: 1000 });
    const { models, modelsDir } = modelHub();
    const liar = await failure(models.pull("hf:acme/liar-GGUF/liar.gguf"));
    expect(liar.code).toBe("checksum_mismatch");
    expect(liar.message).toMatch(/announced 1000 bytes but sends 200000/);
    expect(readdirSync(modelsDir).filter((f) => f.endsWith(".gguf"))).toEqual([]);
  });

  it("pulls every part of a split GGUF, named by any part or by a tag whose manifest names its first part: each checked, kept under llama.cpp's split names, listed and removed as a set", async () => {
    const bodies = [weights(150_000), weights(120_000), weights(60_000)];
    const repoPath = (i: number) => `Q8_0/big-Q8_0-0000${i}-of-00003.gguf`;
    bodies.forEach((body, i) => hub.put("acme/split-GGUF", repoPath(i + 1), { body }));
    hub.manifest("acme/split-GGUF", "Q8_0", repoPath(1));
    const total = bodies.reduce((n, b) => n + b.length, 0);
    const { models, modelsDir } = modelHub();
    const seen: PullProgress[] = [];
    // two references to one set, one download: part 3 names the set as part 1 does
    const [pulled, same] = await Promise.all([
      models.pull("hf:acme/split-GGUF/Q8_0/big-Q8_0-00003-of-00003.gguf", { onProgress: (p) => seen.push(p) }),
      models.pull("hf:acme/split-GGUF/Q8_0/big-Q8_0-00001-of-00003.gguf"),
    ]);
    const ref = "hf:acme/split-GGUF/Q8_0/big-Q8_0-00001-of-00003.gguf";
    expect(pulled.ref).toBe(ref);
    const name = new RegExp(`^${modelsDir}/hf_acme_split-GGUF_big-Q8_0\\.([0-9a-f]{12})-00001-of-00003\\.gguf$`).exec(pulled.path);
    expect(name).not.toBeNull();
    const paths = [1, 2, 3].map((i) => join(modelsDir, `hf_acme_split-GGUF_big-Q8_0.${name![1]}-0000${i}-of-00003.gguf`));
    expect(pulled).toMatchObject({ path: paths[0], sha256: sha256Hex(bodies[0]!), size: bodies[0]!.length, cached: false });
    expect(pulled.parts).toEqual(paths.map((path, i) => ({ path, sha256: sha256Hex(bodies[i]!), size: bodies[i]!.length })));
    expect(same.path).toBe(pulled.path);
    paths.forEach((path, i) => expect(readFileSync(path).equals(bodies[i]!)).toBe(true));
    // each part asked about and fetched once
    for (const i of [1, 2, 3]) expect(hub.requests.filter((r) => r.path.endsWith(repoPath(i)) && r.method === "HEAD")).toHaveLength(1);
    expect(seen.at(-1)).toMatchObject({ downloadedBytes: total, totalBytes: total });
    expect(everything(modelsDir)).toEqual([".kiln-models.json", ".partial", ...paths.map((p) => p.split("/").at(-1)!)]);
    const records = JSON.parse(readFileSync(join(modelsDir, ".kiln-models.json"), "utf8")) as { files: Record<string, { sha256: string; size: number; refs: string[] }> };
    expect(Object.keys(records.files).sort()).toEqual(paths.map((p) => p.split("/").at(-1)!));
    paths.forEach((p, i) => expect(records.files[p.split("/").at(-1)!]).toMatchObject({ sha256: sha256Hex(bodies[i]!), size: bodies[i]!.length, refs: [ref] }));
    expect(await models.list()).toEqual(paths.map((path, i) => ({ kind: "gguf", path, size: bodies[i]!.length, sha256: sha256Hex(bodies[i]!), ids: [ref], verified: null })));

    // installed: found again by any part without the hub, and by the tag its manifest names once asked
    const before = hub.requests.length;
    expect(await models.pull("hf:acme/split-GGUF/Q8_0/big-Q8_0-00002-of-00003.gguf")).toMatchObject({ path: paths[0], cached: true, parts: pulled.parts });
    expect(hub.requests.length).toBe(before);
    expect(await models.pull("hf:acme/split-GGUF:Q8_0")).toMatchObject({ ref: "hf:acme/split-GGUF:Q8_0", path: paths[0], cached: true });
    expect(hub.requests.slice(before).map((r) => r.path)).toEqual(["/v2/acme/split-GGUF/manifests/Q8_0"]);
    expect((await models.list()).map((f) => f.ids)).toEqual(paths.map(() => [ref, "hf:acme/split-GGUF:Q8_0"]));

    // by the tag alone, in another folder
    const other = modelHub();
    const byTag = await other.models.pull("hf:acme/split-GGUF:Q8_0");
    expect(byTag.parts?.map((p) => p.sha256)).toEqual(bodies.map(sha256Hex));
    expect(await other.models.cached("hf:acme/split-GGUF:Q8_0")).toBe(byTag.path);

    // removed as a set, by any of its references (or a part's file name)
    expect((await models.remove("hf:acme/split-GGUF/Q8_0/big-Q8_0-00002-of-00003.gguf")).sort()).toEqual(paths);
    expect(everything(modelsDir)).toEqual([".kiln-models.json", ".partial"]);
    expect(JSON.parse(readFileSync(join(modelsDir, ".kiln-models.json"), "utf8"))).toEqual({ files: {} });
    expect((await other.models.remove(byTag.parts![2]!.path.split("/").at(-1)!)).length).toBe(3);
    expect(await other.models.cached("hf:acme/split-GGUF:Q8_0")).toBeUndefined();

    for (const bad of ["hf:acme/split-GGUF/big-00000-of-00003.gguf", "hf:acme/split-GGUF/big-00004-of-00003.gguf"]) {
      expect((await failure(models.pull(bad))).code, bad).toBe("bad_ref");
    }
  });

  it("refuses a split GGUF with a tampered part, leaving nothing usable; the next pull fetches only what it lacks", async () => {
    const bodies = [weights(100_000), weights(100_000), weights(100_000)];
    const file = (i: number) => `tampered-0000${i}-of-00003.gguf`;
    hub.put("acme/tampered-GGUF", file(1), { body: bodies[0]! });
    hub.put("acme/tampered-GGUF", file(2), { body: bodies[1]!, sha256: sha256Hex(weights(10)) });
    hub.put("acme/tampered-GGUF", file(3), { body: bodies[2]! });
    const { models, modelsDir } = modelHub();
    const ref = `hf:acme/tampered-GGUF/${file(1)}`;
    const err = await failure(models.pull(ref));
    expect(err.code).toBe("checksum_mismatch");
    expect(err.message).toMatch(
      new RegExp(
        `^${ref} could not be fetched from ${hub.url}: part 2 of 3 \\(acme/tampered-GGUF/resolve/main/${file(2)}\\) has sha256 ${sha256Hex(bodies[1]!)}, not [0-9a-f]{64}; it was deleted$`,
      ),
    );
    // nothing in place: no part is in the folder, the reference is not installed
    expect(readdirSync(modelsDir).filter((f) => f.endsWith(".gguf"))).toEqual([]);
    expect(await models.cached(ref)).toBeUndefined();
    // the checked first part waits in .partial/ (listed as partial); the third was never fetched
    expect((await models.list()).map((f) => [f.kind, f.path.split("/").at(-1)])).toEqual([["partial", expect.stringMatching(/-00001-of-00003\.gguf$/)]]);
    expect(hub.requests.filter((r) => r.path.endsWith(file(3)) && r.method === "GET")).toEqual([]);

    hub.put("acme/tampered-GGUF", file(2), { body: bodies[1]! });
    const fetched = () => hub.requests.filter((r) => r.method === "GET" && r.path.endsWith(file(1))).length;
    const firstFetches = fetched();
    const pulled = await models.pull(ref);
    expect(fetched()).toBe(firstFetches);
    expect(pulled.parts!.map((p) => readFileSync(p.path).equals(bodies[pulled.parts!.indexOf(p)]!))).toEqual([true, true, true]);
    expect(everything(modelsDir).filter((f) => f !== ".partial" && f !== ".kiln-models.json")).toHaveLength(3);
    expect(Object.keys((JSON.parse(readFileSync(join(modelsDir, ".kiln-models.json"), "utf8")) as { files: object }).files)).toHaveLength(3);
  });

  it("refuses a split GGUF the disk cannot hold, every part's bytes counted, before a byte of any part is written", async () => {
    hub.put("acme/huge-split-GGUF", "huge-00001-of-00002.gguf", { body: weights(1000) });
    hub.put("acme/huge-split-GGUF", "huge-00002-of-00002.gguf", { body: weights(1000), announcedSize: 2 ** 50 });
    const { models, modelsDir } = modelHub();
    const err = await failure(models.pull("hf:acme/huge-split-GGUF/huge-00002-of-00002.gguf"));
    expect(err.code).toBe("insufficient_disk");
    expect(err.message).toMatch(/it needs 1125899\.9 GB more on the disk of/);
    expect(hub.requests.filter((r) => r.path.includes("/huge-0000") && r.method === "GET")).toEqual([]);
    expect(everything(modelsDir).filter((f) => f !== ".partial")).toEqual([]);
  });

  it("waits while another live process holds a file's lock, and takes over a lock whose process is gone or that nobody touched", async () => {
    const body = weights(1000);
    hub.put("acme/locked-GGUF", "locked.gguf", { body });
    const { models, modelsDir } = modelHub();
    const name = (await models.pull("hf:acme/locked-GGUF/locked.gguf")).path.split("/").at(-1)!;
    const lockFile = join(modelsDir, ".partial", `${name}.lock`);
    const asked = () => hub.requests.filter((r) => r.path.endsWith("/locked.gguf")).length;

    await models.remove("hf:acme/locked-GGUF/locked.gguf");
    writeFileSync(lockFile, "1 another-process"); // pid 1 is alive: another process downloads it
    const before = asked();
    let done = false;
    const waiting = models.pull("hf:acme/locked-GGUF/locked.gguf").then((p) => ((done = true), p));
    await new Promise((r) => setTimeout(r, 1500));
    expect(done).toBe(false);
    expect(asked()).toBe(before); // it waits without asking the hub
    rmSync(lockFile); // the other process is done
    expect((await waiting).sha256).toBe(sha256Hex(body));

    for (const [content, age] of [
      ["999999999 gone", 0], // its process is gone
      ["1 reused-pid", 180], // a live pid, but nobody touched it for three minutes: a reused pid
    ] as const) {
      await models.remove("hf:acme/locked-GGUF/locked.gguf");
      writeFileSync(lockFile, content);
      const then = new Date(Date.now() - age * 1000);
      utimesSync(lockFile, then, then);
      expect((await models.pull("hf:acme/locked-GGUF/locked.gguf")).sha256, content).toBe(sha256Hex(body));
      expect(existsSync(lockFile)).toBe(false);
    }
  });

  it("keeps two GGUFs apart whose names alone would collide, and finds a tag's file again when its record went stale", async () => {
    const one = weights(1000);
    const two = weights(1000);
    hub.put("acme/b_c", "x.gguf", { body: one });
    hub.put("acme/b", "c_x.gguf", { body: two });
    const { models, modelsDir } = modelHub();
    const a = await models.pull("hf:acme/b_c/x.gguf");
    const b = await models.pull("hf:acme/b/c_x.gguf");
    expect(a.path).not.toBe(b.path);
    expect(readFileSync(a.path).equals(one) && readFileSync(b.path).equals(two)).toBe(true);

    hub.put("acme/tag-GGUF", "tag-Q4_K_M.gguf", { body: one });
    hub.manifest("acme/tag-GGUF", "Q4_K_M", "tag-Q4_K_M.gguf");
    const tagged = await models.pull("hf:acme/tag-GGUF:Q4_K_M");
    rmSync(tagged.path); // deleted by hand: the record still names it
    const again = await models.pull("hf:acme/tag-GGUF:Q4_K_M");
    expect(again).toMatchObject({ path: tagged.path, cached: false });
    // pulled by its path, then asked for by its tag: found, not fetched again
    hub.put("acme/both-GGUF", "both-Q4_K_M.gguf", { body: two });
    hub.manifest("acme/both-GGUF", "Q4_K_M", "both-Q4_K_M.gguf");
    const byPath = await models.pull("hf:acme/both-GGUF/both-Q4_K_M.gguf");
    const asked = hub.requests.filter((r) => r.path.endsWith("/both-Q4_K_M.gguf")).length;
    expect(await models.pull("hf:acme/both-GGUF:Q4_K_M")).toMatchObject({ path: byPath.path, cached: true });
    expect(hub.requests.filter((r) => r.path.endsWith("/both-Q4_K_M.gguf")).length).toBe(asked);
    expect((await models.list()).find((f) => f.path === byPath.path)?.ids).toEqual(["hf:acme/both-GGUF/both-Q4_K_M.gguf", "hf:acme/both-GGUF:Q4_K_M"]);
    expect(readdirSync(modelsDir).filter((f) => f.endsWith(".gguf"))).toHaveLength(4);
  });

  it("stops a download when its only caller stops waiting, keeping the part to resume", async () => {
    const body = weights(24 * 1024 ** 2);
    hub.put("acme/cancel-GGUF", "cancel.gguf", { body, bytesPerSecond: 8 * 1024 ** 2 });
    const { models, modelsDir } = modelHub();
    const stop = new AbortController();
    const pull = models.pull("hf:acme/cancel-GGUF/cancel.gguf", {
      signal: stop.signal,
      onProgress: (p) => {
        if (p.downloadedBytes > 16 * 1024 ** 2) stop.abort(new Error("the job was cancelled")); // past a whole 5-MiB chunk of each connection: the part holds bytes
      },
    });
    await expect(pull).rejects.toThrow("the job was cancelled");
    await until(async () => (await models.progress("hf:acme/cancel-GGUF/cancel.gguf")) === undefined);
    // nothing more is fetched: what the hub sent for the file stops growing, short of the whole file
    const sent = () => hub.sentTo.get("/acme/cancel-GGUF/resolve/main/cancel.gguf") ?? 0;
    let last = -1;
    await until(
      async () => {
        const now = sent();
        const still = now === last;
        last = now;
        await new Promise((r) => setTimeout(r, 400));
        return still;
      },
      10_000,
      "the transfer to stop",
    );
    expect(sent()).toBeLessThan(body.length);
    expect(readdirSync(join(modelsDir, ".partial")).some((f) => f.endsWith(".ipull"))).toBe(true);
    // removed by the name list shows
    const [part] = await models.list();
    expect(await models.remove(part!.path.split("/").at(-1)!)).toEqual([part!.path]);
    expect(await models.list()).toEqual([]);
  });

  it("a pull right after a stopped one starts a download of its own, not joining the one winding down; two names for one file share one", async () => {
    const body = weights(12 * 1024 ** 2);
    hub.put("acme/again-GGUF", "again.gguf", { body, bytesPerSecond: 8 * 1024 ** 2 });
    const { models } = modelHub();
    const stop = new AbortController();
    const first = models.pull("hf:acme/again-GGUF/again.gguf", { signal: stop.signal, onProgress: () => stop.abort(new Error("cancelled")) });
    await expect(first).rejects.toThrow("cancelled");
    expect((await models.pull("hf:acme/again-GGUF/again.gguf", { signal: AbortSignal.timeout(60_000) })).sha256).toBe(sha256Hex(body));

    const weightsOf = weights(1000);
    hub.put("acme/whisper-test", "ggml-twice.bin", { body: weightsOf, sha256: null, bytesPerSecond: 20_000 });
    const entry = (name: string) => ({ name, repo: "acme/whisper-test", file: "ggml-twice.bin", sha256: sha256Hex(weightsOf), size_bytes: weightsOf.length, languages: 99 });
    const twice = modelHub([entry("one"), entry("two")]);
    const [a, b] = await Promise.all([twice.models.pull("whisper:one"), twice.models.pull("whisper:two")]);
    expect(a.path).toBe(b.path);
    expect(hub.requests.filter((r) => r.path.endsWith("/ggml-twice.bin") && r.method === "HEAD")).toHaveLength(1);
    const record = JSON.parse(readFileSync(join(twice.whisperDir, ".kiln-models.json"), "utf8")) as { files: Record<string, { refs: string[] }> };
    expect(record.files["ggml-twice.bin"]!.refs.sort()).toEqual(["whisper:one", "whisper:two"]);
  });

  it("stops a transfer that sends nothing for stallSeconds, tries again from a fresh address, and fails saying so", async () => {
    hub.put("acme/stall-GGUF", "stall.gguf", { body: weights(12 * 1024 ** 2), stallAt: 1024 ** 2 });
    const { models, modelsDir } = modelHub();
    const stalling = new ModelHub({ source: { url: hub.url }, whisperDir: tempDir(), modelsDir, catalog: WhisperCatalog.builtin, reserveBytes: 0, stallSeconds: 1 });
    const err = await failure(stalling.pull("hf:acme/stall-GGUF/stall.gguf"));
    expect(err.code).toBe("hub_unreachable");
    expect(err.message).toMatch(/the transfer failed 3 times \(no byte arrived for 1 s\); run the pull again to resume it$/);
    // each try asked the hub where the file is again
    expect(hub.requests.filter((r) => r.path.endsWith("/stall.gguf") && r.method === "HEAD")).toHaveLength(3);
    expect(await models.cached("hf:acme/stall-GGUF/stall.gguf")).toBeUndefined();
  });

  it("sends HF_TOKEN to the hub for a gated file, and never puts it in a message", async () => {
    const token = "hf_test_secret_token_0123456789";
    const body = weights(50_000);
    hub.put("acme/gated-GGUF", "gated.gguf", { body, token });
    const without = await failure(modelHub().models.pull("hf:acme/gated-GGUF/gated.gguf"));
    expect(without.code).toBe("hub_refused");
    expect(without.message).toContain("a gated repository needs HF_TOKEN");
    const { models } = modelHub([], token);
    const pulled = await models.pull("hf:acme/gated-GGUF/gated.gguf");
    expect(readFileSync(pulled.path).equals(body)).toBe(true);
    const wrong = await failure(modelHub([], "hf_wrong_token_0123456789").models.pull("hf:acme/gated-GGUF/gated.gguf"));
    expect(wrong.message).not.toContain("hf_wrong_token");
  });

  it("removes an installed file with its record, and refuses references that would leave the folder", async () => {
    const body = weights(10_000);
    hub.put("acme/rm-GGUF", "rm.gguf", { body });
    const { models, modelsDir } = modelHub();
    const pulled = await models.pull("hf:acme/rm-GGUF/rm.gguf");
    expect(await models.remove("hf:acme/rm-GGUF/rm.gguf")).toEqual([pulled.path]);
    // a whisper model copied in by hand under its older name (ggml-<name>.bin) counts as installed
    const whisper = modelHub();
    writeFileSync(join(whisper.whisperDir, "ggml-large.bin"), "weights");
    expect(await whisper.models.cached("whisper:large")).toBe(join(whisper.whisperDir, "ggml-large.bin"));
    expect(existsSync(pulled.path)).toBe(false);
    expect(JSON.parse(readFileSync(join(modelsDir, ".kiln-models.json"), "utf8"))).toEqual({ files: {} });
    for (const ref of ["hf:acme/rm-GGUF/../../etc/passwd.gguf", "hf:../x/y.gguf", "whisper:../../x", "hf:acme/rm-GGUF/.hidden.gguf", "hf:acme/rm-GGUF/a.gguf#../main"]) {
      expect((await failure(models.pull(ref))).code, ref).toBe("bad_ref");
    }
    expect((await failure(models.remove("../.kiln-models.json"))).code).toBe("bad_ref");
  });
});
