/**
 * Diarization error rate against an RTTM file, for any speaker-embedding model.
 *
 *   npm run eval:diarization -- --embedding emb.onnx [--segmentation seg.onnx] [--audio two-speakers.wav --rttm two-speakers.rttm] [--speakers N]
 *   npm run eval:diarization -- --result job.json --rttm two-speakers.rttm      # a job's JSON output
 *
 * Without --result it runs the agent's diarization (sherpa-onnx, worker thread) on the audio.
 * The defaults come from KILN_TEST_DATA (the real pyannote segmentation, two-speakers.wav/.rttm).
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { diarize } from "../agent/asr/index.js";
import { decodeToPcm } from "../agent/asr/ffmpeg.js";
import { speakerLabel } from "../agent/asr/speakers.js";
import { argValue } from "./lib/cli.js";
import { diarizationErrorRate, parseRttm, type Turn } from "./lib/der.js";

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const data = process.env.KILN_TEST_DATA;
  const rttm = argValue(argv, "--rttm") ?? (data ? join(data, "audio", "two-speakers.rttm") : undefined);
  const result = argValue(argv, "--result");
  if (!rttm) {
    console.error("usage: eval-diarization (--embedding emb.onnx [--segmentation seg.onnx] [--audio FILE] | --result job.json) [--rttm FILE] [--speakers N]");
    process.exit(2);
  }
  let hypothesis: Turn[];
  let what: string;
  if (result) {
    const json = JSON.parse(readFileSync(result, "utf8")) as { transcript_with_speakers?: Turn[]; result?: { transcript_with_speakers?: Turn[] } };
    hypothesis = json.transcript_with_speakers ?? json.result?.transcript_with_speakers ?? [];
    what = result;
  } else {
    const embedding = argValue(argv, "--embedding");
    const segmentation = argValue(argv, "--segmentation") ?? (data ? join(data, "models", "pyannote-segmentation-3.0.int8.onnx") : undefined);
    const audio = argValue(argv, "--audio") ?? (data ? join(data, "audio", "two-speakers.wav") : undefined);
    if (!embedding || !segmentation || !audio) {
      console.error("eval-diarization: --embedding is required (and --segmentation/--audio without KILN_TEST_DATA)");
      process.exit(2);
    }
    const pcm = join(mkdtempSync(join(tmpdir(), "kiln-der-")), "audio.f32");
    await decodeToPcm(audio, pcm, { maxSeconds: 4 * 3600, displayName: audio });
    const speakers = argValue(argv, "--speakers");
    const started = Date.now();
    const turns = await diarize(pcm, { segmentation, embedding }, speakers ? { minSpeakers: Number(speakers), maxSpeakers: Number(speakers) } : {});
    hypothesis = turns.map((t) => ({ speaker: speakerLabel(t.speaker), start: t.start, end: t.end }));
    what = `${audio} with ${embedding} (${((Date.now() - started) / 1000).toFixed(2)} s)`;
  }
  const r = diarizationErrorRate(parseRttm(readFileSync(rttm, "utf8")), hypothesis);
  console.log(`hypothesis: ${what}, ${new Set(hypothesis.map((t) => t.speaker)).size} speakers, ${hypothesis.length} turns`);
  console.log(`reference:  ${rttm} (${r.referenceSpeech.toFixed(1)} s of speech)`);
  console.log(`mapping:    ${JSON.stringify(r.mapping)}`);
  console.log(`DER:        ${(r.der * 100).toFixed(1)}%  (missed ${r.missed.toFixed(2)} s, false alarm ${r.falseAlarm.toFixed(2)} s, confusion ${r.confusion.toFixed(2)} s)`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
