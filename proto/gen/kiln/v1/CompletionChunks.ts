// Original file: proto/kiln/v1/fleet.proto

import type { CompletionChunk as _kiln_v1_CompletionChunk, CompletionChunk__Output as _kiln_v1_CompletionChunk__Output } from '../../kiln/v1/CompletionChunk.js';

export interface CompletionChunks {
  'chunks'?: (_kiln_v1_CompletionChunk)[];
}

export interface CompletionChunks__Output {
  'chunks': (_kiln_v1_CompletionChunk__Output)[];
}
