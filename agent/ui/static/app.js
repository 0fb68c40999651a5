// Kiln's transcription page: plain JavaScript over the public /api endpoints.
const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "kiln-agent-token";
const LOW_CONFIDENCE = 0.5;
const POLL_MS = 500;
/** What a processing job's `phase` is called on screen. */
const PHASES = {
  queued: "queued",
  downloading_model: "downloading the model",
  decoding: "decoding",
  detecting_speech: "finding speech",
  diarizing: "telling speakers apart",
  transcribing: "transcribing",
  translating: "translating",
  writing: "writing the result",
};

let node = null;
/** When the node panel was last read for a job's download (ms). */
let nodeReadAt = 0;
let selected = [];
/** Each job's handle (returned at upload; reading the job needs it, or the instance's token). Kept in this tab only. */
const handles = new Map();

// --- API ------------------------------------------------------------------------------------

/** Calls the API with the instance's token if one was given, else with the job's handle (`job`: its id). */
async function api(path, init = {}, job = undefined) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const credential = token ?? handles.get(job);
  const headers = new Headers(init.headers ?? {});
  if (credential) headers.set("Authorization", `Bearer ${credential}`);
  const res = await fetch(path, { ...init, headers });
  // Only the instance's token is asked for; a job's handle that no longer opens it (deleted, expired) is the job's error.
  const code =
    res.status === 401
      ? (
          await res
            .clone()
            .json()
            .catch(() => null)
        )?.error?.code
      : undefined;
  if (code === "missing_api_key" || code === "invalid_api_key") {
    sessionStorage.removeItem(TOKEN_KEY);
    await askToken(token ? "That token was not accepted." : "");
    return api(path, init, job);
  }
  return res;
}

function askToken(message) {
  const dialog = $("token-dialog");
  $("err-token").textContent = message;
  return new Promise((resolve) => {
    $("token-form").onsubmit = () => {
      sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
      resolve();
    };
    if (!dialog.open) dialog.showModal();
    $("token").focus();
  });
}

/** An error body's message, split into the field it names and the words for the user. */
function explain(body, fallback) {
  const message = body?.error?.message ?? fallback;
  const m = /^([a-z_]+): (.*)$/s.exec(message);
  return m ? { field: m[1], text: m[2] } : { field: "form", text: message };
}

// --- Formatting -----------------------------------------------------------------------------

const formatBytes = (n) => (n >= 1024 ** 3 ? `${+(n / 1024 ** 3).toFixed(1)} GB` : n >= 1024 ** 2 ? `${+(n / 1024 ** 2).toFixed(1)} MB` : `${Math.round(n / 1024)} KB`);
function clock(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  const h = Math.floor(s / 3600),
    m = Math.floor((s % 3600) / 60),
    r = s % 60;
  const two = (n) => String(n).padStart(2, "0");
  return h ? `${h}:${two(m)}:${two(r)}` : `${two(m)}:${two(r)}`;
}
const eta = (seconds) => (seconds > 0 ? `about ${seconds < 60 ? `${seconds} s` : `${Math.ceil(seconds / 60)} min`} left` : "");
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k === "style") e.style.cssText = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

// --- Node panel and choices -----------------------------------------------------------------

async function loadNode() {
  const res = await api("/api/node");
  if (!res.ok) return;
  node = await res.json();
  $("max-files").textContent = node.capabilities.max_files;
  $("max-size").textContent = formatBytes(node.capabilities.max_upload_bytes);
  const gpus = node.gpus.length ? node.gpus.map((g) => `${g.model} (${formatBytes(g.memory_total_bytes)})`).join(", ") : "none";
  const sched = node.scheduler ? `${node.scheduler.state} (${node.scheduler.address})` : "not part of a fleet";
  const rows = [
    ["Node", node.node_id],
    ["Compute", node.compute],
    ["GPUs", gpus],
    ["CPU", `${node.cpu} · ${node.cpu_cores} cores`],
    ["Memory", `${formatBytes(node.memory_total_bytes - node.memory_free_bytes)} used of ${formatBytes(node.memory_total_bytes)}`],
    ["Jobs", `${node.jobs.running} running, ${node.jobs.queued} queued`],
    ["Scheduler", sched],
    ["Chat models", node.chat_models.join(", ") || "none"],
  ];
  const models = await (await api("/api/models")).json();
  showModels(models);
  rows.push([
    "Whisper models loaded",
    models.models
      .filter((m) => m.loaded)
      .map((m) => m.name)
      .join(", ") || "none",
  ]);
  $("node").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  $("node-summary").textContent = `${node.node_id} · ${node.compute}${node.scheduler ? ` · scheduler ${node.scheduler.state}` : ""}`;
  $("speaker_diarization").disabled = !node.capabilities.diarization;
  if (!node.capabilities.diarization) $("speaker_diarization").title = "This node has no speaker-diarization models";
  return models;
}

