#!/usr/bin/env bash
# Packs what a run on a lent GPU machine (CUDA, nvcc, cmake, python3; no node, npm or internet; what
# travels is limited to about 64 MiB) needs into .gpu/ (ignored by git). Run from the project root
# after `npm install`:
#
#   bash scripts/gpu/pack.sh
#
# .gpu/ then holds: node.xz (this machine's node), project.tar.xz (the built checkout with its
# node_modules, less other platforms' binaries, dev tools and the 159 MB prebuilt libggml-cuda.so,
# which the device builds from the same source), llama-src.tar.xz (node-llama-cpp's bundled llama.cpp,
# pristine, with Llama 3's vocab GGUF), ffmpeg.xz (the static ffmpeg of @ffmpeg-installer, for
# bench-asr's pipeline; about 16 MB, so it travels in a later call than the rest), device.sh, and
# libggml-cuda-<release>.so.xz when .gpu-cache/ holds one of this release (device.sh says where it comes from).
# See scripts/gpu/device.sh for the runs.
set -euo pipefail
root=$(pwd); here=$(cd "$(dirname "$0")" && pwd); out=$root/.gpu
[ -f package.json ] && [ -d node_modules ] && [ -d dist ] || { echo "pack.sh: run from the project root after npm install" >&2; exit 1; }
mkdir -p "$out"
N=node_modules; P=$N/@node-llama-cpp; name=$(basename "$root")
[ -f "$out/node.xz" ] || xz -T0 -9 -c "$(command -v node)" > "$out/node.xz"
ex=(--exclude="$name/.git" --exclude="$name/.gpu" --exclude="$name/.cache" --exclude="$name/.kiln" --exclude="$name/test-artifacts"
  --exclude='*.d.ts' --exclude='*.map'
  --exclude="$name/$P/linux-arm64" --exclude="$name/$P/linux-armv7l" --exclude="$name/$P/linux-x64-cuda-ext" --exclude="$name/$P/linux-x64-vulkan"
  --exclude="$name/$P/linux-x64-cuda/bins/linux-x64-cuda/libggml-cuda.so"
  --exclude="$name/$N/node-llama-cpp/llama/gitRelease.bundle" --exclude="$name/$N/node-llama-cpp/llama/llama.cpp"
  --exclude="$name/$N/@ffmpeg-installer" --exclude="$name/$N/playwright-core" --exclude="$name/$N/typescript" --exclude="$name/$N/@rolldown"
  --exclude="$name/$N/vite" --exclude="$name/$N/lightningcss*" --exclude="$name/$N/vitest" --exclude="$name/$N/@vitest" --exclude="$name/$N/@types"
  --exclude="$name/$N/@stryker-mutator" --exclude="$name/$N/better-sqlite3/deps" --exclude="$name/$N/better-sqlite3/build/Release/obj*")
tar -C "$(dirname "$root")" "${ex[@]}" -cf - "$name" | xz -T0 -9 > "$out/project.tar.xz"
tmp=$(mktemp -d)
git clone -q "$N/node-llama-cpp/llama/gitRelease.bundle" "$tmp/llama-src" 2>/dev/null
find "$tmp/llama-src/models" -type f ! -name ggml-vocab-llama-bpe.gguf -delete
tar -C "$tmp" --exclude=.git --exclude=llama-src/docs --exclude=llama-src/benches --exclude=llama-src/media -cf - llama-src | xz -T0 -6 > "$out/llama-src.tar.xz"
rm -rf "$tmp"
[ -f "$out/ffmpeg.xz" ] || xz -T0 -9 -c "$N/@ffmpeg-installer/linux-x64/ffmpeg" > "$out/ffmpeg.xz"
cp "$here/device.sh" "$out/"
# a CUDA module an earlier lending's setup built from this release (kept in .gpu-cache/): that setup compiles no CUDA
tag=$(node -p "require('./$N/node-llama-cpp/llama/llama.cpp.info.json').tag")
rm -f "$out"/libggml-cuda-*.so.xz
[ ! -f ".gpu-cache/libggml-cuda-$tag.so.xz" ] || cp ".gpu-cache/libggml-cuda-$tag.so.xz" "$out/"
echo "$name" > "$out/project-name"
du -sh "$out"/* "$out"
