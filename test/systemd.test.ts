/** The unit files pass `systemd-analyze verify` and carry the hardening an operator expects. */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const UNITS = ["systemd/kiln-agent.service", "systemd/kiln-scheduler.service"];
const analyze = spawnSync("systemd-analyze", ["--version"], { encoding: "utf8" }).status === 0;

describe.skipIf(!analyze)("systemd units", () => {
  it("pass systemd-analyze verify without a warning", () => {
    const res = spawnSync("systemd-analyze", ["verify", "--man=no", ...UNITS], { encoding: "utf8" });
    expect(res.status, res.stderr).toBe(0);
    expect(res.stderr.trim()).toBe("");
  });

  it.each(UNITS)("%s restarts with a back-off, runs as kiln with an env file, and is hardened", (unit) => {
    const text = readFileSync(unit, "utf8");
    for (const line of [
      "Restart=on-failure",
      "RestartSec=",
      "StartLimitBurst=",
      "User=kiln",
      "EnvironmentFile=/etc/kiln/",
      "NoNewPrivileges=yes",
      "ProtectSystem=strict",
      "ReadWritePaths=/var/lib/kiln",
      "PrivateTmp=yes",
      "ProtectHome=yes",
      "StandardOutput=journal",
      "KillSignal=SIGTERM",
    ]) {
      expect(text, line).toContain(line);
    }
    if (unit.includes("agent")) {
      expect(text).toContain("DevicePolicy=closed");
      expect(text).toMatch(/DeviceAllow=\/dev\/nvidiactl/);
    } else {
      expect(text).toContain("PrivateDevices=yes");
    }
  });
});
if (!analyze)
  describe.skip("systemd units (skipped: systemd-analyze is not installed)", () => {
    it("verify", () => undefined);
  });
