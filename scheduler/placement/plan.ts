/**
 * Where a model's next replica goes: a pure decision over what the nodes report (each device's
 * memory, the replicas on it, which of them are idle) and what the model needs. No I/O, no clock of
 * its own: the caller passes the state and carries out the decision (LoadModel, UnloadModel).
 *
 * The rule, in order:
 * 1. Only nodes that offer their devices (an agent started without `--serve`, not draining) take
 *    replicas, and a node holds one replica of a model at most.
 * 2. A model no such node could hold even empty (the sum of its devices' memory) is `too_large`.
 * 3. On each node, one device that fits the model (free memory, then free memory once idle replicas are
 *    unloaded, least recently used first) is preferred to a split: the smallest such device (best fit).
 *    Otherwise the model is spread over the node's devices in proportion to their free memory, as
 *    llama.cpp's layer split does (`tensor_split`).
 * 4. Among nodes, the one that unloads the fewest bytes wins, then the one left with the least spare
 *    memory (packing keeps large holes for large models), then the node id (a stable order). When
 *    every node must unload, only the `UNLOAD_CANDIDATES` nearest to fitting are compared, so that a
 *    decision stays quick in a full fleet of thousands of nodes.
 * 5. A replica is never unloaded while it answers a request, while it loads, while it is to be kept
 *    (pinned, or idle for less than its `idle_unload_s`), or when that would leave its model below `min_replicas`.
 */

/** One device of a node: a GPU, or the node's memory on a CPU node (`--memory-budget`). */
export interface PlacementDevice {
  /** Total bytes the node offers on it (its memory, capped by the node's budget). */
  totalBytes: number;
  /** Bytes free on it now for a new replica. */
  freeBytes: number;
}

/** One model loaded (or loading) on a node. */
export interface PlacementReplica {
  model: string;
  /** Bytes it holds on each of the node's devices, by device index. */
  bytes: readonly number[];
  state: "loading" | "ready" | "unloading";
  /** Requests it is answering now. */
  inflight: number;
  /** When it last answered a request (ms, any clock the caller keeps consistent). */
  lastUsedAt: number;
  /** Not to be unloaded to make room now: pinned by the operator, or idle for less than its model's `idle_unload_s`. */
  keep?: boolean;
}

export interface PlacementNode {
  id: string;
  /** Whether it takes replicas: it offers its devices and is not draining. */
  placeable: boolean;
  devices: readonly PlacementDevice[];
  replicas: readonly PlacementReplica[];
  /** Whether the node may hold `model` at all (its node token's models and slots). Default: any. */
  accepts?: (model: string) => boolean;
}

/** What a model needs of a node. */
export interface ModelNeed {
  model: string;
  /** Bytes one replica takes: its weights, its KV cache for the catalog's context and sequences, and the compute buffers. */
  bytes: number;
}

export type Placement =
  | {
      kind: "place";
      node: string;
      /** Bytes of the model on each of the node's devices (one non-zero entry unless it is split). */
      split: number[];
      /** Models whose idle replicas on that node are unloaded first, least recently used first. */
      evict: string[];
    }
  /** No node that takes replicas could hold it even empty: the largest one's memory, for the message. */
  | { kind: "too_large"; needBytes: number; largest: { node: string; bytes: number } }
  /** Nodes could hold it, but none can now (their replicas are busy or protected), or no node takes replicas now: wait. */
  | { kind: "no_room"; needBytes: number };

export interface PlacementRules {
  /** Replicas of `model` loaded anywhere now (for min_replicas). */
  replicasOf(model: string): number;
  /** The catalog's `min_replicas` of `model` (0 when it has none). */
  minReplicasOf(model: string): number;
  /** Nodes not to use (a load that failed there). */
  avoid?: ReadonlySet<string>;
}

interface Candidate {
  node: string;
  split: number[];
  evict: string[];
  evictedBytes: number;
  spare: number;
}

const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);

