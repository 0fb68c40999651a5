// Original file: proto/kiln/v1/fleet.proto

import type { ChatMessage as _kiln_v1_ChatMessage, ChatMessage__Output as _kiln_v1_ChatMessage__Output } from '../../kiln/v1/ChatMessage.js';

export interface CompletionRequest {
  'request_id'?: (string);
  'model'?: (string);
  'messages'?: (_kiln_v1_ChatMessage)[];
  'max_tokens'?: (number);
  'temperature'?: (number | string);
  'trace_id'?: (string);
  '_max_tokens'?: "max_tokens";
  '_temperature'?: "temperature";
}

export interface CompletionRequest__Output {
  'request_id': (string);
  'model': (string);
  'messages': (_kiln_v1_ChatMessage__Output)[];
  'max_tokens'?: (number);
  'temperature'?: (number);
  'trace_id': (string);
  '_max_tokens'?: "max_tokens";
  '_temperature'?: "temperature";
}
