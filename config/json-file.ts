/** Operators' JSON files (catalogs), read and validated with one message shape: the file, the member at fault, what is wrong. */
import { readFileSync } from "node:fs";
import type { z } from "zod";

/** Reads `file` as JSON and parses it with `schema`; throws an Error naming the file and the first member at fault. */
export function loadJsonFile<T extends z.ZodType>(file: string, schema: T): z.output<T> {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new Error(`${file}: ${(err as Error).message}`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(
      `${file}: ${
        issue.path
          .map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`))
          .join("")
          .replace(/^\./, "") || "(top)"
      }: ${issue.message}`,
    );
  }
  return parsed.data;
}