/** What a model's option says: installed (and loaded), downloading (how far), or fetched when first used (an instance that downloads models). */
function modelLabel(m, onDemand) {
  const state = m.installed
    ? m.loaded
      ? " · loaded"
      : ""
    : m.downloading !== undefined
      ? ` · downloading ${Math.round(m.downloading * 100)} %`
      : (m.on_demand ?? onDemand)
        ? ` · downloads on first use (${formatBytes(m.size_bytes)})`
        : " · not installed";
  return `${m.name} · ${m.size}${state}`;
}

/** The model picker: the selection kept across refreshes; a model not installed can be picked when the instance downloads models. */
function showModels(models) {
  const picker = $("model");
  const chosen = picker.value || models.models.find((m) => m.installed)?.name;
  picker.replaceChildren(
    ...models.models.map((m) =>
      el(
        "option",
        { value: m.name, ...(m.installed || (m.on_demand ?? models.on_demand) ? {} : { disabled: "" }), ...(m.name === chosen ? { selected: "" } : {}) },
        modelLabel(m, models.on_demand),
      ),
    ),
  );
}

async function loadChoices() {
  const models = await loadNode();
  if (!models) return;
  const languages = Object.entries(models.languages ?? {}).sort((a, b) => a[1].localeCompare(b[1]));
  const option = ([code, name]) => el("option", { value: code }, `${name[0].toUpperCase()}${name.slice(1)} (${code})`);
  $("language").replaceChildren(el("option", { value: "" }, "Detect automatically"), ...languages.map(option));
  $("target_language").replaceChildren(el("option", { value: "en" }, "English (en)"), ...languages.filter(([c]) => c !== "en" && node.capabilities.translation).map(option));
}

// --- Form -----------------------------------------------------------------------------------

function clearErrors() {
  for (const e of document.querySelectorAll(".error")) if (e.id !== "err-token") e.textContent = "";
}
function showError(field, text) {
  const target = $(`err-${field}`) ?? $("err-form");
  target.textContent = target.id === "err-form" && field !== "form" ? `${field}: ${text}` : text;
  const input = $(field);
  if (input && input.focus) input.focus();
}

function setFiles(files) {
  selected = [...files];
  $("file-list").replaceChildren(...selected.map((f) => el("li", {}, `${f.name} (${formatBytes(f.size)})`)));
}

function checkForm() {
  const max = node?.capabilities ?? { max_files: 10, max_upload_bytes: 1024 ** 3 };
  if (selected.length === 0) return ["audio", "Choose at least one audio or video file."];
  if (selected.length > max.max_files) return ["audio", `At most ${max.max_files} files at once (${selected.length} chosen).`];
  const big = selected.find((f) => f.size > max.max_upload_bytes);
  if (big) return ["audio", `${big.name} is larger than ${formatBytes(max.max_upload_bytes)}.`];
  if (big === undefined && selected.some((f) => f.size === 0)) return ["audio", `${selected.find((f) => f.size === 0).name} is empty.`];
  if ($("speaker_diarization").checked) {
    const min = $("min_speakers").value,
      maxS = $("max_speakers").value;
    for (const [id, v] of [
      ["min_speakers", min],
      ["max_speakers", maxS],
    ]) {
      if (v !== "" && !(Number.isInteger(+v) && +v >= 1 && +v <= 20)) return [id, "Enter a whole number from 1 to 20."];
    }
    if (min !== "" && maxS !== "" && +min > +maxS) return ["min_speakers", "The minimum is more than the maximum."];
  }
  return null;
}

