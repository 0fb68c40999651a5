// Original file: proto/kiln/v1/fleet.proto

import type { Usage as _kiln_v1_Usage, Usage__Output as _kiln_v1_Usage__Output } from '../../kiln/v1/Usage.js';

export interface CompletionDone {
  'request_id'?: (string);
  'finish_reason'?: (string);
  'usage'?: (_kiln_v1_Usage | null);
  'finish_reasons'?: (string)[];
  'stop_text'?: (string);
}

export interface CompletionDone__Output {
  'request_id': (string);
  'finish_reason': (string);
  'usage': (_kiln_v1_Usage__Output | null);
  'finish_reasons': (string)[];
  'stop_text': (string);
}
