// Original file: proto/kiln/v1/fleet.proto

import type { Vector as _kiln_v1_Vector, Vector__Output as _kiln_v1_Vector__Output } from '../../kiln/v1/Vector.js';

export interface Embeddings {
  'request_id'?: (string);
  'vectors'?: (_kiln_v1_Vector)[];
  'prompt_tokens'?: (number);
}

export interface Embeddings__Output {
  'request_id': (string);
  'vectors': (_kiln_v1_Vector__Output)[];
  'prompt_tokens': (number);
}