async function submit(event) {
  event.preventDefault();
  clearErrors();
  const problem = checkForm();
  if (problem) return showError(...problem);
  const form = new FormData();
  form.append("model", $("model").value);
  if ($("language").value) form.append("language", $("language").value);
  if ($("translate").checked) {
    form.append("translate", "true");
    form.append("target_language", $("target_language").value);
  }
  if ($("speaker_diarization").checked) {
    form.append("speaker_diarization", "true");
    if ($("min_speakers").value) form.append("min_speakers", $("min_speakers").value);
    if ($("max_speakers").value) form.append("max_speakers", $("max_speakers").value);
  }
  for (const f of selected) form.append("audio", f, f.name);
  $("submit").disabled = true;
  $("submit").textContent = "Uploading…";
  try {
    const res = await api("/api/process", { method: "POST", body: form });
    const body = await res.json().catch(() => null);
    if (res.status !== 202) {
      const { field, text } = explain(body, `The upload failed (HTTP ${res.status}).`);
      return showError(field, text);
    }
    const jobs = body.jobs ?? [{ job_id: body.job_id, file_name: selected[0].name, handle: body.handle }];
    for (const j of jobs) handles.set(j.job_id, j.handle);
    jobs.forEach((j, i) => trackJob(j.job_id, j.file_name ?? selected[i]?.name ?? j.job_id, $("format").value));
    setFiles([]);
    $("audio").value = "";
  } catch (err) {
    showError("form", `The upload failed: ${err.message}`);
  } finally {
    $("submit").disabled = false;
    $("submit").textContent = "Transcribe";
  }
}

// --- Jobs -----------------------------------------------------------------------------------

function trackJob(id, name, format) {
  $("no-jobs").hidden = true;
  const bar = el("progress", { max: "100", value: "0", "aria-label": `Progress of ${name}` });
  const status = el("span", { class: "status" }, "Processing · 0 %");
  const open = el("button", { type: "button", hidden: "" }, "Open result");
  const cancel = el("button", { type: "button", "aria-label": `Cancel ${name}` }, "Cancel");
  // the words finished so far, as they arrive (status' segments, in order)
  const partial = el("p", { class: "partial", "aria-live": "polite", hidden: "" });
  const row = el("li", { class: "job", "data-job": id }, el("header", {}, el("span", { class: "name" }, name), status), bar, partial, open, cancel);
  open.addEventListener("click", () => showResult(id, name, format));
  cancel.addEventListener("click", async () => {
    cancel.disabled = true;
    await api(`/api/jobs/${id}/cancel`, { method: "POST" }, id);
  });
  $("jobs").prepend(row);
  let words = []; // the finished segments' texts, gathered poll by poll (each poll asks only for the new ones)
  const poll = async () => {
    const res = await api(`/api/status/${id}?segments_after=${words.length - 1}`, {}, id);
    const job = await res.json();
    const pct = Math.round((job.progress ?? 0) * 100);
    bar.value = pct;
    if (job.status === "processing") {
      const download = job.download ? ` ${job.download.model} ${Math.round(job.download.fraction * 100)} % of ${formatBytes(job.download.total_bytes)}` : "";
      const phase = PHASES[job.phase] ? ` · ${PHASES[job.phase]}${download}` : "";
      status.textContent = `Processing${phase} · ${pct} %${job.estimated_time_remaining ? ` · ${eta(job.estimated_time_remaining)}` : ""}`;
      // the picker shows the download too: the node panel is read again every 2 s while one runs
      if (job.phase === "downloading_model" && Date.now() - nodeReadAt > 2000) {
        nodeReadAt = Date.now();
        void loadNode();
      }
      if (job.segments?.length) {
        for (const segment of job.segments) words[segment.id] = segment.text;
        partial.textContent = words.join(" ");
        partial.hidden = false;
      }
      return void setTimeout(poll, POLL_MS);
    }
    cancel.hidden = true;
    partial.hidden = true;
    if (job.status === "completed") {
      status.textContent = "Completed · 100 %";
      open.hidden = false;
      if ($("result").hidden) showResult(id, name, format);
    } else if (job.status === "cancelled") {
      status.textContent = "Cancelled";
    } else {
      row.classList.add("error");
      status.textContent = `Error: ${job.error ?? "unknown"}`;
    }
    void loadNode();
  };
  void poll();
}

