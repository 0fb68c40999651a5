// Kiln's whisper addon: whisper.cpp (vendored in ./whisper.cpp) on the ggml that node-llama-cpp's
// prebuilt folders ship, CPU, CUDA or Vulkan alike. The JavaScript side is agent/asr/engine/native.ts.
//
//   loadBackends(dir)                      -> [{ name, description, type }]  ggml backends found in dir
//   loadModel(file, { gpu, flashAttn })    -> Promise<Model>                 a whisper context (no state)
//   Model#free()                           -> Promise<void>
//   transcribe(model, pcm, params, onSegment) -> Promise<Segment[]>          a fresh state per call
//
// Decodes share a model on parallel states. Segments are copied out of the state on the decoding
// thread, so JavaScript never reads a state whisper is still writing.
#include <cmath>
#include <napi.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "ggml-backend.h"
#include "whisper.h"

namespace {

struct Token {
    std::string text;
    int id;
    float p;
    int64_t t0, t1;  // centiseconds, -1 without token timestamps
};

struct Segment {
    int64_t t0, t1;  // centiseconds
    std::string text;
    std::string lang;
    float langProb = -1;  // the detected language's probability; -1 when the language was given
    std::vector<Token> tokens;
};

// ggml's and whisper's log: errors and warnings to stderr (the agent's log keeps the engine's
// stderr), the rest only with KILN_WHISPER_DEBUG set.
void Log(ggml_log_level level, const char* text, void*) {
    static const bool debug = std::getenv("KILN_WHISPER_DEBUG") != nullptr;
    if (debug || level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) fputs(text, stderr);
}

Napi::Value LoadBackends(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!info[0].IsString()) throw Napi::TypeError::New(env, "loadBackends(dir): dir must be a string");
    std::string dir = info[0].As<Napi::String>().Utf8Value();
    ggml_backend_load_all_from_path(dir.c_str());
    Napi::Array devices = Napi::Array::New(env);
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        Napi::Object d = Napi::Object::New(env);
        d.Set("name", ggml_backend_dev_name(dev));
        d.Set("description", ggml_backend_dev_description(dev));
        const char* type = "cpu";
        switch (ggml_backend_dev_type(dev)) {
            case GGML_BACKEND_DEVICE_TYPE_GPU: type = "gpu"; break;
            case GGML_BACKEND_DEVICE_TYPE_IGPU: type = "igpu"; break;
            case GGML_BACKEND_DEVICE_TYPE_ACCEL: type = "accel"; break;
            default: break;
        }
        d.Set("type", type);
        devices.Set(static_cast<uint32_t>(i), d);
    }
    return devices;
}

class Model : public Napi::ObjectWrap<Model> {
   public:
    static Napi::FunctionReference* constructor;

    static void Init(Napi::Env env, Napi::Object exports) {
        Napi::Function cls = DefineClass(env, "Model", {
            InstanceMethod("free", &Model::Free),
            InstanceAccessor("freed", &Model::Freed, nullptr),
        });
        constructor = new Napi::FunctionReference(Napi::Persistent(cls));
        exports.Set("Model", cls);
    }

    explicit Model(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Model>(info) {
        context = info[0].As<Napi::External<whisper_context>>().Data();
    }
    ~Model() override {
        if (context) whisper_free(context);
    }

    whisper_context* context = nullptr;
    std::atomic<int> users{0};

   private:
    Napi::Value Freed(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), context == nullptr); }
    Napi::Value Free(const Napi::CallbackInfo& info);
};
Napi::FunctionReference* Model::constructor = nullptr;

class PromiseWorker : public Napi::AsyncWorker {
   public:
    explicit PromiseWorker(Napi::Env env) : Napi::AsyncWorker(env), deferred(Napi::Promise::Deferred::New(env)) {}
    Napi::Promise Promise() { return deferred.Promise(); }
    void OnError(const Napi::Error& e) override { deferred.Reject(e.Value()); }

   protected:
    Napi::Promise::Deferred deferred;
};

class LoadWorker : public PromiseWorker {
   public:
    LoadWorker(Napi::Env env, std::string file, whisper_context_params params) : PromiseWorker(env), file(std::move(file)), params(params) {}
    void Execute() override {
        context = whisper_init_from_file_with_params_no_state(file.c_str(), params);
        if (!context) SetError("whisper.cpp could not load the model from " + file);
    }
    void OnOK() override {
        deferred.Resolve(Model::constructor->New({Napi::External<whisper_context>::New(Env(), context)}));
    }

