// Original file: proto/kiln/v1/fleet.proto

import type { Usage as _kiln_v1_Usage, Usage__Output as _kiln_v1_Usage__Output } from '../../kiln/v1/Usage.js';

export interface CompletionError {
  'request_id'?: (string);
  'code'?: (string);
  'message'?: (string);
  'retryable'?: (boolean);
  'usage'?: (_kiln_v1_Usage | null);
}

export interface CompletionError__Output {
  'request_id': (string);
  'code': (string);
  'message': (string);
  'retryable': (boolean);
  'usage': (_kiln_v1_Usage__Output | null);
}