// --- Result ---------------------------------------------------------------------------------

let current = null;

async function showResult(id, name, format) {
  const res = await api(`/api/result/${id}?format=json`, {}, id);
  const t = await res.json();
  current = { id, name, transcript: t };
  const translated = Boolean(t.translated_to);
  const speakers = [...new Set(t.segments.map((s) => s.speaker).filter(Boolean))];
  const hue = (sp) => (speakers.indexOf(sp) * 137 + 20) % 360;
  $("result-meta").textContent =
    `${name} · ${clock(t.duration)} · ${t.language}${translated ? ` → ${t.translated_to}` : ""} · model ${t.model}${speakers.length ? ` · ${speakers.length} speaker${speakers.length > 1 ? "s" : ""}` : ""}`;
  const rows = t.segments.map((s) => {
    const words = s.words.length && !translated ? s.words : null;
    const spoken = words
      ? words.flatMap((w, i) => [i ? " " : "", el("span", { class: `word${w.confidence < LOW_CONFIDENCE ? " low" : ""}`, title: `confidence ${w.confidence.toFixed(2)}` }, w.word)])
      : [s.text];
    const label = s.speaker ? el("span", { class: "speaker" }, s.speaker) : null;
    const text = el("p", { lang: translated ? t.translated_to : t.language, style: "margin:0" }, label, ...spoken);
    const original = translated
      ? el(
          "p",
          { class: "original", lang: t.language, style: "margin:0" },
          ...(s.words.length
            ? s.words.flatMap((w, i) => [
                i ? " " : "",
                el("span", { class: `word${w.confidence < LOW_CONFIDENCE ? " low" : ""}`, title: `confidence ${w.confidence.toFixed(2)}` }, w.word),
              ])
            : [s.original_text ?? ""]),
        )
      : null;
    return el(
      "div",
      { class: `seg${translated ? " translated" : ""}`, ...(s.speaker ? { "data-speaker": s.speaker, style: `--hue:${hue(s.speaker)}` } : {}) },
      el("time", { datetime: `PT${s.start}S` }, `${clock(s.start)}–${clock(s.end)}`),
      text,
      original,
    );
  });
  $("transcript").replaceChildren(...(rows.length ? rows : [el("p", { class: "muted" }, "No speech was found in this file.")]));
  $("preview-format").textContent = format.toUpperCase();
  $("preview").textContent = await (await api(`/api/result/${id}?format=${format}`, {}, id)).text();
  for (const b of document.querySelectorAll("[data-download]")) b.classList.toggle("primary", b.dataset.download === format);
  $("result").hidden = false;
  $("result-title").scrollIntoView({ behavior: "smooth", block: "start" });
}

async function download(format) {
  if (!current) return;
  const blob = await (await api(`/api/result/${current.id}?format=${format}`, {}, current.id)).blob();
  const a = el("a", { href: URL.createObjectURL(blob), download: `${current.name.replace(/\.[^.]+$/, "")}.${format}` });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
}

async function copyText() {
  if (!current) return;
  try {
    await navigator.clipboard.writeText(current.transcript.text);
    $("copy-status").textContent = "Copied.";
  } catch {
    $("copy-status").textContent = "Copying is not allowed here; select the text instead.";
  }
}

// --- Wiring ---------------------------------------------------------------------------------

$("form").addEventListener("submit", submit);
$("audio").addEventListener("change", (e) => setFiles(e.target.files));
const drop = $("drop");
drop.addEventListener("dragover", (e) => {
  e.preventDefault();
  drop.classList.add("over");
});
drop.addEventListener("dragleave", () => drop.classList.remove("over"));
drop.addEventListener("drop", (e) => {
  e.preventDefault();
  drop.classList.remove("over");
  setFiles(e.dataTransfer.files);
});
$("translate").addEventListener("change", (e) => {
  $("target_language").disabled = !e.target.checked;
});
$("speaker_diarization").addEventListener("change", (e) => {
  $("min_speakers").disabled = $("max_speakers").disabled = !e.target.checked;
});
for (const b of document.querySelectorAll("[data-download]")) b.addEventListener("click", () => download(b.dataset.download));
$("copy").addEventListener("click", copyText);
setInterval(() => {
  if (!document.hidden) void loadNode();
}, 5000);
void loadChoices();
