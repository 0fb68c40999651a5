/**
 * Probes one prebuilt folder's whisper addon (engine/backend.ts): loads it, registers the folder's
 * ggml backends, and answers with the devices they found. Forked with KILN_WHISPER_KIND set.
 */
import type { PrebuiltKind } from "../../../core/prebuilt.js";
import { loadWhisperAddon } from "./native.js";

try {
  const { devices } = loadWhisperAddon(process.env.KILN_WHISPER_KIND as PrebuiltKind);
  process.send!({ devices }, () => process.exit(0));
} catch (err) {
  process.send!({ error: err instanceof Error ? err.message : String(err) }, () => process.exit(0));
}
