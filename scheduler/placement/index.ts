export { choosePlacement, UNLOAD_CANDIDATES, type Placement, type PlacementDevice, type PlacementNode, type PlacementReplica, type ModelNeed } from "./plan.js";
export { Placer, type LoadOrder, type PlacedModel, type PlacementClaims, type PlacementView, type PlacerOptions } from "./placer.js";
export { estimateReplica, headerLocation, type ReplicaShape, type ReplicaSize } from "./estimate.js";