/** Where a replica of `need` goes now, or why none can. */
export function choosePlacement(need: ModelNeed, nodes: Iterable<PlacementNode>, rules: PlacementRules): Placement {
  let best: Candidate | undefined;
  let largest: { node: string; bytes: number } | undefined;
  let anyCouldHold = false;
  // evictions count against a model's min_replicas fleet-wide: one count per model, taken once
  const protectedCount = new Map<string, number>();
  const spareReplicas = (model: string): number => {
    let spare = protectedCount.get(model);
    if (spare === undefined) protectedCount.set(model, (spare = rules.replicasOf(model) - rules.minReplicasOf(model)));
    return spare;
  };
  // first without unloading anything (the common case, and cheap); then, only if that finds no room, unloading idle replicas
  const holders: PlacementNode[] = [];
  let fitted: { node: PlacementNode; device: number; spare: number } | undefined;
  for (const node of nodes) {
    if (!node.placeable || (node.accepts && !node.accepts(need.model))) continue;
    let total = 0;
    for (const d of node.devices) total += d.totalBytes;
    if (!largest || total > largest.bytes || (total === largest.bytes && node.id < largest.node)) largest = { node: node.id, bytes: total };
    if (total < need.bytes) continue;
    anyCouldHold = true;
    if (rules.avoid?.has(node.id)) continue; // it could hold it, but a load failed there a moment ago
    if (node.replicas.some((r) => r.model === need.model)) continue; // one replica of a model per node
    holders.push(node);
    // without unloading: the smallest device that fits, else a split when the devices together fit (no array made per node)
    let free = 0;
    let device = -1;
    for (let i = 0; i < node.devices.length; i++) {
      const f = node.devices[i]!.freeBytes;
      free += f;
      if (f >= need.bytes && (device < 0 || f < node.devices[device]!.freeBytes)) device = i;
    }
    if (free < need.bytes || (device < 0 && node.devices.length < 2)) continue;
    const spare = free - need.bytes;
    if (!fitted || spare < fitted.spare || (spare === fitted.spare && node.id < fitted.node.id)) fitted = { node, device, spare };
  }
  if (fitted) {
    const { node, device, spare } = fitted;
    const split =
      device >= 0
        ? node.devices.map((_, i) => (i === device ? need.bytes : 0))
        : proportional(
            need.bytes,
            node.devices.map((d) => d.freeBytes),
          );
    best = { node: node.id, split, evict: [], evictedBytes: 0, spare };
  }
  if (!best)
    for (const node of nearest(need, holders)) {
      const candidate = placeOnNode(need, node, spareReplicas);
      if (candidate && (!best || better(candidate, best))) best = candidate;
    }
  if (best) return { kind: "place", node: best.node, split: best.split, evict: best.evict };
  // too large only against nodes that take replicas: with none (a moment after a start, or all draining) it waits for one
  if (!anyCouldHold && largest) return { kind: "too_large", needBytes: need.bytes, largest };
  return { kind: "no_room", needBytes: need.bytes };
}

/** Nodes compared when every one must unload something: those nearest to fitting (a bound on a decision's time in a large, full fleet). */
export const UNLOAD_CANDIDATES = 64;

/**
 * The `UNLOAD_CANDIDATES` nodes that could hold `need` once their idle replicas are unloaded and
 * need to unload the least to do so (at least `need` minus their free memory), by node id among equals.
 */
function nearest(need: ModelNeed, holders: readonly PlacementNode[]): PlacementNode[] {
  // the best UNLOAD_CANDIDATES so far, kept in order; most nodes are passed over after one comparison with the last
  const kept: { node: PlacementNode; short: number }[] = [];
  const before = (short: number, id: string, b: { node: PlacementNode; short: number }) => (short !== b.short ? short < b.short : id < b.node.id);
  for (const node of holders) {
    let free = 0;
    for (const d of node.devices) free += d.freeBytes;
    const short = need.bytes - free;
    if (kept.length === UNLOAD_CANDIDATES && !before(short, node.id, kept[kept.length - 1]!)) continue;
    let idle = 0;
    for (const r of node.replicas) if (r.state === "ready" && r.inflight === 0 && !r.keep && r.model !== need.model) for (const b of r.bytes) idle += b;
    if (idle < short) continue; // it cannot make room
    let at = kept.length;
    while (at > 0 && before(short, node.id, kept[at - 1]!)) at--;
    kept.splice(at, 0, { node, short });
    if (kept.length > UNLOAD_CANDIDATES) kept.pop();
  }
  return kept.map((k) => k.node);
}

