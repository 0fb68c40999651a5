/**
 * The whisper engine process, forked by WhisperEngine: hosts smart-whisper's native models
 * (ModelCache) and answers the agent's decode requests by id, streaming segments as whisper
 * finishes them. A native crash here ends this process only; the process ends too when the
 * agent goes (its IPC channel closes).
 */
import { EngineError } from "../errors.js";
import { smartWhisper, type NativeModel } from "./smart-whisper.js";
import { ModelCache } from "./whisper-models.js";
import type { FromEngine, ToEngine, WhisperEngineConfig, WhisperSegment } from "./whisper-protocol.js";

const post = (m: FromEngine) => {
  if (process.connected) process.send!(m);
};

let config: WhisperEngineConfig | undefined;
let models: ModelCache | undefined;

async function transcribe(model: NativeModel, request: Extract<ToEngine, { kind: "decode" }>, settings: WhisperEngineConfig): Promise<WhisperSegment[]> {
  const { id, pcm, params } = request;
  post({ kind: "started", id });
  const task = await smartWhisper().TranscribeTask.run(model, pcm, {
    format: "detail",
    token_timestamps: true,
    strategy: 0, // greedy, with whisper's temperature fallback
    n_threads: settings.threads,
    translate: params.translate,
    language: params.language ?? "auto",
    suppress_non_speech_tokens: true,
    no_context: true,
    ...(settings.temperatureFallback ? {} : { temperature_inc: 0 }),
  });
  task.on("transcribed", (segment) => post({ kind: "segment", id, segment }));
  const result = await task.result;
  if (!Array.isArray(result)) throw new EngineError(`whisper failed on this audio: ${result instanceof Error ? result.message : String(result)}`);
  return result;
}

async function decode(request: Extract<ToEngine, { kind: "decode" }>): Promise<void> {
  try {
    if (!config || !models) throw new EngineError("the whisper engine process was not configured");
    const settings = config;
    const segments = await models.use(request.model, request.file, (model) => transcribe(model, request, settings));
    post({ kind: "done", id: request.id, segments });
  } catch (err) {
    post({ kind: "error", id: request.id, message: err instanceof Error ? err.message : String(err) });
  }
}

// The agent has gone: end at once. (`process.exit` would wait for the decodes running on libuv's
// thread pool to finish, minutes of work nobody will read.)
process.on("disconnect", () => process.kill(process.pid, "SIGKILL"));
process.on("message", (m: ToEngine) => {
  if (m.kind === "configure") {
    config = m.config;
    models = new ModelCache({
      gpu: m.config.gpu,
      memoryBudgetMb: m.config.memoryBudgetMb,
      parallel: m.config.parallel,
      log: (level, fields, message) => post({ kind: "log", level, fields, message }),
      onChange: (loaded) => post({ kind: "models", loaded }),
    });
  } else if (m.kind === "decode") {
    void decode(m);
  }
});
post({ kind: "ready" });
