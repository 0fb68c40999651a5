import { describe, expect, it } from "vitest";
import { CATALOG_DEFAULTS, catalogNames, OperatorCatalogError, parseModelSource, parseOperatorCatalog } from "./operator-catalog.js";

const entry = (more: Record<string, unknown> = {}) => ({ id: "chat-small", source: "hf:org/repo:Q4_K_M", ...more });

/** The error a catalog is refused with. */
function refusal(json: unknown): OperatorCatalogError {
  try {
    parseOperatorCatalog(json);
  } catch (err) {
    expect(err).toBeInstanceOf(OperatorCatalogError);
    return err as OperatorCatalogError;
  }
  throw new Error("the catalog was accepted");
}

describe("parseOperatorCatalog", () => {
  it("applies the defaults to what an entry leaves out, and keeps what it gives", () => {
    const { models } = parseOperatorCatalog({
      models: [
        entry(),
        {
          id: "big",
          source: "/models/big.gguf",
          aliases: ["house/big"],
          context_size: 32768,
          sequences: 8,
          min_replicas: 1,
          max_replicas: 3,
          idle_unload_s: 0,
          memory_bytes: 2 ** 40,
          owned_by: "acme",
          name: "Big",
        },
      ],
    });
    expect(models[0]).toEqual({ id: "chat-small", source: "hf:org/repo:Q4_K_M", ...CATALOG_DEFAULTS });
    expect(CATALOG_DEFAULTS).toEqual({ aliases: [], context_size: 4096, sequences: 4, min_replicas: 0, max_replicas: 1, idle_unload_s: 600 });
    expect(models[1]).toEqual({
      id: "big",
      source: "/models/big.gguf",
      aliases: ["house/big"],
      context_size: 32768,
      sequences: 8,
      min_replicas: 1,
      max_replicas: 3,
      idle_unload_s: 0,
      memory_bytes: 2 ** 40,
      owned_by: "acme",
      name: "Big",
    });
  });

  it("names the entry by index and id, and the field, in every refusal", () => {
    const models = [entry({ id: "a" }), entry({ id: "b" }), entry({ id: "famX", min_replicas: 3, max_replicas: 1 })];
    const err = refusal({ models });
    expect(err.message).toBe('models[2] ("famX"): max_replicas: must be ≥ min_replicas (3), got 1');
    expect(err.field).toBe("models[2].max_replicas");
  });

  it.each([
    ["context_size", 63, "must be a whole number from 64 to 1048576, got 63"],
    ["context_size", 1_048_577, "must be a whole number from 64 to 1048576, got 1048577"],
    ["context_size", 4096.5, "must be a whole number from 64 to 1048576, got 4096.5"],
    ["context_size", "4096", 'must be a whole number from 64 to 1048576, got "4096"'],
    ["sequences", 0, "must be a whole number from 1 to 256, got 0"],
    ["sequences", 257, "must be a whole number from 1 to 256, got 257"],
    ["min_replicas", -1, "must be a whole number from 0 to 1024, got -1"],
    ["min_replicas", 1025, "must be a whole number from 0 to 1024, got 1025"],
    ["max_replicas", 0, "must be a whole number from 1 to 1024, got 0"],
    ["max_replicas", 1025, "must be a whole number from 1 to 1024, got 1025"],
    ["idle_unload_s", -1, "must be a whole number from 0 to 2592000, got -1"],
    ["idle_unload_s", 2_592_001, "must be a whole number from 0 to 2592000, got 2592001"],
    ["memory_bytes", 0, "must be a whole number from 1 to 1125899906842624, got 0"],
    ["memory_bytes", 2 ** 50 + 1, "must be a whole number from 1 to 1125899906842624, got 1125899906842625"],
    ["owned_by", "", "must be a string of 1 to 128 characters"],
    ["name", "x".repeat(129), "must be a string of 1 to 128 characters"],
    ["name", "a\nb", "must hold no control characters"],
  ])("bounds %s (%j)", (field, value, message) => {
    const err = refusal({ models: [entry({ [field]: value })] });
    expect(err.message).toBe(`models[0] ("chat-small"): ${field}: ${message}`);
    expect(err.field).toBe(`models[0].${field}`);
  });

  it("takes ids and aliases of letters, digits and .:_-/ up to 128 characters, nothing else", () => {
    const ok = ["famB-v3.1", "famA4:70b", "org/model_v2", "a", "A".repeat(128)];
    expect(parseOperatorCatalog({ models: ok.map((id) => entry({ id, aliases: [`${id}-alias`.slice(0, 128).replace(/.$/, "z")] })) }).models).toHaveLength(5);
    for (const bad of ["", "-lead", ".hidden", "/abs", "sp ace", "a\u0000b", "é", "A".repeat(129), "a?b", "a#b"]) {
      expect(refusal({ models: [entry({ id: bad })] }).message, bad).toMatch(/^models\[0\]( \(".*"\))?: id: must be 1 to 128 letters, digits, '\.', ':', '_', '-' or '\/', starting with a letter or digit/);
      expect(refusal({ models: [entry({ aliases: ["fine", bad] })] }).message, bad).toMatch(/^models\[0\] \("chat-small"\): aliases\[1\]: must be 1 to 128/);
    }
    expect(refusal({ models: [entry({ aliases: Array.from({ length: 33 }, (_, i) => `a${i}`) })] }).message).toBe('models[0] ("chat-small"): aliases: must be a list of up to 32 names');
  });

  it("refuses a name given twice across ids and aliases together, naming the second and the first", () => {
    expect(refusal({ models: [entry({ id: "a" }), entry({ id: "a" })] }).message).toBe('models[1] ("a"): id: "a" already names models[0]');
    expect(refusal({ models: [entry({ id: "a", aliases: ["x"] }), entry({ id: "b", aliases: ["y", "x"] })] }).message).toBe(
      'models[1] ("b"): aliases[1]: "x" already names models[0] (an alias)',
    );
    expect(refusal({ models: [entry({ id: "a" }), entry({ id: "b", aliases: ["a"] })] }).message).toBe('models[1] ("b"): aliases[0]: "a" already names models[0]');
    expect(refusal({ models: [entry({ id: "a", aliases: ["a"] })] }).message).toBe('models[0] ("a"): aliases[0]: "a" already names models[0]');
    expect(refusal({ models: [entry({ id: "b", aliases: ["x"] }), entry({ id: "x" })] }).field).toBe("models[1].id");
  });

  it("refuses unknown members, a missing id or source, and a catalog that is not one", () => {
    expect(refusal({ models: [entry({ max_replica: 2 })] }).message).toMatch(/^models\[0\] \("chat-small"\): max_replica: is not a field of a catalog entry/);
    expect(refusal({ models: [entry()], extra: 1 }).message).toBe('extra: is not a member of a catalog (only "models")');
    expect(refusal({ models: [{ source: "/m.gguf" }] }).message).toBe("models[0]: id: is required");
    expect(refusal({ models: [{ id: "x" }] }).message).toBe('models[0] ("x"): source: is required');
    expect(refusal({ models: [] }).message).toBe("models: must list at least one model (to go back to the built-in ids, remove the catalog)");
    expect(refusal({ models: Array.from({ length: 1025 }, (_, i) => entry({ id: `m${i}` })) }).message).toBe("models: must list at most 1024 models");
    expect(refusal({ models: ["x"] }).message).toBe("models[0]: must be an object with id and source");
    expect(refusal({}).message).toBe("models: is required");
    expect(refusal([]).message).toBe('(top): must be an object {"models": […]}');
    expect(refusal(null).field).toBe("models");
  });

  it("gives each entry's source in its canonical form: a split GGUF by its first part", () => {
    const { models } = parseOperatorCatalog({
      models: [
        entry({ id: "q", source: "hf:org/repo:Q4_K_M" }),
        entry({ id: "f", source: "hf:org/repo/sub/model.gguf#v1" }),
        entry({ id: "s", source: "hf:org/repo/big-00002-of-00003.gguf" }),
        entry({ id: "p", source: "/models/huge-00003-of-00003.gguf" }),
      ],
    });
    expect(models.map((m) => m.source)).toEqual(["hf:org/repo:Q4_K_M", "hf:org/repo/sub/model.gguf#v1", "hf:org/repo/big-00001-of-00003.gguf", "/models/huge-00001-of-00003.gguf"]);
  });

  it.each([
    ["whisper:base", "must be hf:<org>/<repo>:<quant>, hf:<org>/<repo>/<file>.gguf or an absolute path on the nodes (/models/<file>.gguf)"],
    ["models/x.gguf", "must be hf:<org>/<repo>:<quant>, hf:<org>/<repo>/<file>.gguf or an absolute path on the nodes (/models/<file>.gguf)"],
    ["hf:org", '"hf:org": the repository is missing or malformed'],
    ["hf:org/repo", '"hf:org/repo": name a file (hf:org/repo/file.gguf) or a quantization (hf:org/repo:Q4_K_M)'],
    ["hf:org/repo/../x.gguf", '"hf:org/repo/../x.gguf": the file path has an empty, hidden or malformed part'],
    ["hf:org/repo/x.bin", '"hf:org/repo/x.bin": the file is not a .gguf'],
    ["hf:org/repo/x-00000-of-00003.gguf", "\"hf:org/repo/x-00000-of-00003.gguf\": the split GGUF's part number is 0 or beyond its count"],
    ["/models/../etc/x.gguf", '"/models/../etc/x.gguf" is not a plain absolute path (no \'.\', \'..\' or empty parts)'],
    ["/models//x.gguf", '"/models//x.gguf" is not a plain absolute path (no \'.\', \'..\' or empty parts)'],
    ["/models/x.bin", '"/models/x.bin" is not a .gguf file'],
    ["/models/x\n.gguf", "the path holds a control character"],
    ["/models/x-00004-of-00003.gguf", "\"/models/x-00004-of-00003.gguf\": the split GGUF's part number is 0 or beyond its count"],
    ["/1025 characters", "must be at most 1024 characters"],
  ])("refuses the source %j", (given, message) => {
    const source = given === "/1025 characters" ? `/${"a".repeat(1019)}.gguf` : given;
    const err = refusal({ models: [entry({ source })] });
    expect(err.message).toBe(`models[0] ("chat-small"): source: ${message}`);
    expect(err.field).toBe("models[0].source");
  });

  it("takes speculative as lookup or draft:<source>, the draft's source by source's rules and in its canonical form; none by default", () => {
    const { models } = parseOperatorCatalog({
      models: [
        entry({ id: "l", speculative: "lookup" }),
        entry({ id: "h", speculative: "draft:hf:org/small-GGUF/small-00002-of-00002.gguf" }),
        entry({ id: "p", speculative: "draft:/models/small.gguf" }),
        entry({ id: "n" }),
      ],
    });
    expect(models.map((m) => m.speculative)).toEqual(["lookup", "draft:hf:org/small-GGUF/small-00001-of-00002.gguf", "draft:/models/small.gguf", undefined]);
    expect("speculative" in models[3]!).toBe(false);
  });

  it.each([
    ["ngram", 'expected "lookup" or "draft:GGUF" (a path or an hf: reference), got "ngram"'],
    ["draft:", 'expected "lookup" or "draft:GGUF" (a path or an hf: reference), got "draft:"'],
    ["draft:models/small.gguf", "the draft's source: must be hf:<org>/<repo>:<quant>, hf:<org>/<repo>/<file>.gguf or an absolute path on the nodes (/models/<file>.gguf)"],
    ["draft:/models/../small.gguf", "the draft's source: \"/models/../small.gguf\" is not a plain absolute path (no '.', '..' or empty parts)"],
    ["draft:hf:org/repo/x.bin", "the draft's source: \"hf:org/repo/x.bin\": the file is not a .gguf"],
    [7, 'must be "lookup" or "draft:<source>"'],
    ["1025 characters", "longer than 1024 characters"],
  ])("refuses the speculative value %j, naming the entry and the field", (given, message) => {
    const speculative = given === "1025 characters" ? `draft:/${"a".repeat(1013)}.gguf` : given;
    const err = refusal({ models: [entry({ id: "a" }), entry({ id: "b", speculative })] });
    expect(err.message).toBe(`models[1] ("b"): speculative: ${message}`);
    expect(err.field).toBe("models[1].speculative");
  });

  it("names every model by its ids and aliases", () => {
    const catalog = parseOperatorCatalog({ models: [entry({ id: "a", aliases: ["x", "y"] }), entry({ id: "b" })] });
    const names = catalogNames(catalog);
    expect([...names.keys()]).toEqual(["a", "x", "y", "b"]);
    expect(names.get("y")).toBe(catalog.models[0]);
  });
});

describe("parseModelSource", () => {
  it("reads a hub quantization, a hub file and a path, as the hub and the nodes take them", () => {
    expect(parseModelSource("hf:org/repo:Q4_K_M")).toEqual({ kind: "gguf-quant", ref: "hf:org/repo:Q4_K_M", org: "org", repo: "repo", quant: "Q4_K_M" });
    expect(parseModelSource("hf:org/repo/a/b.gguf#v2")).toMatchObject({ kind: "gguf", org: "org", repo: "repo", path: "a/b.gguf", revision: "v2" });
    expect(parseModelSource("/srv/m-00002-of-00002.gguf")).toEqual({ kind: "path", ref: "/srv/m-00001-of-00002.gguf", path: "/srv/m-00001-of-00002.gguf" });
  });
});
