/**
 * The VAD worker process (engine/task.ts): runs sherpa-onnx's Silero detector over a PCM file,
 * off the agent's event loop (the detector is synchronous), posting progress and, at the end,
 * the speech spans.
 */
import { SAMPLE_RATE } from "../ffmpeg.js";
import { PcmFile } from "../pcm.js";
import { loadSherpa } from "../sherpa.js";
import { serveTask } from "../engine/task.js";
import type { SpeechSpan, VadRequest } from "./protocol.js";

const WINDOW = 512;
/** Samples read from disk per step (10 s); a multiple of the window. */
const BLOCK = WINDOW * 320;

async function main(request: VadRequest, onProgress: (fraction: number) => void): Promise<SpeechSpan[]> {
  const vad = new (loadSherpa().Vad)(
    {
      sileroVad: {
        model: request.model,
        threshold: request.threshold,
        minSilenceDuration: request.minSilenceSeconds,
        minSpeechDuration: request.minSpeechSeconds,
        windowSize: WINDOW,
        maxSpeechDuration: request.maxSpeechSeconds,
      },
      sampleRate: SAMPLE_RATE,
      numThreads: 1,
      debug: false,
    },
    Math.ceil(request.maxSpeechSeconds) + 30,
  );
  const spans: SpeechSpan[] = [];
  const drain = () => {
    while (!vad.isEmpty()) {
      const s = vad.front(false);
      spans.push({ start: s.start, end: s.start + s.samples.length });
      vad.pop();
    }
  };
  const pcm = await PcmFile.open(request.pcmPath);
  try {
    for (let at = 0; at < pcm.samples; at += BLOCK) {
      const block = await pcm.read(at, at + BLOCK);
      for (let i = 0; i < block.length; i += WINDOW) {
        vad.acceptWaveform(block.subarray(i, i + WINDOW));
        drain();
      }
      onProgress(Math.min(pcm.samples, at + BLOCK) / pcm.samples);
    }
    vad.flush();
    drain();
  } finally {
    await pcm.close();
  }
  return spans;
}

serveTask(main);
