/** The days a usage report covers, from a request's `start_date` and `end_date` (`GET /v1/usage`, the dashboard). */
import { InvalidRequestError } from "../../core/errors.js";
import { dayOf } from "./ledger.js";

const DAY_MS = 86_400_000;
/** Most days one report covers. */
export const MAX_USAGE_DAYS = 366;

/** A `YYYY-MM-DD` day that exists, as Unix ms at its UTC midnight; 400 naming `field` otherwise. */
function day(raw: string, field: "start_date" | "end_date"): number {
  const ms = /^\d{4}-\d{2}-\d{2}$/.test(raw) ? Date.parse(`${raw}T00:00:00Z`) : NaN;
  if (!Number.isFinite(ms) || dayOf(ms) !== raw) throw new InvalidRequestError(`invalid_${field}` as const, `${field}: expected a date as YYYY-MM-DD, got "${raw.slice(0, 40)}"`);
  return ms;
}

/** The UTC days from `start_date` to `end_date`, inclusive. Defaults: the 30 days up to today; 400 naming the field at fault. */
export function usageRange(startDate: string | undefined, endDate: string | undefined): { from: string; to: string } {
  const end = day(endDate ?? dayOf(Date.now()), "end_date");
  const start = startDate === undefined ? end - 29 * DAY_MS : day(startDate, "start_date");
  if (start > end) throw new InvalidRequestError("invalid_start_date", "start_date: after end_date");
  if ((end - start) / DAY_MS + 1 > MAX_USAGE_DAYS) throw new InvalidRequestError("invalid_start_date", `start_date: at most ${MAX_USAGE_DAYS} days before end_date`);
  return { from: dayOf(start), to: dayOf(end) };
}
