#!/usr/bin/env bash
# Installs Kiln as systemd services: a `kiln` system user, the app in /opt/kiln, state in
# /var/lib/kiln, configuration and secrets in /etc/kiln/{agent,scheduler}.env (0640, root:kiln),
# and the unit files from systemd/. Run as root from a built checkout (`npm install` done).
#
#   sudo scripts/install-systemd.sh [agent|scheduler|both]   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
which="${1:-both}"
prefix=/opt/kiln

id kiln >/dev/null 2>&1 || useradd --system --home-dir /var/lib/kiln --shell /usr/sbin/nologin kiln
# The agent reads the GPUs through the video/render groups where they exist.
for g in video render; do getent group "$g" >/dev/null && usermod -aG "$g" kiln; done

install -d -m 0755 "$prefix"
cp -a package.json package-lock.json bin dist node_modules README.md "$prefix"/
install -d -m 0755 "$prefix/agent/ui" && cp -a agent/ui/static "$prefix/agent/ui/"   # the web UI's files
install -d -m 0750 -o kiln -g kiln /var/lib/kiln
install -d -m 0750 -o root -g kiln /etc/kiln

env_file() { # name, template
  [ -e "/etc/kiln/$1.env" ] || { printf '%s\n' "$2" > "/etc/kiln/$1.env"; chown root:kiln "/etc/kiln/$1.env"; chmod 0640 "/etc/kiln/$1.env"; }
}
if [ "$which" != "scheduler" ]; then
  # The transcription API listens on every interface (:7860), so it gets a token of its own
  # (made only for a new env file; an existing one is kept as it is).
  agent_token=""
  [ -e /etc/kiln/agent.env ] || agent_token="$(head -c 24 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
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
  install -m 0644 systemd/kiln-agent.service /etc/systemd/system/kiln-agent.service
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
#KILN_JWT_SECRET="
  install -m 0644 systemd/kiln-scheduler.service /etc/systemd/system/kiln-scheduler.service
fi
systemctl daemon-reload
echo "installed; edit /etc/kiln/*.env, then: systemctl enable --now kiln-agent / kiln-scheduler"
