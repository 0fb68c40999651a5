// Original file: proto/kiln/v1/fleet.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { AgentMessage as _kiln_v1_AgentMessage, AgentMessage__Output as _kiln_v1_AgentMessage__Output } from '../../kiln/v1/AgentMessage.js';
import type { SchedulerMessage as _kiln_v1_SchedulerMessage, SchedulerMessage__Output as _kiln_v1_SchedulerMessage__Output } from '../../kiln/v1/SchedulerMessage.js';

export interface FleetClient extends grpc.Client {
  Connect(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_kiln_v1_AgentMessage, _kiln_v1_SchedulerMessage__Output>;
  Connect(options?: grpc.CallOptions): grpc.ClientDuplexStream<_kiln_v1_AgentMessage, _kiln_v1_SchedulerMessage__Output>;
  connect(metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<_kiln_v1_AgentMessage, _kiln_v1_SchedulerMessage__Output>;
  connect(options?: grpc.CallOptions): grpc.ClientDuplexStream<_kiln_v1_AgentMessage, _kiln_v1_SchedulerMessage__Output>;
  
}

export interface FleetHandlers extends grpc.UntypedServiceImplementation {
  Connect: grpc.handleBidiStreamingCall<_kiln_v1_AgentMessage__Output, _kiln_v1_SchedulerMessage>;
  
}

export interface FleetDefinition extends grpc.ServiceDefinition {
  Connect: MethodDefinition<_kiln_v1_AgentMessage, _kiln_v1_SchedulerMessage, _kiln_v1_AgentMessage__Output, _kiln_v1_SchedulerMessage__Output>
}
