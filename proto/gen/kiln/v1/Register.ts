// Original file: proto/kiln/v1/fleet.proto

import type { Hardware as _kiln_v1_Hardware, Hardware__Output as _kiln_v1_Hardware__Output } from '../../kiln/v1/Hardware.js';
import type { ModelPool as _kiln_v1_ModelPool, ModelPool__Output as _kiln_v1_ModelPool__Output } from '../../kiln/v1/ModelPool.js';
import type { Transcription as _kiln_v1_Transcription, Transcription__Output as _kiln_v1_Transcription__Output } from '../../kiln/v1/Transcription.js';
import type { Device as _kiln_v1_Device, Device__Output as _kiln_v1_Device__Output } from '../../kiln/v1/Device.js';
import type { ModelState as _kiln_v1_ModelState, ModelState__Output as _kiln_v1_ModelState__Output } from '../../kiln/v1/ModelState.js';

export interface Register {
  'node_id'?: (string);
  'agent_version'?: (string);
  'hardware'?: (_kiln_v1_Hardware | null);
  'pools'?: (_kiln_v1_ModelPool)[];
  'transcription'?: (_kiln_v1_Transcription | null);
  'placeable'?: (boolean);
  'devices'?: (_kiln_v1_Device)[];
  'replicas'?: (_kiln_v1_ModelState)[];
}

export interface Register__Output {
  'node_id': (string);
  'agent_version': (string);
  'hardware': (_kiln_v1_Hardware__Output | null);
  'pools': (_kiln_v1_ModelPool__Output)[];
  'transcription': (_kiln_v1_Transcription__Output | null);
  'placeable': (boolean);
  'devices': (_kiln_v1_Device__Output)[];
  'replicas': (_kiln_v1_ModelState__Output)[];
}
