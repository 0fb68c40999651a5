// Original file: proto/kiln/v1/fleet.proto

import type { Long } from '@grpc/proto-loader';

export interface Gpu {
  'model'?: (string);
  'memory_total_bytes'?: (number | string | Long);
  'driver'?: (string);
}

export interface Gpu__Output {
  'model': (string);
  'memory_total_bytes': (number);
  'driver': (string);
}
