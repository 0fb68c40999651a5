/** Model weights from a hub: references, checked downloads, and what is installed (`kiln models`, an agent's `--pull`, `--serve ID=hf:…` and on-demand whisper). */
export { ModelHub, type ModelHubOptions, type PullOptions, type Pulled, type InstalledFile } from "./hub.js";
export type { PullProgress } from "./download.js";
export { PullError } from "./errors.js";
export { logProgress } from "./progress.js";
export { parseRef, type ModelRef } from "./refs.js";
export { hubLabel, resolveQuant, resolveUrl, type HubSource } from "./remote.js";
