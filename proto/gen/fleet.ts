import type * as grpc from '@grpc/grpc-js';
import type { MessageTypeDefinition } from '@grpc/proto-loader';

import type { AgentMessage as _kiln_v1_AgentMessage, AgentMessage__Output as _kiln_v1_AgentMessage__Output } from './kiln/v1/AgentMessage.js';
import type { AudioChunk as _kiln_v1_AudioChunk, AudioChunk__Output as _kiln_v1_AudioChunk__Output } from './kiln/v1/AudioChunk.js';
import type { CancelCompletion as _kiln_v1_CancelCompletion, CancelCompletion__Output as _kiln_v1_CancelCompletion__Output } from './kiln/v1/CancelCompletion.js';
import type { ChatMessage as _kiln_v1_ChatMessage, ChatMessage__Output as _kiln_v1_ChatMessage__Output } from './kiln/v1/ChatMessage.js';
import type { CompletionChunk as _kiln_v1_CompletionChunk, CompletionChunk__Output as _kiln_v1_CompletionChunk__Output } from './kiln/v1/CompletionChunk.js';
import type { CompletionChunks as _kiln_v1_CompletionChunks, CompletionChunks__Output as _kiln_v1_CompletionChunks__Output } from './kiln/v1/CompletionChunks.js';
import type { CompletionDone as _kiln_v1_CompletionDone, CompletionDone__Output as _kiln_v1_CompletionDone__Output } from './kiln/v1/CompletionDone.js';
import type { CompletionError as _kiln_v1_CompletionError, CompletionError__Output as _kiln_v1_CompletionError__Output } from './kiln/v1/CompletionError.js';
import type { CompletionRequest as _kiln_v1_CompletionRequest, CompletionRequest__Output as _kiln_v1_CompletionRequest__Output } from './kiln/v1/CompletionRequest.js';
import type { Device as _kiln_v1_Device, Device__Output as _kiln_v1_Device__Output } from './kiln/v1/Device.js';
import type { Drain as _kiln_v1_Drain, Drain__Output as _kiln_v1_Drain__Output } from './kiln/v1/Drain.js';
import type { Draining as _kiln_v1_Draining, Draining__Output as _kiln_v1_Draining__Output } from './kiln/v1/Draining.js';
import type { EmbeddingRequest as _kiln_v1_EmbeddingRequest, EmbeddingRequest__Output as _kiln_v1_EmbeddingRequest__Output } from './kiln/v1/EmbeddingRequest.js';
import type { Embeddings as _kiln_v1_Embeddings, Embeddings__Output as _kiln_v1_Embeddings__Output } from './kiln/v1/Embeddings.js';
import type { FleetClient as _kiln_v1_FleetClient, FleetDefinition as _kiln_v1_FleetDefinition } from './kiln/v1/Fleet.js';
import type { Gpu as _kiln_v1_Gpu, Gpu__Output as _kiln_v1_Gpu__Output } from './kiln/v1/Gpu.js';
import type { Hardware as _kiln_v1_Hardware, Hardware__Output as _kiln_v1_Hardware__Output } from './kiln/v1/Hardware.js';
import type { Heartbeat as _kiln_v1_Heartbeat, Heartbeat__Output as _kiln_v1_Heartbeat__Output } from './kiln/v1/Heartbeat.js';
import type { LoadModel as _kiln_v1_LoadModel, LoadModel__Output as _kiln_v1_LoadModel__Output } from './kiln/v1/LoadModel.js';
import type { ModelPool as _kiln_v1_ModelPool, ModelPool__Output as _kiln_v1_ModelPool__Output } from './kiln/v1/ModelPool.js';
import type { ModelState as _kiln_v1_ModelState, ModelState__Output as _kiln_v1_ModelState__Output } from './kiln/v1/ModelState.js';
import type { Register as _kiln_v1_Register, Register__Output as _kiln_v1_Register__Output } from './kiln/v1/Register.js';
import type { Registered as _kiln_v1_Registered, Registered__Output as _kiln_v1_Registered__Output } from './kiln/v1/Registered.js';
import type { ResponseFormat as _kiln_v1_ResponseFormat, ResponseFormat__Output as _kiln_v1_ResponseFormat__Output } from './kiln/v1/ResponseFormat.js';
import type { SchedulerMessage as _kiln_v1_SchedulerMessage, SchedulerMessage__Output as _kiln_v1_SchedulerMessage__Output } from './kiln/v1/SchedulerMessage.js';
import type { SpeakerTurn as _kiln_v1_SpeakerTurn, SpeakerTurn__Output as _kiln_v1_SpeakerTurn__Output } from './kiln/v1/SpeakerTurn.js';
import type { SpeakerTurns as _kiln_v1_SpeakerTurns, SpeakerTurns__Output as _kiln_v1_SpeakerTurns__Output } from './kiln/v1/SpeakerTurns.js';
import type { TokenLogprob as _kiln_v1_TokenLogprob, TokenLogprob__Output as _kiln_v1_TokenLogprob__Output } from './kiln/v1/TokenLogprob.js';
import type { Tool as _kiln_v1_Tool, Tool__Output as _kiln_v1_Tool__Output } from './kiln/v1/Tool.js';
import type { ToolCall as _kiln_v1_ToolCall, ToolCall__Output as _kiln_v1_ToolCall__Output } from './kiln/v1/ToolCall.js';
import type { ToolCallDelta as _kiln_v1_ToolCallDelta, ToolCallDelta__Output as _kiln_v1_ToolCallDelta__Output } from './kiln/v1/ToolCallDelta.js';
import type { TopLogprob as _kiln_v1_TopLogprob, TopLogprob__Output as _kiln_v1_TopLogprob__Output } from './kiln/v1/TopLogprob.js';
import type { Transcript as _kiln_v1_Transcript, Transcript__Output as _kiln_v1_Transcript__Output } from './kiln/v1/Transcript.js';
import type { TranscriptSegment as _kiln_v1_TranscriptSegment, TranscriptSegment__Output as _kiln_v1_TranscriptSegment__Output } from './kiln/v1/TranscriptSegment.js';
import type { TranscriptWord as _kiln_v1_TranscriptWord, TranscriptWord__Output as _kiln_v1_TranscriptWord__Output } from './kiln/v1/TranscriptWord.js';
import type { Transcription as _kiln_v1_Transcription, Transcription__Output as _kiln_v1_Transcription__Output } from './kiln/v1/Transcription.js';
import type { TranscriptionAck as _kiln_v1_TranscriptionAck, TranscriptionAck__Output as _kiln_v1_TranscriptionAck__Output } from './kiln/v1/TranscriptionAck.js';
import type { TranscriptionDone as _kiln_v1_TranscriptionDone, TranscriptionDone__Output as _kiln_v1_TranscriptionDone__Output } from './kiln/v1/TranscriptionDone.js';
import type { TranscriptionOptions as _kiln_v1_TranscriptionOptions, TranscriptionOptions__Output as _kiln_v1_TranscriptionOptions__Output } from './kiln/v1/TranscriptionOptions.js';
import type { TranscriptionRequest as _kiln_v1_TranscriptionRequest, TranscriptionRequest__Output as _kiln_v1_TranscriptionRequest__Output } from './kiln/v1/TranscriptionRequest.js';
import type { TranscriptionSegments as _kiln_v1_TranscriptionSegments, TranscriptionSegments__Output as _kiln_v1_TranscriptionSegments__Output } from './kiln/v1/TranscriptionSegments.js';
import type { UnloadModel as _kiln_v1_UnloadModel, UnloadModel__Output as _kiln_v1_UnloadModel__Output } from './kiln/v1/UnloadModel.js';
import type { Usage as _kiln_v1_Usage, Usage__Output as _kiln_v1_Usage__Output } from './kiln/v1/Usage.js';
import type { Vector as _kiln_v1_Vector, Vector__Output as _kiln_v1_Vector__Output } from './kiln/v1/Vector.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  kiln: {
    v1: {
      AgentMessage: MessageTypeDefinition<_kiln_v1_AgentMessage, _kiln_v1_AgentMessage__Output>
      AudioChunk: MessageTypeDefinition<_kiln_v1_AudioChunk, _kiln_v1_AudioChunk__Output>
      CancelCompletion: MessageTypeDefinition<_kiln_v1_CancelCompletion, _kiln_v1_CancelCompletion__Output>
      ChatMessage: MessageTypeDefinition<_kiln_v1_ChatMessage, _kiln_v1_ChatMessage__Output>
      CompletionChunk: MessageTypeDefinition<_kiln_v1_CompletionChunk, _kiln_v1_CompletionChunk__Output>
      CompletionChunks: MessageTypeDefinition<_kiln_v1_CompletionChunks, _kiln_v1_CompletionChunks__Output>
      CompletionDone: MessageTypeDefinition<_kiln_v1_CompletionDone, _kiln_v1_CompletionDone__Output>
      CompletionError: MessageTypeDefinition<_kiln_v1_CompletionError, _kiln_v1_CompletionError__Output>
      CompletionRequest: MessageTypeDefinition<_kiln_v1_CompletionRequest, _kiln_v1_CompletionRequest__Output>
      Device: MessageTypeDefinition<_kiln_v1_Device, _kiln_v1_Device__Output>
      Drain: MessageTypeDefinition<_kiln_v1_Drain, _kiln_v1_Drain__Output>
      Draining: MessageTypeDefinition<_kiln_v1_Draining, _kiln_v1_Draining__Output>
      EmbeddingRequest: MessageTypeDefinition<_kiln_v1_EmbeddingRequest, _kiln_v1_EmbeddingRequest__Output>
      Embeddings: MessageTypeDefinition<_kiln_v1_Embeddings, _kiln_v1_Embeddings__Output>
      Fleet: SubtypeConstructor<typeof grpc.Client, _kiln_v1_FleetClient> & { service: _kiln_v1_FleetDefinition }
      Gpu: MessageTypeDefinition<_kiln_v1_Gpu, _kiln_v1_Gpu__Output>
      Hardware: MessageTypeDefinition<_kiln_v1_Hardware, _kiln_v1_Hardware__Output>
      Heartbeat: MessageTypeDefinition<_kiln_v1_Heartbeat, _kiln_v1_Heartbeat__Output>
      LoadModel: MessageTypeDefinition<_kiln_v1_LoadModel, _kiln_v1_LoadModel__Output>
      ModelPool: MessageTypeDefinition<_kiln_v1_ModelPool, _kiln_v1_ModelPool__Output>
      ModelState: MessageTypeDefinition<_kiln_v1_ModelState, _kiln_v1_ModelState__Output>
      Register: MessageTypeDefinition<_kiln_v1_Register, _kiln_v1_Register__Output>
      Registered: MessageTypeDefinition<_kiln_v1_Registered, _kiln_v1_Registered__Output>
      ResponseFormat: MessageTypeDefinition<_kiln_v1_ResponseFormat, _kiln_v1_ResponseFormat__Output>
      SchedulerMessage: MessageTypeDefinition<_kiln_v1_SchedulerMessage, _kiln_v1_SchedulerMessage__Output>
      SpeakerTurn: MessageTypeDefinition<_kiln_v1_SpeakerTurn, _kiln_v1_SpeakerTurn__Output>
      SpeakerTurns: MessageTypeDefinition<_kiln_v1_SpeakerTurns, _kiln_v1_SpeakerTurns__Output>
      TokenLogprob: MessageTypeDefinition<_kiln_v1_TokenLogprob, _kiln_v1_TokenLogprob__Output>
      Tool: MessageTypeDefinition<_kiln_v1_Tool, _kiln_v1_Tool__Output>
      ToolCall: MessageTypeDefinition<_kiln_v1_ToolCall, _kiln_v1_ToolCall__Output>
      ToolCallDelta: MessageTypeDefinition<_kiln_v1_ToolCallDelta, _kiln_v1_ToolCallDelta__Output>
      TopLogprob: MessageTypeDefinition<_kiln_v1_TopLogprob, _kiln_v1_TopLogprob__Output>
      Transcript: MessageTypeDefinition<_kiln_v1_Transcript, _kiln_v1_Transcript__Output>
      TranscriptSegment: MessageTypeDefinition<_kiln_v1_TranscriptSegment, _kiln_v1_TranscriptSegment__Output>
      TranscriptWord: MessageTypeDefinition<_kiln_v1_TranscriptWord, _kiln_v1_TranscriptWord__Output>
      Transcription: MessageTypeDefinition<_kiln_v1_Transcription, _kiln_v1_Transcription__Output>
      TranscriptionAck: MessageTypeDefinition<_kiln_v1_TranscriptionAck, _kiln_v1_TranscriptionAck__Output>
      TranscriptionDone: MessageTypeDefinition<_kiln_v1_TranscriptionDone, _kiln_v1_TranscriptionDone__Output>
      TranscriptionOptions: MessageTypeDefinition<_kiln_v1_TranscriptionOptions, _kiln_v1_TranscriptionOptions__Output>
      TranscriptionRequest: MessageTypeDefinition<_kiln_v1_TranscriptionRequest, _kiln_v1_TranscriptionRequest__Output>
      TranscriptionSegments: MessageTypeDefinition<_kiln_v1_TranscriptionSegments, _kiln_v1_TranscriptionSegments__Output>
      UnloadModel: MessageTypeDefinition<_kiln_v1_UnloadModel, _kiln_v1_UnloadModel__Output>
      Usage: MessageTypeDefinition<_kiln_v1_Usage, _kiln_v1_Usage__Output>
      Vector: MessageTypeDefinition<_kiln_v1_Vector, _kiln_v1_Vector__Output>
    }
  }
}

