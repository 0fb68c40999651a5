#!/usr/bin/env bash
# Installs Kiln as systemd services: a `kiln` system user, the app in /opt/kiln, state in
# /var/lib/kiln, configuration and secrets in /etc/kiln/{agent,scheduler}.env (0640, root:kiln),
# and the unit files from systemd/. Run as root from a built checkout (`npm install` done).
#
#   sudo scripts/install-systemd.sh [agent|scheduler|both]   (default: both)
#   scripts/install-systemd.sh --root DIR [--link-node-modules] [agent|scheduler|both]
#
# /opt/kiln is built anew beside the old one (/opt/kiln.new) and swapped in whole, so a running
# service keeps the files it mapped (the llama.cpp and whisper addons) and files gone from the
# checkout go from /opt/kiln too; restart the units to run the new one. On a real install it is
# root's and written by nobody else (root:root, not group/world-writable).
#
# --root DIR installs into DIR exactly as into / (DIR/opt/kiln, DIR/var/lib/kiln, DIR/etc/kiln,
# DIR/etc/systemd/system), for an image being built or a test (test/install.test.ts runs the
# installed copy from such a root): it makes no user (it writes DIR/usr/lib/sysusers.d/kiln.conf,
# for systemd-sysusers to make it on the image's first boot), changes no owner (the files are the
# caller's) and calls no systemctl, so it needs no root. --link-node-modules hard-links
# node_modules (about 1 GB) instead of copying it, where DIR is on the checkout's file system:
# with --root only, for a throwaway root, since the installed files then share their inodes with
# the checkout's.
set -euo pipefail
usage() {
  echo "usage: $0 [--root DIR [--link-node-modules]] [agent|scheduler|both]" >&2
  exit 2
}
which=both root="" staged="" link=""
while [ $# -gt 0 ]; do
  case "$1" in
    --root) [ $# -ge 2 ] && [ -n "$2" ] || usage; root="$2" staged=1; shift 2 ;;
    --root=?*) root="${1#--root=}" staged=1; shift ;;
    --link-node-modules) link=1; shift ;;
    agent | scheduler | both) which="$1"; shift ;;
    *) usage ;;
  esac
done
if [ -n "$link" ] && [ -z "$staged" ]; then
  echo "$0: --link-node-modules is for a throwaway --root only (/opt/kiln would share the checkout's inodes)" >&2
  usage
fi
if [ -n "$staged" ]; then
  # absolute before the cd below: a relative DIR is the caller's, not the checkout's
  mkdir -p -- "$root" && root="$(cd -- "$root" && pwd)" && root="${root%/}"
elif [ "$(id -u)" != 0 ]; then
  echo "$0: run as root (sudo), or give --root DIR" >&2
  exit 1
fi
cd "$(dirname "$0")/.."
prefix="$root/opt/kiln"
# owner and group of a folder or file: root:kiln and kiln:kiln on a real install, left as is under --root
owned() { [ -n "$staged" ] || echo "-o $1 -g $2"; }

if [ -z "$staged" ]; then
  id kiln >/dev/null 2>&1 || useradd --system --home-dir /var/lib/kiln --shell /usr/sbin/nologin kiln
  # The agent reads the GPUs through the video/render groups where they exist (the unit names
  # none: a SupplementaryGroups= group missing on the host would stop it from starting).
  for g in video render; do getent group "$g" >/dev/null && usermod -aG "$g" kiln; done
else
  # the same user for an image, made by systemd-sysusers at boot (video and render: systemd's
  # basic.conf declares both)
  install -d -m 0755 "$root/usr/lib/sysusers.d"
  printf '%s\n' "# kiln: the user of kiln-agent and kiln-scheduler (scripts/install-systemd.sh --root)" \
    'u kiln - "Kiln" /var/lib/kiln /usr/sbin/nologin' \
    'm kiln video' \
    'm kiln render' >"$root/usr/lib/sysusers.d/kiln.conf"
  chmod 0644 "$root/usr/lib/sysusers.d/kiln.conf"
fi

# The app: what the installed `kiln` loads at run time (and nothing it writes: /opt/kiln is
# read-only under the units' ProtectSystem=strict; state goes to /var/lib/kiln). Built in
# $new, never over the running tree: cp into /opt/kiln would rewrite its files in place (same
# inode), under a service that has them mapped.
new="$prefix.new" old="$prefix.old"
rm -rf -- "$new" "$old"
install -d -m 0755 "$(dirname "$prefix")" "$new"
copy() { cp -a --no-preserve=ownership "$@"; } # the caller's files (root's on a real install), not the builder's
copy package.json package-lock.json bin dist README.md "$new"/
if [ -n "$link" ]; then
  cp -al node_modules "$new"/
else
  copy node_modules "$new"/
