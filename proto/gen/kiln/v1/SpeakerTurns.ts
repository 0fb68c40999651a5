// Original file: proto/kiln/v1/fleet.proto

import type { SpeakerTurn as _kiln_v1_SpeakerTurn, SpeakerTurn__Output as _kiln_v1_SpeakerTurn__Output } from '../../kiln/v1/SpeakerTurn.js';

export interface SpeakerTurns {
  'turns'?: (_kiln_v1_SpeakerTurn)[];
}

export interface SpeakerTurns__Output {
  'turns': (_kiln_v1_SpeakerTurn__Output)[];
}
