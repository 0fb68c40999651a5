// Original file: proto/kiln/v1/fleet.proto

import type { Long } from '@grpc/proto-loader';

export interface Device {
  'name'?: (string);
  'total_bytes'?: (number | string | Long);
  'free_bytes'?: (number | string | Long);
}

export interface Device__Output {
  'name': (string);
  'total_bytes': (number);
  'free_bytes': (number);
}
