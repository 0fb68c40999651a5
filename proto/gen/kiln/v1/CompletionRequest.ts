// Original file: proto/kiln/v1/fleet.proto

import type { ChatMessage as _kiln_v1_ChatMessage, ChatMessage__Output as _kiln_v1_ChatMessage__Output } from '../../kiln/v1/ChatMessage.js';
import type { ResponseFormat as _kiln_v1_ResponseFormat, ResponseFormat__Output as _kiln_v1_ResponseFormat__Output } from '../../kiln/v1/ResponseFormat.js';
import type { Tool as _kiln_v1_Tool, Tool__Output as _kiln_v1_Tool__Output } from '../../kiln/v1/Tool.js';
import type { Long } from '@grpc/proto-loader';

export interface CompletionRequest {
  'request_id'?: (string);
  'model'?: (string);
  'messages'?: (_kiln_v1_ChatMessage)[];
  'max_tokens'?: (number);
  'temperature'?: (number | string);
  'trace_id'?: (string);
  'top_p'?: (number | string);
  'top_k'?: (number);
  'min_p'?: (number | string);
  'seed'?: (number | string | Long);
  'presence_penalty'?: (number | string);
  'frequency_penalty'?: (number | string);
  'repeat_penalty'?: (number | string);
  'logit_bias'?: ({[key: string]: number | string});
  'stop'?: (string)[];
  'response_format'?: (_kiln_v1_ResponseFormat | null);
  'logprobs'?: (boolean);
  'top_logprobs'?: (number);
  'prompt'?: (string);
  'cache_scope'?: (string);
  'n'?: (number);
  'tools'?: (_kiln_v1_Tool)[];
  'tool_choice'?: (string);
  'tool_choice_function'?: (string);
  'parallel_tool_calls'?: (boolean);
  '_max_tokens'?: "max_tokens";
  '_temperature'?: "temperature";
  '_top_p'?: "top_p";
  '_top_k'?: "top_k";
  '_min_p'?: "min_p";
  '_seed'?: "seed";
  '_presence_penalty'?: "presence_penalty";
  '_frequency_penalty'?: "frequency_penalty";
  '_repeat_penalty'?: "repeat_penalty";
  '_prompt'?: "prompt";
  '_parallel_tool_calls'?: "parallel_tool_calls";
}

export interface CompletionRequest__Output {
  'request_id': (string);
  'model': (string);
  'messages': (_kiln_v1_ChatMessage__Output)[];
  'max_tokens'?: (number);
  'temperature'?: (number);
  'trace_id': (string);
  'top_p'?: (number);
  'top_k'?: (number);
  'min_p'?: (number);
  'seed'?: (number);
  'presence_penalty'?: (number);
  'frequency_penalty'?: (number);
  'repeat_penalty'?: (number);
  'logit_bias': ({[key: string]: number});
  'stop': (string)[];
  'response_format': (_kiln_v1_ResponseFormat__Output | null);
  'logprobs': (boolean);
  'top_logprobs': (number);
  'prompt'?: (string);
  'cache_scope': (string);
  'n': (number);
  'tools': (_kiln_v1_Tool__Output)[];
  'tool_choice': (string);
  'tool_choice_function': (string);
  'parallel_tool_calls'?: (boolean);
  '_max_tokens'?: "max_tokens";
  '_temperature'?: "temperature";
  '_top_p'?: "top_p";
  '_top_k'?: "top_k";
  '_min_p'?: "min_p";
  '_seed'?: "seed";
  '_presence_penalty'?: "presence_penalty";
  '_frequency_penalty'?: "frequency_penalty";
  '_repeat_penalty'?: "repeat_penalty";
  '_prompt'?: "prompt";
  '_parallel_tool_calls'?: "parallel_tool_calls";
}
