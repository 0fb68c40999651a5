// Original file: proto/kiln/v1/fleet.proto


export interface TranscriptionOptions {
  'model'?: (string);
  'language'?: (string);
  'translate'?: (boolean);
  'target_language'?: (string);
  'speaker_diarization'?: (boolean);
  'min_speakers'?: (number);
  'max_speakers'?: (number);
  'prompt'?: (string);
  'temperature'?: (number | string);
  'temperature_increment'?: (number | string);
  'entropy_threshold'?: (number | string);
  'logprob_threshold'?: (number | string);
  'no_speech_threshold'?: (number | string);
  'vad_threshold'?: (number | string);
  'vad_min_silence_seconds'?: (number | string);
  '_language'?: "language";
  '_target_language'?: "target_language";
  '_min_speakers'?: "min_speakers";
  '_max_speakers'?: "max_speakers";
  '_prompt'?: "prompt";
  '_temperature'?: "temperature";
  '_temperature_increment'?: "temperature_increment";
  '_entropy_threshold'?: "entropy_threshold";
  '_logprob_threshold'?: "logprob_threshold";
  '_no_speech_threshold'?: "no_speech_threshold";
  '_vad_threshold'?: "vad_threshold";
  '_vad_min_silence_seconds'?: "vad_min_silence_seconds";
}

export interface TranscriptionOptions__Output {
  'model': (string);
  'language'?: (string);
  'translate': (boolean);
  'target_language'?: (string);
  'speaker_diarization': (boolean);
  'min_speakers'?: (number);
  'max_speakers'?: (number);
  'prompt'?: (string);
  'temperature'?: (number);
  'temperature_increment'?: (number);
  'entropy_threshold'?: (number);
  'logprob_threshold'?: (number);
  'no_speech_threshold'?: (number);
  'vad_threshold'?: (number);
  'vad_min_silence_seconds'?: (number);
  '_language'?: "language";
  '_target_language'?: "target_language";
  '_min_speakers'?: "min_speakers";
  '_max_speakers'?: "max_speakers";
  '_prompt'?: "prompt";
  '_temperature'?: "temperature";
  '_temperature_increment'?: "temperature_increment";
  '_entropy_threshold'?: "entropy_threshold";
  '_logprob_threshold'?: "logprob_threshold";
  '_no_speech_threshold'?: "no_speech_threshold";
  '_vad_threshold'?: "vad_threshold";
  '_vad_min_silence_seconds'?: "vad_min_silence_seconds";
}
