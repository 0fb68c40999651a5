export { StagingBudget } from "./budget.js";
export {
  JobService,
  MAX_PAGE,
  MAX_WATCHERS_PER_JOB,
  type JobEvent,
  type JobList,
  type JobServiceOptions,
  type JobView,
  type StagedUpload,
  type SubmittedJob,
  type UploadTicket,
} from "./service.js";
export type { JobOptions, JobStatus } from "./store.js";
export { checkPipeline, checkRunnable, type NodeCapabilities } from "./check.js";
