/**
 * A minimal GGUF (v3) writer: enough of the format to fabricate llama-architecture
 * test models with random weights. Format reference: ggml's docs/gguf.md.
 *
 * Layout: header (magic, version, tensor count, metadata count) → metadata key/values →
 * tensor infos (name, dims innermost-first, type, offset) → padding → aligned tensor data.
 *
 * `writeGgufSplit` writes a model as llama.cpp's gguf-split does (tools/gguf-split/gguf-split.cpp):
 * parts `<prefix>-00001-of-0000N.gguf` …, each a valid GGUF holding its share of the tensors (in order)
 * and the keys `split.no` (u16, from 0), `split.count` (u16) and `split.tensors.count` (i32, the whole
 * model's); the first part holds every other key as well (llama-model-loader.cpp loads the model from
 * it and finds the other parts by that name pattern).
 */
import { BYTES_PER_ELEMENT, elementCount, encodeTensor, GGML_TYPE_ID, writeAtomically, type TensorSpec } from "./tensors.js";

export type { TensorSpec, TensorType } from "./tensors.js";

const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
const GGUF_VERSION = 3;
const ALIGNMENT = 32;

/** GGUF metadata value types. */
export const enum GgufType {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
}

export type MetadataValue =
  | { type: GgufType.UINT16 | GgufType.UINT32 | GgufType.INT32 | GgufType.FLOAT32 | GgufType.BOOL; value: number | boolean }
  | { type: GgufType.STRING; value: string }
  | { type: GgufType.ARRAY; itemType: GgufType.STRING; value: string[] }
  | { type: GgufType.ARRAY; itemType: GgufType.FLOAT32 | GgufType.INT32; value: number[] };

class ByteSink {
  private chunks: Buffer[] = [];
  length = 0;
  push(buf: Buffer): void {
    this.chunks.push(buf);
    this.length += buf.length;
  }
  u32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    this.push(b);
  }
  i32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(v);
    this.push(b);
  }
  u64(v: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(v));
    this.push(b);
  }
  f32(v: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(v);
    this.push(b);
  }
  str(s: string): void {
    const b = Buffer.from(s, "utf8");
    this.u64(b.length);
    this.push(b);
  }
  pad(to: number): void {
    const r = this.length % to;
    if (r !== 0) this.push(Buffer.alloc(to - r));
  }
  toBuffer(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

function writeValue(sink: ByteSink, v: MetadataValue): void {
  sink.u32(v.type);
  switch (v.type) {
    case GgufType.STRING:
      sink.str(v.value);
      return;
    case GgufType.UINT16: {
      const b = Buffer.alloc(2);
      b.writeUInt16LE(Number(v.value));
      sink.push(b);
      return;
    }
    case GgufType.UINT32:
      sink.u32(Number(v.value));
      return;
    case GgufType.INT32:
      sink.i32(Number(v.value));
      return;
    case GgufType.FLOAT32:
      sink.f32(Number(v.value));
      return;
    case GgufType.BOOL:
      sink.push(Buffer.from([v.value ? 1 : 0]));
      return;
    case GgufType.ARRAY: {
      sink.u32(v.itemType);
      sink.u64(v.value.length);
      for (const item of v.value) {
        if (v.itemType === GgufType.STRING) sink.str(item as string);
        else if (v.itemType === GgufType.FLOAT32) sink.f32(item as number);
        else sink.i32(item as number);
      }
      return;
    }
  }
}

/**
 * Writes a GGUF file atomically (to `path + ".partial"`, then renamed), streaming tensor
 * data so that models of hundreds of megabytes never sit in memory at once.
 */
export async function writeGguf(path: string, metadata: Record<string, MetadataValue>, tensors: TensorSpec[]): Promise<void> {
  const head = new ByteSink();
  head.u32(GGUF_MAGIC);
  head.u32(GGUF_VERSION);
  head.u64(tensors.length);
  head.u64(Object.keys(metadata).length);
  for (const [key, value] of Object.entries(metadata)) {
    head.str(key);
    writeValue(head, value);
  }
  let offset = 0;
  for (const t of tensors) {
    head.str(t.name);
    head.u32(t.dims.length);
    for (const d of t.dims) head.u64(d);
    head.u32(GGML_TYPE_ID[t.type]);
    head.u64(offset);
    const size = elementCount(t.dims) * BYTES_PER_ELEMENT[t.type];
    offset += Math.ceil(size / ALIGNMENT) * ALIGNMENT;
  }
  head.pad(ALIGNMENT);

  await writeAtomically(path, async (write) => {
    await write(head.toBuffer());
    for (const t of tensors) {
      const data = encodeTensor(t);
      await write(data);
      const rem = data.length % ALIGNMENT;
      if (rem !== 0) await write(Buffer.alloc(ALIGNMENT - rem));
    }
  });
}

/** The name of part `part` (1-based) of `count`: llama.cpp's `llama_split_path`, `<prefix>-%05d-of-%05d.gguf`. */
export function splitPartPath(prefix: string, part: number, count: number): string {
  return `${prefix}-${String(part).padStart(5, "0")}-of-${String(count).padStart(5, "0")}.gguf`;
}

/**
 * Writes a model split in `parts` GGUFs as llama.cpp's gguf-split does (see the top of this file): the
 * tensors, in order, shared out as evenly as their count allows (every part holds at least one).
 * Returns the parts' paths, first part first.
 */
export async function writeGgufSplit(prefix: string, parts: number, metadata: Record<string, MetadataValue>, tensors: TensorSpec[]): Promise<string[]> {
  if (!Number.isInteger(parts) || parts < 1 || parts > 99_999) throw new Error(`a split GGUF has 1 to 99999 parts, not ${parts}`);
  if (tensors.length < parts) throw new Error(`${tensors.length} tensors cannot fill ${parts} parts`);
  const paths: string[] = [];
  let from = 0;
  for (let i = 0; i < parts; i++) {
    const to = Math.round(((i + 1) * tensors.length) / parts);
    const split: Record<string, MetadataValue> = {
      "split.no": { type: GgufType.UINT16, value: i },
      "split.count": { type: GgufType.UINT16, value: parts },
      "split.tensors.count": { type: GgufType.INT32, value: tensors.length },
    };
    const path = splitPartPath(prefix, i + 1, parts);
    await writeGguf(path, i === 0 ? { ...metadata, ...split } : split, tensors.slice(from, to));
    paths.push(path);
    from = to;
  }
  return paths;
}
