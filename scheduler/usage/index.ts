export { dayOf, UsageLedger, type UsageDay, type UsageKind, type UsageLedgerOptions, type UsageRow } from "./ledger.js";
export { metered, type UsageOwner } from "./meter.js";