fi
rm -rf "$new"/node_modules/{.vite,.vite-temp,.cache} # caches of the test runner and the build tools
install -d -m 0755 "$new/proto" && copy proto/kiln "$new/proto/" # the fleet's .proto files, loaded at start
# the static files of the agent's web UI and of the scheduler's dashboard (dist/ holds none: see core/paths.ts)
install -d -m 0755 "$new/agent/ui" && copy agent/ui/static "$new/agent/ui/"
install -d -m 0755 "$new/scheduler/dashboard" && copy scheduler/dashboard/static "$new/scheduler/dashboard/"
# Written by its owner only: root's on a real install. A linked node_modules is the checkout's own
# inodes, left as they are.
[ -n "$staged" ] || chown -R root:root "$new"
if [ -n "$link" ]; then
  find "$new" -path "$new/node_modules" -prune -o -exec chmod go-w {} +
else
  chmod -R go-w "$new"
fi
# The swap: the old tree stays whole until it is moved aside, and is deleted (not rewritten)
# after; a running service keeps the files it has open or mapped.
if [ -e "$prefix" ] || [ -L "$prefix" ]; then mv -T -- "$prefix" "$old"; fi
mv -T -- "$new" "$prefix"
rm -rf -- "$old"
install -d -m 0750 $(owned kiln kiln) "$root/var/lib/kiln"
install -d -m 0750 $(owned root kiln) "$root/etc/kiln"
install -d -m 0755 "$root/etc/systemd/system"
env_file() { # name, template
  local file="$root/etc/kiln/$1.env"
  [ -e "$file" ] || {
    printf '%s\n' "$2" >"$file"
    [ -n "$staged" ] || chown root:kiln "$file"
    chmod 0640 "$file"
  }
}
if [ "$which" != "scheduler" ]; then
  # The transcription API listens on every interface (:7860), so it gets a token of its own
  # (made only for a new env file; an existing one is kept as it is).
  agent_token=""
  [ -e "$root/etc/kiln/agent.env" ] || agent_token="$(head -c 24 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
  env_file agent "# kiln agent: every flag has a KILN_* twin (node bin/kiln.js agent --help)
# every /api call on :7860 needs Authorization: Bearer <KILN_AGENT_TOKEN> (a job's own calls also take its handle),
# and so do /readyz and /metrics (a probe or Prometheus sends it; /healthz stays open)
KILN_AGENT_TOKEN=$agent_token
#KILN_SCHEDULER=scheduler.example:50051
# a non-loopback scheduler is dialed with TLS (or KILN_GRPC_INSECURE=1, warned at every start):
#KILN_SCHEDULER_CA=/etc/kiln/tls/ca.crt
#KILN_TLS_CERT=/etc/kiln/tls/agent.crt
#KILN_TLS_KEY=/etc/kiln/tls/agent.key
#KILN_NODE_TOKEN=
#KILN_SERVE=famB-v3.1=/var/lib/kiln/models/model.gguf"
  install -m 0644 systemd/kiln-agent.service "$root/etc/systemd/system/kiln-agent.service"
fi
if [ "$which" != "agent" ]; then
  env_file scheduler "# kiln scheduler: every flag has a KILN_* twin (node bin/kiln.js scheduler --help)
KILN_HTTP=0.0.0.0:8080
KILN_GRPC=0.0.0.0:50051
# gRPC on a non-loopback address needs TLS (or KILN_GRPC_INSECURE=1, warned at every start):
#KILN_GRPC_TLS_CERT=/etc/kiln/tls/scheduler.crt
#KILN_GRPC_TLS_KEY=/etc/kiln/tls/scheduler.key
#KILN_GRPC_CLIENT_CA=/etc/kiln/tls/agents-ca.crt
# TOKEN (any node id) or IDS=TOKEN (node ids or * globs joined by |), comma-separated:
#KILN_NODE_TOKENS=
#KILN_JWT_SECRET=
# the dashboard (/dashboard) is off without an admin token:
#KILN_ADMIN_TOKEN=
# the database and the audio spool are the unit's (KILN_DB, KILN_SPOOL_DIR under /var/lib/kiln/scheduler);
# API keys: sudo -u kiln node /opt/kiln/bin/kiln.js keys create --db /var/lib/kiln/scheduler/kiln.db --account NAME --tier pro"
  install -m 0644 systemd/kiln-scheduler.service "$root/etc/systemd/system/kiln-scheduler.service"
fi
if [ -n "$staged" ]; then
  echo "installed into $root"
  exit 0
fi
systemctl daemon-reload
echo "installed; edit /etc/kiln/*.env, then: systemctl enable --now kiln-agent / kiln-scheduler"
echo "(a reinstall: systemctl try-restart kiln-agent kiln-scheduler runs the new /opt/kiln)"
