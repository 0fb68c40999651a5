// Original file: proto/kiln/v1/fleet.proto

import type { Register as _kiln_v1_Register, Register__Output as _kiln_v1_Register__Output } from '../../kiln/v1/Register.js';
import type { Heartbeat as _kiln_v1_Heartbeat, Heartbeat__Output as _kiln_v1_Heartbeat__Output } from '../../kiln/v1/Heartbeat.js';
import type { CompletionChunk as _kiln_v1_CompletionChunk, CompletionChunk__Output as _kiln_v1_CompletionChunk__Output } from '../../kiln/v1/CompletionChunk.js';
import type { CompletionDone as _kiln_v1_CompletionDone, CompletionDone__Output as _kiln_v1_CompletionDone__Output } from '../../kiln/v1/CompletionDone.js';
import type { CompletionError as _kiln_v1_CompletionError, CompletionError__Output as _kiln_v1_CompletionError__Output } from '../../kiln/v1/CompletionError.js';
import type { Draining as _kiln_v1_Draining, Draining__Output as _kiln_v1_Draining__Output } from '../../kiln/v1/Draining.js';
import type { CompletionChunks as _kiln_v1_CompletionChunks, CompletionChunks__Output as _kiln_v1_CompletionChunks__Output } from '../../kiln/v1/CompletionChunks.js';
import type { Embeddings as _kiln_v1_Embeddings, Embeddings__Output as _kiln_v1_Embeddings__Output } from '../../kiln/v1/Embeddings.js';
import type { TranscriptionAck as _kiln_v1_TranscriptionAck, TranscriptionAck__Output as _kiln_v1_TranscriptionAck__Output } from '../../kiln/v1/TranscriptionAck.js';
import type { TranscriptionSegments as _kiln_v1_TranscriptionSegments, TranscriptionSegments__Output as _kiln_v1_TranscriptionSegments__Output } from '../../kiln/v1/TranscriptionSegments.js';
import type { TranscriptionDone as _kiln_v1_TranscriptionDone, TranscriptionDone__Output as _kiln_v1_TranscriptionDone__Output } from '../../kiln/v1/TranscriptionDone.js';
import type { ModelState as _kiln_v1_ModelState, ModelState__Output as _kiln_v1_ModelState__Output } from '../../kiln/v1/ModelState.js';

export interface AgentMessage {
  'register'?: (_kiln_v1_Register | null);
  'heartbeat'?: (_kiln_v1_Heartbeat | null);
  'chunk'?: (_kiln_v1_CompletionChunk | null);
  'done'?: (_kiln_v1_CompletionDone | null);
  'error'?: (_kiln_v1_CompletionError | null);
  'draining'?: (_kiln_v1_Draining | null);
  'chunks'?: (_kiln_v1_CompletionChunks | null);
  'embeddings'?: (_kiln_v1_Embeddings | null);
  'transcription_ack'?: (_kiln_v1_TranscriptionAck | null);
  'transcription_segments'?: (_kiln_v1_TranscriptionSegments | null);
  'transcription_done'?: (_kiln_v1_TranscriptionDone | null);
  'model_state'?: (_kiln_v1_ModelState | null);
  'body'?: "register"|"heartbeat"|"chunk"|"done"|"error"|"draining"|"chunks"|"embeddings"|"transcription_ack"|"transcription_segments"|"transcription_done"|"model_state";
}

export interface AgentMessage__Output {
  'register'?: (_kiln_v1_Register__Output | null);
  'heartbeat'?: (_kiln_v1_Heartbeat__Output | null);
  'chunk'?: (_kiln_v1_CompletionChunk__Output | null);
  'done'?: (_kiln_v1_CompletionDone__Output | null);
  'error'?: (_kiln_v1_CompletionError__Output | null);
  'draining'?: (_kiln_v1_Draining__Output | null);
  'chunks'?: (_kiln_v1_CompletionChunks__Output | null);
  'embeddings'?: (_kiln_v1_Embeddings__Output | null);
  'transcription_ack'?: (_kiln_v1_TranscriptionAck__Output | null);
  'transcription_segments'?: (_kiln_v1_TranscriptionSegments__Output | null);
  'transcription_done'?: (_kiln_v1_TranscriptionDone__Output | null);
  'model_state'?: (_kiln_v1_ModelState__Output | null);
  'body'?: "register"|"heartbeat"|"chunk"|"done"|"error"|"draining"|"chunks"|"embeddings"|"transcription_ack"|"transcription_segments"|"transcription_done"|"model_state";
}
