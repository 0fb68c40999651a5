/**
 * Watching node-llama-cpp's native calls in tests. Kiln's patches (`patches/npm`) work on the
 * context's internal binding object (`_ctx`), so tests that check them count its calls.
 */
import type { LlamaContext } from "node-llama-cpp";

/**
 * Calls `onCall(name, args, result)` on every call of the named methods of `context`'s native
 * binding object, right after the call (`result` is what it returned: a promise for the asynchronous
 * ones). The methods are read-only on the prototype, so they are shadowed on the instance.
 * @returns a function that removes the shadows.
 */
export function watchBinding(context: LlamaContext, names: string[], onCall: (name: string, args: unknown[], result: unknown) => void): () => void {
  const native = (context as unknown as { _ctx: Record<string, (...args: unknown[]) => unknown> })._ctx;
  for (const name of names) {
    const original = native[name]!;
    Object.defineProperty(native, name, {
      configurable: true,
      value(this: unknown, ...args: unknown[]) {
        const result = original.apply(this, args);
        onCall(name, args, result);
        return result;
      },
    });
  }
  return () => {
    for (const name of names) delete native[name];
  };
}
