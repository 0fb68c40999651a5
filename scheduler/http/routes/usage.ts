/**
 * `GET /v1/usage?start_date=YYYY-MM-DD&end_date=YYYY-MM-DD`: the key's account's usage by UTC day and
 * model (requests, tokens, audio seconds). Default: the 30 days up to today; at most 366 days.
 */
import { Hono } from "hono";
import { InvalidRequestError } from "../../../core/errors.js";
import { dayOf, type UsageLedger } from "../../usage/index.js";
import type { AppEnv } from "../env.js";

const DAY_MS = 86_400_000;
const MAX_DAYS = 366;

/** A `YYYY-MM-DD` day that exists, as Unix ms at its UTC midnight; 400 naming `field` otherwise. */
function day(raw: string, field: string): number {
  const ms = /^\d{4}-\d{2}-\d{2}$/.test(raw) ? Date.parse(`${raw}T00:00:00Z`) : NaN;
  if (!Number.isFinite(ms) || dayOf(ms) !== raw) throw new InvalidRequestError(`invalid_${field}`, `${field}: expected a date as YYYY-MM-DD, got "${raw.slice(0, 40)}"`);
  return ms;
}

export function usageRoutes(ledger: UsageLedger): Hono<AppEnv> {
  return new Hono<AppEnv>().get("/", async (c) => {
    const { account } = c.get("identity");
    const endRaw = c.req.query("end_date");
    const end = endRaw === undefined ? day(dayOf(Date.now()), "end_date") : day(endRaw, "end_date");
    const startRaw = c.req.query("start_date");
    const start = startRaw === undefined ? end - 29 * DAY_MS : day(startRaw, "start_date");
    if (start > end) throw new InvalidRequestError("invalid_start_date", "start_date: after end_date");
    if ((end - start) / DAY_MS + 1 > MAX_DAYS) throw new InvalidRequestError("invalid_start_date", `start_date: at most ${MAX_DAYS} days before end_date`);
    return c.json({ object: "list", account, start_date: dayOf(start), end_date: dayOf(end), data: await ledger.report(account, dayOf(start), dayOf(end)) });
  });
}
