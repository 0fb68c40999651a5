#!/usr/bin/env bash
# Runs on the lent GPU machine, from the project root it was carried into (with .gpu/ from
# scripts/gpu/pack.sh). Each step fits one call (10 minutes at most); the machine stays warm only
# about 30 s after a call, so chain the next call at once.
#
#   bash .gpu/device.sh setup   # node on the PATH, the project unpacked in /opt/w, llama.cpp's tools
#                               # and libggml-cuda.so built with CUDA from the same release (~5.5 min);
#                               # with .gpu/libggml-cuda-<release>.so.xz (an earlier setup's, see below) no
#                               # CUDA is compiled: the tools are built for ggml's modules and use it (~1 min)
#   bash .gpu/device.sh chat    # bench-chat --gpu: the fleet, node-llama-cpp directly, llama-bench and
#                               # llama-server on a Llama-3.2-1B-shape Q4_K_M model, 1/8/32 streams
#   bash .gpu/device.sh host    # bench-token-host --gpu on chat's model (run chat first): one stream in the
#                               # native loop and on the batch path against llama-bench and llama-server, and 32
#                               # streams against the same engine sampling on one thread; then one stream with
#                               # --threads 1 (about 3 minutes)
#   bash .gpu/device.sh asr-setup   # whisper-cli from the same whisper.cpp and ggml, for ggml's modules, with
#                                   # setup's libggml-cuda.so beside it (under a minute: no CUDA compiled again);
#                                   # carry .gpu/ffmpeg.xz with this call (it did not fit the first)
#   bash .gpu/device.sh asr     # bench-asr --gpu: Kiln's pipeline with whisper on CUDA and on the CPU,
#                               # whisper-cli on CUDA, a small-size whisper, 60 s of audio
#
# Results go to $OUT (bench-chat-gpu.txt, bench-token-host-gpu.txt, bench-asr-gpu.txt, and the build log on failure) when the device sets it.
# A setup that compiled CUDA also leaves $OUT/libggml-cuda-<release>.so.xz: keep it in .gpu-cache/ (ignored
# by git) and pack.sh carries it to the next lending, whose setup then compiles no CUDA.
set -euo pipefail
G=$(pwd)/.gpu; W=/opt/w; out=${OUT:-$G/out}; mkdir -p "$W" "$out"
name=$(cat "$G/project-name"); P=$W/$name
unxz() { python3 -c "import lzma,shutil,sys;shutil.copyfileobj(lzma.open(sys.argv[1]),open(sys.argv[2],'wb'))" "$1" "$2"; }
untar() { python3 -c "import tarfile,sys;tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$1" "$2"; }
[ -x /usr/local/bin/node ] || { unxz "$G/node.xz" /usr/local/bin/node; chmod +x /usr/local/bin/node; }
[ -d "$P" ] || untar "$G/project.tar.xz" "$W"
[ -d "$W/llama-src" ] || untar "$G/llama-src.tar.xz" "$W"
[ -x /usr/local/bin/ffmpeg ] || [ ! -f "$G/ffmpeg.xz" ] || { unxz "$G/ffmpeg.xz" /usr/local/bin/ffmpeg; chmod +x /usr/local/bin/ffmpeg; }
export KILN_LLAMA_SOURCE=$W/llama-src
cd "$P"
case "${1:-}" in
  setup)
    tag=$(python3 -c "import json;print(json.load(open('node_modules/node-llama-cpp/llama/llama.cpp.info.json'))['tag'])")
    module=$G/libggml-cuda-$tag.so.xz
    if [ -f "$module" ]; then unxz "$module" "$W/libggml-cuda.so"; export KILN_CUDA_MODULE=$W/libggml-cuda.so; fi
    node dist/scripts/build-llama.js --tools --cuda || { tail -40 "$P/.cache/build-llama.log" > "$out/build-llama.log"; exit 1; }
    # the module this setup compiled goes back, for the next lending's setup
    [ -n "${KILN_CUDA_MODULE:-}" ] || python3 -c "import lzma,shutil,sys;shutil.copyfileobj(open(sys.argv[1],'rb'),lzma.open(sys.argv[2],'wb',preset=6))" \
      "$KILN_LLAMA_SOURCE/build-cuda/bin/libggml-cuda.so" "$out/libggml-cuda-$tag.so.xz"
    ;;
  chat)
    node dist/scripts/bench-chat.js --gpu --threads "${THREADS:-8}" --rounds "${ROUNDS:-3}" --ttft-samples 5 2>&1 | tee "$out/bench-chat-gpu.txt"
    ;;
  host)
    model=.kiln/test-models/llama-3.2-1b-shape-q4_k_m.gguf
    [ -f "$model" ] || { echo "device.sh: no $model; run chat first (it makes the model)" >&2; exit 1; }
    node dist/scripts/bench-token-host.js --gpu --model "$model" --threads "${THREADS:-8}" --streams 32 --rounds "${ROUNDS:-3}" --requests 1 --tokens 128 --temperature 0.8 2>&1 | tee "$out/bench-token-host-gpu.txt"
    # one stream greedily with one thread: the graphs' CPU part (the input embeddings' rows) then wakes no pool threads
    node dist/scripts/bench-token-host.js --gpu --model "$model" --threads 1 --rounds "${ROUNDS:-3}" --requests 1 --tokens 128 2>&1 | tee -a "$out/bench-token-host-gpu.txt"
    ;;
  asr-setup)
    node dist/scripts/build-whisper.js --cli --cuda || { tail -40 "$P/.cache/build-whisper.log" > "$out/build-whisper.log"; exit 1; }
    ;;
  asr)
    command -v ffmpeg >/dev/null || { echo "device.sh: no ffmpeg; carry .gpu/ffmpeg.xz with the asr-setup call" >&2; exit 1; }
    node dist/scripts/bench-asr.js --gpu --threads "${THREADS:-8}" --rounds "${ROUNDS:-3}" 2>&1 | tee "$out/bench-asr-gpu.txt"
    ;;
  *) echo "usage: bash .gpu/device.sh setup|chat|host|asr-setup|asr" >&2; exit 2 ;;
esac
