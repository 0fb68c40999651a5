// Original file: proto/kiln/v1/fleet.proto

import type { Long } from '@grpc/proto-loader';

export interface LoadModel {
  'model_id'?: (string);
  'source'?: (string);
  'context_size'?: (number);
  'sequences'?: (number);
  'device_bytes'?: (number | string | Long)[];
  'speculative'?: (string);
}

export interface LoadModel__Output {
  'model_id': (string);
  'source': (string);
  'context_size': (number);
  'sequences': (number);
  'device_bytes': (number)[];
  'speculative': (string);
}
