// Original file: proto/kiln/v1/fleet.proto


export interface UnloadModel {
  'model_id'?: (string);
}

export interface UnloadModel__Output {
  'model_id': (string);
}
