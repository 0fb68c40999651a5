export { dayOf, UsageLedger, type UsageDay, type UsageKind, type UsageLedgerOptions, type UsageOwner, type UsageRow } from "./ledger.js";
export { MAX_USAGE_DAYS, usageRange } from "./range.js";
