export { KeyService, type KeyIdentity, type KeyRecord, type CreateKeyOptions } from "./keys.js";
export { TIERS, isTier, tierAtLeast, requestsPerMinute, type Tier } from "./tiers.js";
export { isValidAccountName, ACCOUNT_NAME_RULE } from "./account-name.js";
