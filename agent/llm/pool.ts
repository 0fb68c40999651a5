/**
 * One loaded GGUF file: its model, one context with N sequences (slots), and a long-lived
 * `LlamaChat` per sequence. Concurrent requests each hold a slot; llama.cpp batches the
 * sequences that evaluate at the same time.
 */
import { LlamaChat, type ChatHistoryItem, type ChatWrapper, type LlamaContext, type LlamaContextSequence, type LlamaModel } from "node-llama-cpp";
import { GenerationAbortedError } from "./errors.js";

export interface Slot {
  sequence: LlamaContextSequence;
  chat: LlamaChat;
}

export class ModelPool {
  readonly modelIds: string[] = [];
  private readonly free: Slot[];
  private readonly waiters: { resolve: (slot: Slot) => void; reject: (err: Error) => void }[] = [];
  /** Most slots ever busy at once (observability; tests check batching limits with it). */
  peakBusy = 0;

  private constructor(
    readonly path: string,
    readonly model: LlamaModel,
    readonly context: LlamaContext,
    /** The chat template, resolved once from the GGUF (`"auto"`) and shared by every slot. */
    readonly chatWrapper: ChatWrapper,
    slots: Slot[],
  ) {
    this.free = slots;
  }

  static async create(path: string, model: LlamaModel, options: { sequences: number; contextSize: number; threads: number; batchSize?: number }): Promise<ModelPool> {
    const context = await model.createContext({
      sequences: options.sequences,
      contextSize: Math.min(options.contextSize, model.trainContextSize),
      threads: options.threads,
      ...(options.batchSize ? { batchSize: options.batchSize } : {}),
    });
    const slots: Slot[] = [];
    let chatWrapper: ChatWrapper | "auto" = "auto";
    for (let i = 0; i < options.sequences; i++) {
      const sequence = context.getSequence();
      const chat: LlamaChat = new LlamaChat({ contextSequence: sequence, chatWrapper, autoDisposeSequence: false });
      chatWrapper = chat.chatWrapper;
      slots.push({ sequence, chat });
    }
    return new ModelPool(path, model, context, slots[0]!.chat.chatWrapper, slots);
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

  /** Tokens of the prompt as the model sees it: the history rendered through the chat template. */
  countPromptTokens(history: ChatHistoryItem[]): number {
    const rendered = history.at(-1)?.type === "model" ? history : [...history, { type: "model" as const, response: [] }];
    return this.chatWrapper.generateContextState({ chatHistory: rendered }).contextText.tokenize(this.model.tokenizer).length;
  }

  /** Takes a free slot, waiting (FIFO) for one when all are busy. */
  acquire(signal?: AbortSignal): Promise<Slot> {
    if (signal?.aborted) return Promise.reject(new GenerationAbortedError());
    const slot = this.free.pop();
    if (slot) return Promise.resolve(this.took(slot));
    return new Promise((resolve, reject) => {
      const waiter = {
        resolve: (s: Slot) => { signal?.removeEventListener("abort", onAbort); resolve(s); },
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
    const next = this.waiters.shift();
    if (next) next.resolve(slot);
    else this.free.push(slot);
  }

  private took(slot: Slot): Slot {
    this.peakBusy = Math.max(this.peakBusy, this.busy);
    return slot;
  }

  async dispose(): Promise<void> {
    for (const w of this.waiters.splice(0)) w.reject(new GenerationAbortedError());
    await this.context.dispose();
  }
}
