/** Random access to a 16 kHz mono f32le PCM file written by `decodeToPcm`. */
import { open, type FileHandle } from "node:fs/promises";

export class PcmFile {
  private constructor(
    private readonly handle: FileHandle,
    readonly samples: number,
  ) {}

  static async open(path: string): Promise<PcmFile> {
    const handle = await open(path, "r");
    const { size } = await handle.stat();
    return new PcmFile(handle, Math.floor(size / 4));
  }

  /** Samples [start, end) as a fresh Float32Array (clamped to the file). */
  async read(start: number, end: number): Promise<Float32Array> {
    const from = Math.max(0, Math.min(start, this.samples));
    const to = Math.max(from, Math.min(end, this.samples));
    const out = new Float32Array(to - from);
    if (to > from) await this.handle.read(new Uint8Array(out.buffer), 0, out.byteLength, from * 4);
    return out;
  }

  async close(): Promise<void> {
    await this.handle.close();
  }
}
