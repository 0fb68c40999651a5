/**
 * Placement claims in the scheduler's database (placement_claims): before ordering a load, a
 * scheduler claims the model for a few seconds; a claim another scheduler holds and that has not
 * run out is refused. So two schedulers that see the same cold model at once order one load, and
 * the other routes to the replica the agent reports to both. A scheduler that dies holds its claim
 * only until it runs out.
 */
import { randomUUID } from "node:crypto";
import type { PlacementClaims } from "../placement/index.js";
import type { Store } from "../store/index.js";

const LOCK = "kiln:placement_claims";

export class StoreClaims implements PlacementClaims {
  /** This scheduler, as its claims name it. */
  readonly owner = randomUUID();

  constructor(
    private readonly db: Store,
    private readonly now: () => number = Date.now,
  ) {}

  async claim(model: string, ttlMs: number): Promise<boolean> {
    const now = this.now();
    return this.db.transaction(
      async (tx) => {
        const held = await tx.get<{ owner: string; until_ms: number }>("SELECT owner, until_ms FROM placement_claims WHERE model = ?", [model]);
        if (held && held.owner !== this.owner && Number(held.until_ms) > now) return false;
        if (held) await tx.run("UPDATE placement_claims SET owner = ?, until_ms = ? WHERE model = ?", [this.owner, now + ttlMs, model]);
        else await tx.run("INSERT INTO placement_claims (model, owner, until_ms) VALUES (?, ?, ?)", [model, this.owner, now + ttlMs]);
        return true;
      },
      { lock: LOCK },
    );
  }
}
