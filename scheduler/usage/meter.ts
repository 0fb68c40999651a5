/** Usage rows from a request's fleet events: the tokens of its `done`, or of its embeddings. */
import type { CompletionEvent } from "../fleet/index.js";
import type { UsageLedger, UsageRow } from "./ledger.js";

/** Who a request's usage belongs to, and what kind it is. */
export type UsageOwner = Omit<UsageRow, "promptTokens" | "completionTokens" | "audioSeconds" | "at">;

/** Passes `events` on, recording the request's usage when its answer is complete (a request cut short records none). */
export async function* metered(events: AsyncIterable<CompletionEvent>, ledger: UsageLedger, owner: UsageOwner): AsyncGenerator<CompletionEvent> {
  for await (const e of events) {
    if (e.type === "done") ledger.record({ ...owner, promptTokens: e.promptTokens, completionTokens: e.completionTokens, audioSeconds: 0 });
    else if (e.type === "embeddings") ledger.record({ ...owner, promptTokens: e.promptTokens, completionTokens: 0, audioSeconds: 0 });
    yield e;
  }
}
