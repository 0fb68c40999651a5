// Original file: proto/kiln/v1/fleet.proto

import type { ModelPool as _kiln_v1_ModelPool, ModelPool__Output as _kiln_v1_ModelPool__Output } from '../../kiln/v1/ModelPool.js';
import type { Long } from '@grpc/proto-loader';

// Original file: proto/kiln/v1/fleet.proto

export const _kiln_v1_ModelState_State = {
  STATE_UNSPECIFIED: 'STATE_UNSPECIFIED',
  LOADING: 'LOADING',
  READY: 'READY',
  FAILED: 'FAILED',
  UNLOADED: 'UNLOADED',
} as const;

export type _kiln_v1_ModelState_State =
  | 'STATE_UNSPECIFIED'
  | 0
  | 'LOADING'
  | 1
  | 'READY'
  | 2
  | 'FAILED'
  | 3
  | 'UNLOADED'
  | 4

export type _kiln_v1_ModelState_State__Output = typeof _kiln_v1_ModelState_State[keyof typeof _kiln_v1_ModelState_State]

export interface ModelState {
  'model_id'?: (string);
  'state'?: (_kiln_v1_ModelState_State);
  'progress'?: (number | string);
  'reason'?: (string);
  'pool'?: (_kiln_v1_ModelPool | null);
  'device_bytes'?: (number | string | Long)[];
}

export interface ModelState__Output {
  'model_id': (string);
  'state': (_kiln_v1_ModelState_State__Output);
  'progress': (number);
  'reason': (string);
  'pool': (_kiln_v1_ModelPool__Output | null);
  'device_bytes': (number)[];
}
