export { JobService, type JobServiceOptions, type JobView, type StagedUpload } from "./service.js";
export type { JobOptions, JobStatus } from "./store.js";
