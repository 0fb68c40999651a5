/**
 * What every model fabricator shares: tensor specs, F16 encoding, a seeded normal source and an
 * atomic streaming file writer (`path.partial`, renamed when complete, removed on failure).
 */
import { createWriteStream } from "node:fs";
import { rename, unlink } from "node:fs/promises";
import { once } from "node:events";

/** ggml tensor types the fabricators emit. */
export type TensorType = "f32" | "f16";
export const GGML_TYPE_ID: Record<TensorType, number> = { f32: 0, f16: 1 };
export const BYTES_PER_ELEMENT: Record<TensorType, number> = { f32: 4, f16: 2 };

export interface TensorSpec {
  name: string;
  /** Dimensions innermost first (ggml's `ne`): a [rows × cols] matrix is `[cols, rows]`. */
  dims: number[];
  type: TensorType;
  /** Writes the tensor's values, in order, into `out` (length = product of dims). */
  fill(out: Float32Array): void;
}

export function elementCount(dims: readonly number[]): number {
  return dims.reduce((a, b) => a * b, 1);
}

/** IEEE-754 half from a float (round to nearest even; subnormals flushed). */
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
function toHalf(value: number): number {
  f32[0] = value;
  const x = u32[0]!;
  const sign = (x >>> 16) & 0x8000;
  let exp = ((x >>> 23) & 0xff) - 127 + 15;
  let mant = (x & 0x7fffff) + 0x1000; // round to nearest
  if (mant & 0x800000) {
    mant = 0;
    exp += 1;
  } // the rounding carried into the exponent
  if (exp <= 0) return sign;
  if (exp >= 31) return sign | 0x7c00;
  return sign | (exp << 10) | (mant >>> 13);
}

/** The tensor's little-endian data in its type. */
export function encodeTensor(spec: TensorSpec): Buffer {
  const count = elementCount(spec.dims);
  const values = new Float32Array(count);
  spec.fill(values);
  if (spec.type === "f32") return Buffer.from(values.buffer, values.byteOffset, values.byteLength);
  const half = new Uint16Array(count);
  for (let i = 0; i < count; i++) half[i] = toHalf(values[i]!);
  return Buffer.from(half.buffer);
}

/** Mulberry32: a small seeded PRNG giving uniforms in [0, 1). */
export function uniformSource(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Standard normals from a seeded Mulberry32 through Box–Muller. */
export function normalSource(seed: number): () => number {
  const uniform = uniformSource(seed);
  return () => Math.sqrt(-2 * Math.log(uniform() + 1e-12)) * Math.cos(2 * Math.PI * uniform());
}

/** Fills with seeded normals times `scale`. */
export const randomFill =
  (normal: () => number, scale: number) =>
  (out: Float32Array): void => {
    for (let i = 0; i < out.length; i++) out[i] = normal() * scale;
  };

/**
 * Writes a file atomically: `produce` streams buffers into `path.partial`, which is renamed to
 * `path` once complete and removed if anything fails, so a reader never sees half a model.
 */
export async function writeAtomically(path: string, produce: (write: (buf: Buffer) => Promise<void>) => Promise<void>): Promise<void> {
  const partial = `${path}.partial`;
  const out = createWriteStream(partial);
  try {
    await produce(async (buf) => {
      if (!out.write(buf)) await once(out, "drain");
    });
    out.end();
    await once(out, "finish");
    await rename(partial, path);
  } catch (err) {
    out.destroy();
    await unlink(partial).catch(() => undefined);
    throw err;
  }
}
