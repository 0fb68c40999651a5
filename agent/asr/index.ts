/** Speech transcription: ffmpeg decoding, voice activity, whisper, words and output formats. */
export { Transcriber, type TranscriberOptions, type TranscribeRequest, type Progress, type Translator } from "./pipeline.js";
export { checkDiarizationModels, diarize, type DiarizationModels } from "./diarize/index.js";
export { WhisperPool, WhisperSession, type WhisperPoolOptions, type WhisperModelStatus, type WhisperEngineInfo, type DecodeOptions } from "./whisper.js";
export { checkVadModel, detectSpeech, type VadOptions, type SpeechSpan } from "./vad/index.js";

export { AudioError, EngineError, JobAbortedError } from "./errors.js";
