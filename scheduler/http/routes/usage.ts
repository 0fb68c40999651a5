/**
 * `GET /v1/usage?start_date=YYYY-MM-DD&end_date=YYYY-MM-DD`: the key's account's usage by UTC day and
 * model (requests, tokens, audio seconds). Default: the 30 days up to today; at most 366 days.
 */
import { Hono } from "hono";
import { usageRange, type UsageLedger } from "../../usage/index.js";
import type { AppEnv } from "../env.js";

export function usageRoutes(ledger: UsageLedger): Hono<AppEnv> {
  return new Hono<AppEnv>().get("/", async (c) => {
    const { account } = c.get("identity");
    const { from, to } = usageRange(c.req.query("start_date"), c.req.query("end_date"));
    return c.json({ object: "list", account, start_date: from, end_date: to, data: await ledger.report(account, from, to) });
  });
}
