// Original file: proto/kiln/v1/fleet.proto

import type { Gpu as _kiln_v1_Gpu, Gpu__Output as _kiln_v1_Gpu__Output } from '../../kiln/v1/Gpu.js';
import type { Long } from '@grpc/proto-loader';

export interface Hardware {
  'compute'?: (string);
  'gpus'?: (_kiln_v1_Gpu)[];
  'cpu_model'?: (string);
  'cpu_cores'?: (number);
  'memory_total_bytes'?: (number | string | Long);
  'cuda_available'?: (boolean);
  'disk_path'?: (string);
  'disk_total_bytes'?: (number | string | Long);
}

export interface Hardware__Output {
  'compute': (string);
  'gpus': (_kiln_v1_Gpu__Output)[];
  'cpu_model': (string);
  'cpu_cores': (number);
  'memory_total_bytes': (number);
  'cuda_available': (boolean);
  'disk_path': (string);
  'disk_total_bytes': (number);
}