   private:
    std::string file;
    whisper_context_params params;
    whisper_context* context = nullptr;
};

class FreeWorker : public PromiseWorker {
   public:
    FreeWorker(Napi::Env env, whisper_context* context) : PromiseWorker(env), context(context) {}
    void Execute() override { whisper_free(context); }
    void OnOK() override { deferred.Resolve(Env().Undefined()); }

   private:
    whisper_context* context;
};

Napi::Value Model::Free(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (users.load() > 0) throw Napi::Error::New(env, "the model is in use by a running transcription");
    whisper_context* ctx = context;
    context = nullptr;
    if (!ctx) {
        auto done = Napi::Promise::Deferred::New(env);
        done.Resolve(env.Undefined());
        return done.Promise();
    }
    auto* worker = new FreeWorker(env, ctx);
    worker->Queue();
    return worker->Promise();
}

Napi::Value LoadModel(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!info[0].IsString()) throw Napi::TypeError::New(env, "loadModel(file, options): file must be a string");
    whisper_context_params params = whisper_context_default_params();
    params.use_gpu = false;
    if (info[1].IsObject()) {
        Napi::Object o = info[1].As<Napi::Object>();
        if (o.Get("gpu").IsBoolean()) params.use_gpu = o.Get("gpu").As<Napi::Boolean>();
        if (o.Get("flashAttn").IsBoolean()) params.flash_attn = o.Get("flashAttn").As<Napi::Boolean>();
        if (o.Get("device").IsNumber()) params.gpu_device = o.Get("device").As<Napi::Number>().Int32Value();
    }
    auto* worker = new LoadWorker(env, info[0].As<Napi::String>().Utf8Value(), params);
    worker->Queue();
    return worker->Promise();
}

// The decoding parameters Kiln sets; every other field keeps whisper.cpp's greedy default.
struct Params {
    whisper_full_params full;
    std::string language = "auto";
    std::string prompt;
};

void ReadParams(Napi::Env env, Napi::Object o, Params& p) {
    auto number = [&](const char* key, auto& field) {
        Napi::Value v = o.Get(key);
        if (v.IsUndefined()) return;
        if (!v.IsNumber()) throw Napi::TypeError::New(env, std::string("transcribe: params.") + key + " must be a number");
        field = static_cast<std::remove_reference_t<decltype(field)>>(v.As<Napi::Number>().DoubleValue());
    };
    auto boolean = [&](const char* key, bool& field) {
        Napi::Value v = o.Get(key);
        if (v.IsUndefined()) return;
        if (!v.IsBoolean()) throw Napi::TypeError::New(env, std::string("transcribe: params.") + key + " must be a boolean");
        field = v.As<Napi::Boolean>();
    };
    auto string = [&](const char* key, std::string& field) {
        Napi::Value v = o.Get(key);
        if (v.IsUndefined()) return;
        if (!v.IsString()) throw Napi::TypeError::New(env, std::string("transcribe: params.") + key + " must be a string");
        field = v.As<Napi::String>().Utf8Value();
    };
    whisper_full_params& f = p.full;
    f.print_progress = false;
    f.print_realtime = false;
    f.print_timestamps = false;
    f.print_special = false;
    number("threads", f.n_threads);
    boolean("translate", f.translate);
    boolean("noContext", f.no_context);
    boolean("tokenTimestamps", f.token_timestamps);
    boolean("suppressNonSpeech", f.suppress_nst);
    number("temperature", f.temperature);
    number("temperatureInc", f.temperature_inc);
    number("entropyThreshold", f.entropy_thold);
    number("logprobThreshold", f.logprob_thold);
    number("noSpeechThreshold", f.no_speech_thold);
    string("language", p.language);
    string("prompt", p.prompt);
    if (f.n_threads < 1) throw Napi::RangeError::New(env, "transcribe: params.threads must be at least 1");
    // whisper.cpp lists the fallback temperatures by adding the step in single precision up to 1: a
    // step that small never gets there, and the list grows until memory runs out
    if (!std::isfinite(f.temperature) || f.temperature < 0 || f.temperature > 1)
        throw Napi::RangeError::New(env, "transcribe: params.temperature must be from 0 to 1");
    if (!std::isfinite(f.temperature_inc) || (f.temperature_inc != 0 && f.temperature_inc < 0.05f) || f.temperature_inc > 1)
        throw Napi::RangeError::New(env, "transcribe: params.temperatureInc must be 0 or from 0.05 to 1");
    // whisper.cpp would take an unknown code as language -1, and whisper_lang_str(-1) is null.
    if (p.language != "auto" && whisper_lang_id(p.language.c_str()) < 0)
        throw Napi::RangeError::New(env, "transcribe: params.language: \"" + p.language + "\" is not a language whisper knows");
}

