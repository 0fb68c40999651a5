// Original file: proto/kiln/v1/fleet.proto

import type { Registered as _kiln_v1_Registered, Registered__Output as _kiln_v1_Registered__Output } from '../../kiln/v1/Registered.js';
import type { CompletionRequest as _kiln_v1_CompletionRequest, CompletionRequest__Output as _kiln_v1_CompletionRequest__Output } from '../../kiln/v1/CompletionRequest.js';
import type { CancelCompletion as _kiln_v1_CancelCompletion, CancelCompletion__Output as _kiln_v1_CancelCompletion__Output } from '../../kiln/v1/CancelCompletion.js';
import type { Drain as _kiln_v1_Drain, Drain__Output as _kiln_v1_Drain__Output } from '../../kiln/v1/Drain.js';
import type { EmbeddingRequest as _kiln_v1_EmbeddingRequest, EmbeddingRequest__Output as _kiln_v1_EmbeddingRequest__Output } from '../../kiln/v1/EmbeddingRequest.js';
import type { TranscriptionRequest as _kiln_v1_TranscriptionRequest, TranscriptionRequest__Output as _kiln_v1_TranscriptionRequest__Output } from '../../kiln/v1/TranscriptionRequest.js';
import type { AudioChunk as _kiln_v1_AudioChunk, AudioChunk__Output as _kiln_v1_AudioChunk__Output } from '../../kiln/v1/AudioChunk.js';
import type { LoadModel as _kiln_v1_LoadModel, LoadModel__Output as _kiln_v1_LoadModel__Output } from '../../kiln/v1/LoadModel.js';
import type { UnloadModel as _kiln_v1_UnloadModel, UnloadModel__Output as _kiln_v1_UnloadModel__Output } from '../../kiln/v1/UnloadModel.js';

export interface SchedulerMessage {
  'registered'?: (_kiln_v1_Registered | null);
  'completion'?: (_kiln_v1_CompletionRequest | null);
  'cancel'?: (_kiln_v1_CancelCompletion | null);
  'drain'?: (_kiln_v1_Drain | null);
  'embedding'?: (_kiln_v1_EmbeddingRequest | null);
  'transcription'?: (_kiln_v1_TranscriptionRequest | null);
  'audio'?: (_kiln_v1_AudioChunk | null);
  'load_model'?: (_kiln_v1_LoadModel | null);
  'unload_model'?: (_kiln_v1_UnloadModel | null);
  'body'?: "registered"|"completion"|"cancel"|"drain"|"embedding"|"transcription"|"audio"|"load_model"|"unload_model";
}

export interface SchedulerMessage__Output {
  'registered'?: (_kiln_v1_Registered__Output | null);
  'completion'?: (_kiln_v1_CompletionRequest__Output | null);
  'cancel'?: (_kiln_v1_CancelCompletion__Output | null);
  'drain'?: (_kiln_v1_Drain__Output | null);
  'embedding'?: (_kiln_v1_EmbeddingRequest__Output | null);
  'transcription'?: (_kiln_v1_TranscriptionRequest__Output | null);
  'audio'?: (_kiln_v1_AudioChunk__Output | null);
  'load_model'?: (_kiln_v1_LoadModel__Output | null);
  'unload_model'?: (_kiln_v1_UnloadModel__Output | null);
  'body'?: "registered"|"completion"|"cancel"|"drain"|"embedding"|"transcription"|"audio"|"load_model"|"unload_model";
}
