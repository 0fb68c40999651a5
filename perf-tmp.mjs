import { getLlama, LlamaChat, resolveChatWrapper } from "node-llama-cpp";
import { generateTurn, renderPrompt } from "/work/main/dist/agent/llm/turn.js";
const [modelPath, threads = "1", n = "128"] = process.argv.slice(2);
const llama = await getLlama({ gpu: false, build: "never", maxThreads: Number(threads) });
const model = await llama.loadModel({ modelPath });
const ctx = await model.createContext({ sequences: 1, contextSize: 2048, threads: Number(threads) });
const seq = ctx.getSequence();
const chat = new LlamaChat({ contextSequence: seq, autoDisposeSequence: false });
const h = [{ type: "user", text: "Once upon a time" }];
const w = resolveChatWrapper(model);
const res = { chat: [], turn: [] };
for (let i = 0; i < 4; i++) {
  await seq.clearHistory();
  let t0 = performance.now(); let b = seq.tokenMeter.usedOutputTokens;
  await chat.generateResponse(h, { maxTokens: Number(n), temperature: 0, onTextChunk: () => {} });
  if (i) res.chat.push((seq.tokenMeter.usedOutputTokens - b) / (performance.now() - t0) * 1000);
  await seq.clearHistory();
  t0 = performance.now();
  const r = await generateTurn(seq, renderPrompt(model, w, h), { maxTokens: Number(n), temperature: 0, onText: () => {} });
  if (i) res.turn.push(r.completionTokens / (performance.now() - t0) * 1000);
}
for (const [k, v] of Object.entries(res)) console.log(k, v.map((x) => x.toFixed(0)).join(" "));
process.exit(0);