class TranscribeWorker : public Napi::AsyncProgressQueueWorker<Segment> {
   public:
    TranscribeWorker(Napi::Env env, Model* model, Napi::Object modelObject, std::vector<float> pcm, Params params, Napi::Function onSegment)
        : Napi::AsyncProgressQueueWorker<Segment>(env),
          model(model),
          pcm(std::move(pcm)),
          params(std::move(params)),
          deferred(Napi::Promise::Deferred::New(env)) {
        modelRef = Napi::Persistent(modelObject);  // the model outlives the decode
        if (!onSegment.IsEmpty()) segmentCallback = Napi::Persistent(onSegment);
        model->users++;
    }
    ~TranscribeWorker() override { model->users--; }

    Napi::Promise Promise() { return deferred.Promise(); }

    void Execute(const ExecutionProgress& progress) override {
        whisper_context* ctx = model->context;
        // freed however Execute ends (a segment copy can throw std::bad_alloc)
        std::unique_ptr<whisper_state, decltype(&whisper_free_state)> owned(whisper_init_state(ctx), whisper_free_state);
        whisper_state* state = owned.get();
        if (!state) return SetError("whisper.cpp could not allocate a decoding state (out of memory?)");
        whisper_full_params f = params.full;
        f.language = params.language.c_str();
        // The language detected here, once, with its probability (whisper_full would detect it the same
        // way, on the first 30 s, and keep only the winner); whisper_full is then told it.
        if (params.language == "auto" && whisper_is_multilingual(model->context)) {
            if (whisper_pcm_to_mel_with_state(ctx, state, pcm.data(), static_cast<int>(pcm.size()), f.n_threads) != 0)
                return SetError("whisper.cpp could not compute the audio's spectrogram");
            std::vector<float> probs(whisper_lang_max_id() + 1, 0.0f);
            int lang = whisper_lang_auto_detect_with_state(ctx, state, 0, f.n_threads, probs.data());
            const char* code = lang >= 0 ? whisper_lang_str(lang) : nullptr;
            if (code) {
                detected = code;
                langProb = probs[lang];
                f.language = detected.c_str();
                f.detect_language = false;
            }
        }
        f.initial_prompt = params.prompt.empty() ? nullptr : params.prompt.c_str();
        this->progress = &progress;
        f.new_segment_callback = [](whisper_context* c, whisper_state* s, int n_new, void* self) {
            auto* w = static_cast<TranscribeWorker*>(self);
            int n = whisper_full_n_segments_from_state(s);
            for (int i = n - n_new; i < n; i++) {
                Segment seg = w->Read(c, s, i);
                w->progress->Send(&seg, 1);
            }
        };
        f.new_segment_callback_user_data = this;
        int rc = whisper_full_with_state(ctx, state, f, pcm.data(), static_cast<int>(pcm.size()));
        if (rc != 0) return SetError("whisper.cpp failed to decode this audio (code " + std::to_string(rc) + ")");
        int n = whisper_full_n_segments_from_state(state);
        for (int i = 0; i < n; i++) segments.push_back(Read(ctx, state, i));
    }

    void OnProgress(const Segment* data, size_t count) override {
        if (segmentCallback.IsEmpty()) return;
        Napi::HandleScope scope(Env());
        for (size_t i = 0; i < count; i++) segmentCallback.Call({ToJs(data[i])});
    }

    void OnOK() override {
        Napi::Array out = Napi::Array::New(Env(), segments.size());
        for (size_t i = 0; i < segments.size(); i++) out.Set(static_cast<uint32_t>(i), ToJs(segments[i]));
        deferred.Resolve(out);
    }

    void OnError(const Napi::Error& e) override { deferred.Reject(e.Value()); }

