/**
 * The whisper engine process, forked by WhisperEngine: loads Kiln's whisper addon from the
 * prebuilt folder the pool chose (engine/backend.ts), hosts its models (ModelCache) and answers
 * the agent's decode requests by id, streaming segments as whisper finishes them. A native crash here ends this process only; the process ends too when the
 * agent goes (its IPC channel closes).
 */
import { EngineError } from "../errors.js";
import { loadWhisperAddon, type NativeModel, type WhisperAddon } from "./native.js";
import { ModelCache } from "./whisper-models.js";
import { engineParams, type FromEngine, type ToEngine, type WhisperEngineConfig, type WhisperSegment } from "./whisper-protocol.js";

const post = (m: FromEngine) => {
  if (process.connected) process.send!(m);
};

let config: WhisperEngineConfig | undefined;
let models: ModelCache | undefined;
let addon: WhisperAddon | undefined;
/** Why the addon could not be loaded: every decode fails with it. */
let unavailable: Error | undefined;

async function transcribe(model: NativeModel, request: Extract<ToEngine, { kind: "decode" }>, settings: WhisperEngineConfig, native: WhisperAddon): Promise<WhisperSegment[]> {
  const { id, pcm, params } = request;
  post({ kind: "started", id });
  // Greedy, with whisper's temperature fallback unless turned off; then what the request chose.
  return native
    .transcribe(model, pcm, engineParams(settings, params), (segment) => post({ kind: "segment", id, segment }))
    .catch((err: unknown) => {
      throw new EngineError(`whisper failed on this audio: ${err instanceof Error ? err.message : String(err)}`);
    });
}

async function decode(request: Extract<ToEngine, { kind: "decode" }>): Promise<void> {
  try {
    if (unavailable) throw unavailable;
    if (!config || !models || !addon) throw new EngineError("the whisper engine process was not configured");
    const settings = config;
    const native = addon;
    const segments = await models.use(request.model, request.file, (model) => transcribe(model, request, settings, native));
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
    try {
      addon = loadWhisperAddon(m.config.backend).addon;
    } catch (err) {
      unavailable = err instanceof Error ? err : new EngineError(String(err));
      return;
    }
    models = new ModelCache({
      addon,
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
