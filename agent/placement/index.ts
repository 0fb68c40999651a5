export { Replicas, type LoadRequest, type OfferedDevice, type ReplicaPhase, type ReplicaReport, type ReplicasOptions } from "./replicas.js";
