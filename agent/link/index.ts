/** The agent's links to its schedulers: one `FleetLink` per scheduler (`./link.ts`), `SchedulerLinks` over them all. */
export { FleetLink, type FleetLinkOptions, type LinkPeers, type LinkState } from "./link.js";
export { Backoff } from "./backoff.js";
export { FleetTranscriptions, type FleetTranscriptionsOptions } from "./transcriptions.js";
export { SchedulerLinks, type SchedulerLinksOptions } from "./schedulers.js";
