// Original file: proto/kiln/v1/fleet.proto

import type { Long } from '@grpc/proto-loader';

export interface Transcription {
  'models'?: (string)[];
  'default_model'?: (string);
  'slots'?: (number);
  'capabilities'?: (string)[];
  'max_file_bytes'?: (number | string | Long);
  'on_demand_models'?: (string)[];
}

export interface Transcription__Output {
  'models': (string)[];
  'default_model': (string);
  'slots': (number);
  'capabilities': (string)[];
  'max_file_bytes': (number);
  'on_demand_models': (string)[];
}
