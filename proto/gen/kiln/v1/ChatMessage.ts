// Original file: proto/kiln/v1/fleet.proto

import type { ToolCall as _kiln_v1_ToolCall, ToolCall__Output as _kiln_v1_ToolCall__Output } from '../../kiln/v1/ToolCall.js';

export interface ChatMessage {
  'role'?: (string);
  'content'?: (string);
  'tool_calls'?: (_kiln_v1_ToolCall)[];
  'tool_call_id'?: (string);
}

export interface ChatMessage__Output {
  'role': (string);
  'content': (string);
  'tool_calls': (_kiln_v1_ToolCall__Output)[];
  'tool_call_id': (string);
}