function better(a: Candidate, b: Candidate): boolean {
  if (a.evictedBytes !== b.evictedBytes) return a.evictedBytes < b.evictedBytes;
  if (a.spare !== b.spare) return a.spare < b.spare;
  return a.node < b.node;
}

/** The cheapest way to fit `need` on `node` (one device, or a split over all of them; fewest bytes unloaded first); undefined when it cannot. */
function placeOnNode(need: ModelNeed, node: PlacementNode, spareReplicas: (model: string) => number): Candidate | undefined {
  // idle replicas that may go, least recently used first
  const evictable = node.replicas
    .filter((r) => r.state === "ready" && r.inflight === 0 && !r.keep && r.model !== need.model)
    .sort((a, b) => a.lastUsedAt - b.lastUsedAt || (a.model < b.model ? -1 : 1));
  const single = fit(node, evictable, spareReplicas, (free) => {
    let pick = -1;
    for (let i = 0; i < free.length; i++) if (free[i]! >= need.bytes && (pick < 0 || free[i]! < free[pick]!)) pick = i;
    return pick < 0 ? undefined : free.map((_, i) => (i === pick ? need.bytes : 0));
  });
  const spread =
    node.devices.length < 2
      ? undefined
      : fit(node, evictable, spareReplicas, (free) => {
          return sum(free) < need.bytes ? undefined : proportional(need.bytes, free);
        });
  // one device unless the split unloads fewer bytes
  const pick = single && (!spread || single.evictedBytes <= spread.evictedBytes) ? single : spread;
  return pick && { node: node.id, ...pick, spare: sum(pick.free) - need.bytes };
}

/** `bytes` over devices in proportion to their free memory (llama.cpp's tensor split); the rounding goes to the largest share. */
function proportional(bytes: number, free: readonly number[]): number[] {
  const total = sum(free);
  const split = free.map((f) => Math.floor((f / total) * bytes));
  split[split.indexOf(Math.max(...split))]! += bytes - sum(split);
  return split;
}

/**
 * Unloads `evictable` replicas in order until `layout` finds room in the devices' free memory; then
 * keeps back those whose unloading freed nothing the layout uses. Undefined when even all do not make room.
 */
function fit(
  node: PlacementNode,
  evictable: readonly PlacementReplica[],
  spareReplicas: (model: string) => number,
  layout: (free: readonly number[]) => number[] | undefined,
): { split: number[]; evict: string[]; evictedBytes: number; free: number[] } | undefined {
  const free = node.devices.map((d) => d.freeBytes);
  const taken = new Map<string, number>(); // evictions per model on this node, against its spare replicas
  const evicted: PlacementReplica[] = [];
  const give = (r: PlacementReplica, sign: 1 | -1) => r.bytes.forEach((b, i) => i < free.length && (free[i]! += sign * b));
  let split = layout(free);
  for (const r of evictable) {
    if (split) break;
    if ((taken.get(r.model) ?? 0) >= spareReplicas(r.model)) continue;
    taken.set(r.model, (taken.get(r.model) ?? 0) + 1);
    evicted.push(r);
    give(r, 1);
    split = layout(free);
  }
  if (!split) return undefined;
  // a replica on devices the layout leaves alone stays loaded
  const kept = evicted.filter((r) => r.bytes.every((b, i) => b === 0 || split[i] === 0));
  for (const r of kept) give(r, -1);
  const gone = evicted.filter((r) => !kept.includes(r));
  return { split, evict: gone.map((r) => r.model), evictedBytes: sum(gone.map((r) => sum(r.bytes))), free };
}
