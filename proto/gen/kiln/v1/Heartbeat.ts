// Original file: proto/kiln/v1/fleet.proto

import type { Device as _kiln_v1_Device, Device__Output as _kiln_v1_Device__Output } from '../../kiln/v1/Device.js';
import type { Long } from '@grpc/proto-loader';

export interface Heartbeat {
  'busy_slots'?: (number)[];
  'memory_used_bytes'?: (number | string | Long);
  'memory_free_bytes'?: (number | string | Long);
  'device_memory_used_bytes'?: (number | string | Long);
  'device_memory_total_bytes'?: (number | string | Long);
  'disk_free_bytes'?: (number | string | Long);
  'local_busy_slots'?: (number)[];
  'transcription_jobs'?: (number);
  'devices'?: (_kiln_v1_Device)[];
  'pool_models'?: (string)[];
}

export interface Heartbeat__Output {
  'busy_slots': (number)[];
  'memory_used_bytes': (number);
  'memory_free_bytes': (number);
  'device_memory_used_bytes': (number);
  'device_memory_total_bytes': (number);
  'disk_free_bytes': (number);
  'local_busy_slots': (number)[];
  'transcription_jobs': (number);
  'devices': (_kiln_v1_Device__Output)[];
  'pool_models': (string)[];
}
