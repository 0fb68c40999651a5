/**
 * The speech models beside whisper that `kiln models pull speech:<name>` fetches into the agent's
 * `--whisper-dir`: Silero's voice-activity model (which every transcription runs first) and the two
 * models of speaker diarization (a pyannote segmentation model and a speaker-embedding model, both
 * as sherpa-onnx exports). Each is a file of a model hub repository at a pinned commit, pinned by its
 * sha256 and size, and installed under the file name the agent looks for by default.
 */

/** What a speech model does in the pipeline. */
export type SpeechModelRole = "vad" | "segmentation" | "embedding";

export interface SpeechCatalogModel {
  /** The name `speech:<name>` takes. */
  name: string;
  role: SpeechModelRole;
  /** Hub repository, `org/name`. */
  repo: string;
  /** The commit the file is pinned at. */
  revision: string;
  /** The file's path in the repository. */
  path: string;
  /** The file name it is installed under in `--whisper-dir`. */
  file: string;
  /** The file's sha256 (hex): a download with any other is refused. */
  sha256: string;
  /** Bytes of the file. */
  sizeBytes: number;
  /** The weights' licence, as their authors publish it. */
  licence: string;
}

/**
 * The built-in entries. Each sha256 and size was read from the file itself: Silero VAD v5.0 is
 * byte-identical to `files/silero_vad.onnx` at tag v5.0 of snakers4/silero-vad (the same git blob);
 * the segmentation model is the int8 sherpa-onnx export of pyannote/segmentation-3.0; the embedding
 * model is 3D-Speaker's ERes2Net base, the one sherpa-onnx's diarization examples use.
 */
export const SPEECH_MODELS: readonly SpeechCatalogModel[] = [
  {
    name: "silero-vad",
    role: "vad",
    repo: "csukuangfj/vad",
    revision: "fba88cd2e921609e7675c3aaf51e0b9b295da4bc",
    path: "silero_vad_v5.onnx",
    file: "silero_vad.onnx",
    sha256: "6b99cbfd39246b6706f98ec13c7c50c6b299181f2474fa05cbc8046acc274396",
    sizeBytes: 2_313_101,
    licence: "MIT",
  },
  {
    name: "pyannote-segmentation-3.0",
    role: "segmentation",
    repo: "csukuangfj/sherpa-onnx-pyannote-segmentation-3-0",
    revision: "9403a6902bb58e3d5ae8c7e77c3422de279db2e0",
    path: "model.int8.onnx",
    file: "pyannote-segmentation-3.0.int8.onnx",
    sha256: "d582f4b4c6b48205de7e0643c57df0df5615a3c176189be3fc461e9d18827b5d",
    sizeBytes: 1_540_506,
    licence: "MIT",
  },
  {
    name: "3dspeaker-eres2net-base",
    role: "embedding",
    repo: "csukuangfj/speaker-embedding-models",
    revision: "0743f301363dec56491a490f6d6cbc9d67f9a3bf",
    path: "3dspeaker_speech_eres2net_base_sv_zh-cn_3dspeaker_16k.onnx",
    file: "3dspeaker-eres2net-base.onnx",
    sha256: "1a331345f04805badbb495c775a6ddffcdd1a732567d5ec8b3d5749e3c7a5e4b",
    sizeBytes: 39_593_761,
    licence: "Apache-2.0",
  },
];

/** The built-in model that plays `role` (each role has one): its file is the agent's default for that role. */
export function speechModelFor(role: SpeechModelRole, models: readonly SpeechCatalogModel[] = SPEECH_MODELS): SpeechCatalogModel {
  return models.find((m) => m.role === role)!;
}
