/** The throwaway database servers the suites start (`scripts/lib/servers.ts`, shared with the benchmarks). */
export * from "../../scripts/lib/servers.js";
