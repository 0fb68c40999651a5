// Original file: proto/kiln/v1/fleet.proto

import type { Long } from '@grpc/proto-loader';

export interface TranscriptionAck {
  'request_id'?: (string);
  'stored_bytes'?: (number | string | Long);
}

export interface TranscriptionAck__Output {
  'request_id': (string);
  'stored_bytes': (number);
}