   private:
    Segment Read(whisper_context* ctx, whisper_state* state, int i) const {
        Segment seg;
        seg.t0 = whisper_full_get_segment_t0_from_state(state, i);
        seg.t1 = whisper_full_get_segment_t1_from_state(state, i);
        seg.text = whisper_full_get_segment_text_from_state(state, i);
        const char* lang = whisper_lang_str(whisper_full_lang_id_from_state(state));
        seg.lang = lang ? lang : "";
        seg.langProb = langProb;
        int n = whisper_full_n_tokens_from_state(state, i);
        seg.tokens.reserve(n);
        for (int j = 0; j < n; j++) {
            whisper_token_data t = whisper_full_get_token_data_from_state(state, i, j);
            bool timed = params.full.token_timestamps;
            seg.tokens.push_back({whisper_full_get_token_text_from_state(ctx, state, i, j), t.id, t.p, timed ? t.t0 : -1, timed ? t.t1 : -1});
        }
        return seg;
    }

    Napi::Object ToJs(const Segment& seg) const {
        Napi::Env env = Env();
        Napi::Object o = Napi::Object::New(env);
        o.Set("from", Napi::Number::New(env, static_cast<double>(seg.t0) * 10));
        o.Set("to", Napi::Number::New(env, static_cast<double>(seg.t1) * 10));
        o.Set("text", seg.text);
        o.Set("lang", seg.lang);
        if (seg.langProb >= 0) o.Set("langProb", Napi::Number::New(env, seg.langProb));
        Napi::Array tokens = Napi::Array::New(env, seg.tokens.size());
        for (size_t j = 0; j < seg.tokens.size(); j++) {
            const Token& t = seg.tokens[j];
            Napi::Object token = Napi::Object::New(env);
            token.Set("text", t.text);
            token.Set("id", t.id);
            token.Set("p", t.p);
            if (t.t0 >= 0) {
                token.Set("from", Napi::Number::New(env, static_cast<double>(t.t0) * 10));
                token.Set("to", Napi::Number::New(env, static_cast<double>(t.t1) * 10));
            }
            tokens.Set(static_cast<uint32_t>(j), token);
        }
        o.Set("tokens", tokens);
        return o;
    }

    Model* model;
    Napi::ObjectReference modelRef;
    std::vector<float> pcm;
    Params params;
    Napi::Promise::Deferred deferred;
    Napi::FunctionReference segmentCallback;
    const ExecutionProgress* progress = nullptr;
    std::vector<Segment> segments;
    std::string detected;   // the language detected before decoding ("" when given)
    float langProb = -1;    // its probability
};

Napi::Value Transcribe(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!info[0].IsObject() || !info[0].As<Napi::Object>().InstanceOf(Model::constructor->Value()))
        throw Napi::TypeError::New(env, "transcribe(model, pcm, params, onSegment): model must be a loaded Model");
    Model* model = Model::Unwrap(info[0].As<Napi::Object>());
    if (!model->context) throw Napi::Error::New(env, "transcribe: the model has been freed");
    if (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_float32_array)
        throw Napi::TypeError::New(env, "transcribe: pcm must be a Float32Array (16 kHz mono)");
    Napi::Float32Array pcm = info[1].As<Napi::Float32Array>();
    Params params{whisper_full_default_params(WHISPER_SAMPLING_GREEDY)};
    if (info[2].IsObject()) ReadParams(env, info[2].As<Napi::Object>(), params);
    Napi::Function onSegment = info[3].IsFunction() ? info[3].As<Napi::Function>() : Napi::Function();
    std::vector<float> samples(pcm.Data(), pcm.Data() + pcm.ElementLength());
    auto* worker = new TranscribeWorker(env, model, info[0].As<Napi::Object>(), std::move(samples), std::move(params), onSegment);
    worker->Queue();
    return worker->Promise();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
    whisper_log_set(Log, nullptr);
    exports.Set("loadBackends", Napi::Function::New(env, LoadBackends));
    exports.Set("loadModel", Napi::Function::New(env, LoadModel));
    exports.Set("transcribe", Napi::Function::New(env, Transcribe));
    exports.Set("version", Napi::String::New(env, WHISPER_VERSION));
    Model::Init(env, exports);
    return exports;
}

}  // namespace

NODE_API_MODULE(kiln_whisper, Init)
