/**
 * Whether this node can run a transcription as asked: the model installed (or, on an instance that
 * fetches models, in its catalog: the job downloads it first), and the models that
 * diarization and translation into languages other than English need. Both ways in (the HTTP API
 * and the fleet link) check with this before a job is queued; each refusal is a 400 naming its field.
 * `check.model: false` leaves the model out (an upload whose model field has not arrived yet).
 */
import { speechModelFor } from "../../models/speech.js";
import { InvalidRequestError, ServiceUnavailableError } from "../../core/errors.js";
import { checkVadModel } from "../asr/vad/index.js";
import type { JobOptions } from "../../speech/options.js";
import type { WhisperPool } from "../asr/whisper.js";

/** What this node can do beyond transcription. */
export interface NodeCapabilities {
  diarization: boolean;
  translation: boolean;
}

export async function checkRunnable(options: JobOptions, whisper: WhisperPool, capabilities: NodeCapabilities, check = { model: true }): Promise<void> {
  if (check.model && !whisper.fetchable(options.model) && !(await whisper.isInstalled(options.model))) {
    const models = await whisper.status();
    const installed = models.filter((m) => m.installed).map((m) => m.name);
    const fetched = models.filter((m) => m.on_demand).map((m) => m.name);
    throw new InvalidRequestError(
      "model_not_installed",
      `model: "${options.model}" is not installed on this instance, which ${fetched.length ? `downloads only ${fetched.join(", ")}` : "does not download models"} (installed: ${installed.join(", ") || "none"})`,
    );
  }
  if (options.speakerDiarization && !capabilities.diarization) {
    throw new InvalidRequestError(
      "diarization_unavailable",
      `speaker_diarization: this instance has no speaker-diarization models (--segmentation-model and --embedding-model, or kiln models pull speech:${speechModelFor("segmentation").name} speech:${speechModelFor("embedding").name})`,
    );
  }
  if (options.translate && options.targetLanguage && options.targetLanguage !== "en" && !capabilities.translation) {
    throw new InvalidRequestError(
      "translation_unavailable",
      `target_language: translation into "${options.targetLanguage}" needs a chat model on this instance (--serve); without one it translates into en only`,
    );
  }
}

/**
 * Whether this node can transcribe at all, checked before an upload is stored: its ffmpeg able to
 * run the pipeline's decode (`ffmpegFault`: why the start check found it could not), its voice-activity
 * model readable and a whisper model installed (or fetched on demand). Throws 503 `engine_unavailable` naming what is
 * missing and the flag that sets it (the operator's fault, not the client's: another node may take it).
 */
export async function checkPipeline(vadModel: string, whisper: WhisperPool, ffmpegFault?: string): Promise<void> {
  const missing: string[] = [];
  if (ffmpegFault) missing.push(`ffmpeg cannot decode here (${ffmpegFault}): install Debian's ffmpeg or set KILN_FFMPEG (--ffmpeg)`);
  await checkVadModel(vadModel).catch((err: Error) => missing.push(`${err.message}`));
  if (!whisper.fetches && !(await whisper.status()).some((m) => m.installed)) missing.push("no whisper model is installed (--whisper-dir)");
  if (missing.length > 0) throw new ServiceUnavailableError("engine_unavailable", `audio: this instance cannot transcribe now: ${missing.join("; ")}; nothing was stored`);
}
