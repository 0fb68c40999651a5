/**
 * One loaded GGUF file: its model, its chat template, and one context with N sequences (slots).
 * Concurrent requests each hold a slot; llama.cpp batches the sequences that evaluate at the same
 * time. A slot keeps its KV cache between requests, so a conversation that grows by a turn only
 * evaluates the new tokens when it lands on the same slot.
 */
import {
  resolveChatWrapper,
  type ChatHistoryItem,
  type ChatModelFunctions,
  type ChatWrapper,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaEmbeddingContext,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import { MAX_EMBEDDING_BYTES, MAX_EMBEDDING_TOKENS, SLOT_PROMPT_SIMILARITY } from "../../core/chat.js";
import { ContextLengthExceededError, GenerationAbortedError, InvalidDimensionsError, TooManyEmbeddingsError, TooManyEmbeddingTokensError } from "./errors.js";
import { renderPrompt, renderRawPrompt, type RenderedPrompt } from "./turn.js";
import { slotPredictor, SpeculationGate, type Speculation } from "./speculative.js";

export interface Slot {
  sequence: LlamaContextSequence;
  /** The order the slot's sequence was made in, which is llama.cpp's sequence id for it. */
  index: number;
  /** The cache scope (an account's opaque name) whose prompt the sequence's KV cache holds. */
  scope?: string;
  /** When it was last released (the pool's count of releases): the least recently used slot is reused first. */
  used?: number;
  /** The tokens its KV cache holds, copied from the sequence once while it is free (`contextTokens` copies on each read). */
  tokens?: readonly Token[];
}

/** What a request could reuse of a slot's KV cache: its cache scope and its prompt's tokens. */
export interface SlotWant {
  scope: string;
  tokens: readonly Token[];
}

export class ModelPool {
  readonly modelIds: string[] = [];
  private readonly free: Slot[];
  private readonly waiters: { resolve: (slot: Slot) => void; reject: (err: Error) => void }[] = [];
  /** Told when the last busy slot is released (`idle`). */
  private readonly idlers: (() => void)[] = [];
  /** Most slots ever busy at once (observability; tests check batching limits with it). */
  peakBusy = 0;
  /** Slots held now by the agent's own work (transcript translation), which the scheduler did not send. */
  localBusy = 0;
  /** Releases so far: the clock of `Slot.used`. */
  private releases = 0;

  /**
   * Bytes of text in the vocabulary's longest token (special tokens included). Every token of a
   * prompt covers at most this much of its text, so text longer than `contextSize × maxTokenBytes`
   * bytes cannot fit the context, whatever its tokens. Infinity for vocabularies whose tokenizer
   * may drop text (WordPiece and Unigram normalize whitespace), where the bound does not hold.
   */
  readonly maxTokenBytes: number;
  /** Tokens in the model's vocabulary (ids 0 to this − 1). */
  readonly vocabularySize: number;
  /** The embedding context, made at the first embeddings request (it holds a KV cache of its own). */
  private embeddingContext?: Promise<LlamaEmbeddingContext>;
  private readonly embeddingOptions: { contextSize: number; threads: number };
  /** Embedding requests run one at a time (the context has one sequence): the tail of the queue. */
  private embeddingQueue: Promise<unknown> = Promise.resolve();
  /** Speculative decoding's state (speculative.ts), when the pool speculates: its counts, and whether it is on. */
  speculation?: SpeculationGate;
  /** A draft model's context (a sequence per slot) and the draft model, when it is not the pool's own: disposed with the pool. */
  private draft?: { context: LlamaContext; model?: LlamaModel };

  private constructor(
    readonly path: string,
    readonly model: LlamaModel,
    readonly context: LlamaContext,
    /** The chat template, resolved once from the GGUF (its `tokenizer.chat_template`, else its name) and shared by every slot. */
    readonly chatWrapper: ChatWrapper,
    slots: Slot[],
    /** `system_fingerprint` of the replies (fingerprint.ts): the file's digest and the build's. */
    readonly fingerprint: string,
    options: { threads: number },
  ) {
    this.free = slots;
    this.embeddingOptions = { contextSize: context.contextSize, threads: options.threads };
    this.maxTokenBytes = longestTokenBytes(model);
    this.vocabularySize = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length ?? 0; // what iterateAllTokens() counts
  }

  static async create(
    path: string,
    model: LlamaModel,
    options: {
      sequences: number;
      contextSize: number;
      threads: number;
      batchSize?: number;
      fingerprint: string;
      /**
       * Speculative decoding for every slot (speculative.ts), with the draft model loaded for a
       * `draft` speculation (the pool's own model when the draft is the same file; the pool owns and
       * disposes any other). None when unset.
       */
      speculative?: { speculation: Speculation; draftModel?: LlamaModel };
    },
  ): Promise<ModelPool> {
    const contextSize = Math.min(options.contextSize, model.trainContextSize);
    const context = await model.createContext({
      sequences: options.sequences,
      contextSize,
      threads: options.threads,
      ...(options.batchSize ? { batchSize: options.batchSize } : {}),
    });
    const spec = options.speculative;
    const gate = spec ? new SpeculationGate(spec.speculation) : undefined;
    let draftContext: LlamaContext | undefined;
    try {
      if (spec?.draftModel) {
        draftContext = await spec.draftModel.createContext({
          sequences: options.sequences,
          contextSize: Math.min(contextSize, spec.draftModel.trainContextSize),
          threads: options.threads,
          ...(options.batchSize ? { batchSize: options.batchSize } : {}),
        });
        ensureDraftFits(context, draftContext);
      }
    } catch (err) {
      await draftContext?.dispose();
      await context.dispose();
      throw err;
    }
    const slots = Array.from({ length: options.sequences }, (_, index): Slot => ({
      sequence: context.getSequence(gate ? { tokenPredictor: slotPredictor(gate, draftContext?.getSequence()) } : {}),
      index,
    }));
    const pool = new ModelPool(path, model, context, resolveChatWrapper(model), slots, options.fingerprint, options);
    if (gate) pool.speculation = gate;
    if (draftContext) pool.draft = { context: draftContext, ...(spec!.draftModel !== model ? { model: spec!.draftModel! } : {}) };
    return pool;
  }

  get slots(): number {
    return this.context.totalSequences;
  }

  get busy(): number {
    return this.slots - this.free.length;
  }

  /** Tokens of context one sequence holds. */
  get contextSize(): number {
    return this.context.contextSize;
  }

  /**
   * Refuses `bytes` of text that cannot fit the context whatever its tokens (more than contextSize ×
   * maxTokenBytes), before it is tokenized: tokenizing runs on the event loop, and on some vocabularies
   * in quadratic time. `field` is what the error names.
   */
  refuseUnfittable(bytes: number, field = "messages"): void {
    if (bytes > this.contextSize * this.maxTokenBytes) throw ContextLengthExceededError.text(bytes, this.contextSize, this.maxTokenBytes, field);
  }

  /** The prompt as the model sees it: the history rendered through the chat template (with `functions` documented), and its stop triggers. */
  render(history: ChatHistoryItem[], functions?: ChatModelFunctions): RenderedPrompt {
    return renderPrompt(this.model, this.chatWrapper, history, functions);
  }

  /** A raw prompt as the model sees it: its text tokenized as text (never as special tokens), after the BOS token the model wants. */
  renderRaw(text: string): RenderedPrompt {
    return renderRawPrompt(this.model, text);
  }

  /**
   * The embeddings of `inputs`, in order, and how many tokens they held. Runs after the pool's earlier
   * embedding requests. An input longer than the context, or `dimensions` other than the model's
   * vector size (when given), is refused before anything is evaluated.
   */
  embed(inputs: readonly string[], dimensions: number | undefined, signal?: AbortSignal): Promise<{ vectors: number[][]; promptTokens: number }> {
    const size = this.model.embeddingVectorSize;
    if (dimensions !== undefined && dimensions !== size) return Promise.reject(new InvalidDimensionsError(dimensions, size));
    if (inputs.length * size * 4 > MAX_EMBEDDING_BYTES) return Promise.reject(new TooManyEmbeddingsError(inputs.length, size));
    const run = this.embeddingQueue.then(async () => {
      if (signal?.aborted) throw new GenerationAbortedError(); // cancelled while it waited: nothing tokenized
      // the embedding context adds a BOS and an EOS token and needs room beyond them
      const room = this.embeddingOptions.contextSize - 2;
      let total = 0;
      const tokenized = inputs.map((input, i) => {
        const tokens = this.model.tokenize(input);
        if (tokens.length >= room) throw ContextLengthExceededError.input(i, tokens.length, room);
        total += tokens.length;
        if (total > MAX_EMBEDDING_TOKENS) throw new TooManyEmbeddingTokensError(i);
        return tokens;
      });
      this.embeddingContext ??= this.model.createEmbeddingContext(this.embeddingOptions).catch((err: unknown) => {
        this.embeddingContext = undefined;
        throw err;
      }); // the next request tries again
      const context = await this.embeddingContext;
      const vectors: number[][] = [];
      for (const tokens of tokenized) {
        if (signal?.aborted) throw new GenerationAbortedError();
        vectors.push([...(await context.getEmbeddingFor(tokens)).vector]);
      }
      return { vectors, promptTokens: tokenized.reduce((n, t) => n + t.length, 0) };
    });
    this.embeddingQueue = run.catch(() => undefined);
    return run;
  }

  /**
   * Takes a free slot, waiting (FIFO) for one when all are busy. With `want`, the free slot of its
   * cache scope whose cached tokens share the longest prefix with its prompt (at least
   * SLOT_PROMPT_SIMILARITY of what the slot holds), else an empty one, else the least recently
   * used: recent conversations stay resident while there are slots for them. Without `want`, or
   * among equals, the lowest sequence id: without a unified KV cache llama.cpp puts only consecutive
   * sequence ids in one micro-batch, so busy slots packed at the low ids share one graph.
   */
  acquire(signal?: AbortSignal, want?: SlotWant): Promise<Slot> {
    if (signal?.aborted) return Promise.reject(new GenerationAbortedError());
    const slot = want ? this.takeFor(want) : this.takeLowest();
    if (slot) return Promise.resolve(this.took(slot));
    return new Promise((resolve, reject) => {
      const waiter = {
        resolve: (s: Slot) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(s);
        },
        reject,
      };
      const onAbort = (): void => {
        const i = this.waiters.indexOf(waiter);
        if (i < 0) return; // already handed a slot
        this.waiters.splice(i, 1);
        reject(new GenerationAbortedError());
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  release(slot: Slot): void {
    slot.used = ++this.releases;
    slot.tokens = undefined; // what it holds changed while it was used
    const next = this.waiters.shift();
    if (next) next.resolve(slot);
    else this.free.push(slot);
    if (this.busy === 0) for (const settle of this.idlers.splice(0)) settle();
  }

  /** Resolves once no slot is busy (at once when none is); rejects when `signal` aborts first. */
  idle(signal?: AbortSignal): Promise<void> {
    if (this.busy === 0) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(new GenerationAbortedError());
    return new Promise((resolve, reject) => {
      const settle = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      const onAbort = () => {
        this.idlers.splice(this.idlers.indexOf(settle), 1);
        reject(new GenerationAbortedError());
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.idlers.push(settle);
    });
  }

  /** The free slot for `want` (acquire). */
  private takeFor(want: SlotWant): Slot | undefined {
    if (this.free.length === 0) return undefined;
    let best = -1;
    let bestShared = 0;
    for (let i = 0; i < this.free.length; i++) {
      const slot = this.free[i]!;
      const held = slot.sequence.nextTokenIndex;
      if (slot.scope !== want.scope || held === 0) continue;
      const shared = sharedPrefix((slot.tokens ??= slot.sequence.contextTokens), want.tokens);
      if (shared < held * SLOT_PROMPT_SIMILARITY && this.free.length > 1) continue;
      if (shared > bestShared || (shared === bestShared && shared > 0 && slot.index < this.free[best]!.index)) [best, bestShared] = [i, shared];
    }
    if (best < 0) {
      // an empty slot, lowest id first; else the one used longest ago
      const rank = (s: Slot): number => (s.sequence.nextTokenIndex === 0 ? -1e15 + s.index : (s.used ?? 0));
      best = 0;
      for (let i = 1; i < this.free.length; i++) if (rank(this.free[i]!) < rank(this.free[best]!)) best = i;
    }
    return this.free.splice(best, 1)[0];
  }

  private takeLowest(): Slot | undefined {
    if (this.free.length === 0) return undefined;
    let best = 0;
    for (let i = 1; i < this.free.length; i++) {
      if (this.free[i]!.index < this.free[best]!.index) best = i;
    }
    return this.free.splice(best, 1)[0];
  }

  private took(slot: Slot): Slot {
    this.peakBusy = Math.max(this.peakBusy, this.busy);
    return slot;
  }

  async dispose(): Promise<void> {
    for (const w of this.waiters.splice(0)) w.reject(new GenerationAbortedError());
    await (await this.embeddingContext?.catch(() => undefined))?.dispose();
    await this.context.dispose();
    await this.draft?.context.dispose();
    await this.draft?.model?.dispose();
    await this.model.dispose(); // the pool owns its model: an unloaded replica frees its weights too
  }
}

/** Vocabularies whose tokenizers keep every byte of the text (SentencePiece with byte fallback, byte-level BPE). */
const BYTE_KEEPING_VOCABULARIES: ReadonlySet<string> = new Set(["spm", "bpe"]);

/**
 * The byte length of the vocabulary's longest token as text. A byte token of a partial UTF-8
 * sequence detokenizes to U+FFFD (3 bytes), which only overstates it.
 */
function longestTokenBytes(model: LlamaModel): number {
  if (!BYTE_KEEPING_VOCABULARIES.has(model.vocabularyType)) return Infinity;
  let longest = 1;
  for (const token of model.iterateAllTokens()) longest = Math.max(longest, Buffer.byteLength(model.detokenize([token], true)));
  return longest;
}

/** How many tokens `a` and `b` share from their start. */
function sharedPrefix(a: readonly Token[], b: readonly Token[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/**
 * Refuses a draft whose vocabulary cannot draft for the model (its type, special tokens or tokens
 * differ: llama.cpp's own rules), at load: node-llama-cpp checks it only when the draft first
 * predicts, so a model would report ready and then fail every request allowed to speculate.
 */
function ensureDraftFits(context: LlamaContext, draft: LlamaContext): void {
  type Binding = { ensureDraftContextIsCompatibleForSpeculative(draft: Binding): void };
  const binding = (c: LlamaContext) => (c as unknown as { _ctx: Binding })._ctx;
  try {
    binding(context).ensureDraftContextIsCompatibleForSpeculative(binding(draft));
  } catch (err) {
    throw new Error(`its draft model cannot draft for it: ${(err as Error).message}`);
  }
}
