/** The egress guard's decisions, with a resolver the test controls (no name ever leaves the machine). */
import { describe, expect, it } from "vitest";
import { EgressDeniedError, EgressPolicy, EgressUnreachableError } from "./egress.js";

/** A resolver that answers from a table (no name ever leaves the machine). */
function table(answers: Record<string, string[]>) {
  return async (host: string): Promise<string[]> => answers[host] ?? [];
}

describe("EgressPolicy", () => {
  const policy = new EgressPolicy();

  it.each([
    "127.0.0.1",
    "127.8.9.10",
    "::1",
    "0.0.0.0",
    "10.0.0.1",
    "172.16.5.4",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "fd00::1",
    "fe80::1",
    "224.0.0.1",
    "255.255.255.255",
    "::",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "64:ff9b::a00:1",
    "2002:a00:1::1",
    "192.0.2.1",
    "198.18.0.1",
    "::7f00:1",
    "::a9fe:a9fe", // IPv4-compatible IPv6
  ])("refuses %s", (address) => {
    expect(policy.permits(address)).toBe(false);
  });

  it.each(["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"])("permits the public address %s", (address) => {
    expect(policy.permits(address)).toBe(true);
  });

  it("refuses the scheduler's own addresses, even public ones (services bound to 0.0.0.0 answer there)", () => {
    expect(policy.permits("93.184.216.34")).toBe(true);
    expect(new EgressPolicy({ ownAddresses: ["93.184.216.34", "::ffff:1.1.1.1"] }).permits("93.184.216.34")).toBe(false);
    expect(new EgressPolicy({ ownAddresses: ["93.184.216.34", "::ffff:1.1.1.1"] }).permits("1.1.1.1")).toBe(false);
  });

  it("refuses any address with an IPv6 zone id, the scheduler's own public address among them", async () => {
    const own = new EgressPolicy({
      ownAddresses: ["2606:4700:4700::1111"],
      resolveAll: table({ "zoned.example": ["2606:4700:4700::1001%eth0"], "ok.example%eth0": ["93.184.216.34"] }),
    });
    expect(own.permits("2606:4700:4700::1111")).toBe(false);
    for (const address of ["2606:4700:4700::1111%eth0", "2606:4700:4700::1001%eth0", "fe80::1%lo", "::1%1", "2606:4700:4700::1001%25eth0"]) {
      expect(own.permits(address), address).toBe(false);
      await expect(own.resolve(address), address).rejects.toBeInstanceOf(EgressDeniedError);
      await expect(own.resolve(`[${address}]`), address).rejects.toBeInstanceOf(EgressDeniedError);
    }
    expect(own.permits("2606:4700:4700::1001")).toBe(true);
    await expect(own.resolve("zoned.example")).rejects.toBeInstanceOf(EgressDeniedError);
    await expect(own.resolve("ok.example%eth0")).rejects.toBeInstanceOf(EgressDeniedError); // never handed to a resolver
    // an operator's allowance does not let a zone id through either
    expect(new EgressPolicy({ allow: ["2606:4700::/32"] }).permits("2606:4700:4700::1001%eth0")).toBe(false);
  });

  it("an operator's CIDR lets a range through, and only that range", () => {
    const allowing = new EgressPolicy({ allow: ["10.1.0.0/16", "fd12::/16", "127.0.0.2"] });
    expect(allowing.permits("10.1.200.3")).toBe(true);
    expect(allowing.permits("10.2.0.1")).toBe(false);
    expect(allowing.permits("fd12::5")).toBe(true);
    expect(allowing.permits("127.0.0.2")).toBe(true);
    expect(allowing.permits("127.0.0.1")).toBe(false);
  });

  it("resolves a name once and refuses it when any address it resolves to is refused", async () => {
    const resolving = new EgressPolicy({
      resolveAll: table({ "metadata.evil.example": ["169.254.169.254"], "mixed.evil.example": ["93.184.216.34", "10.0.0.1"], "ok.example": ["93.184.216.34"] }),
    });
    await expect(resolving.resolve("metadata.evil.example")).rejects.toBeInstanceOf(EgressDeniedError);
    await expect(resolving.resolve("mixed.evil.example")).rejects.toBeInstanceOf(EgressDeniedError);
    await expect(resolving.resolve("ok.example")).resolves.toEqual({ address: "93.184.216.34", family: 4 });
    await expect(resolving.resolve("nowhere.example")).rejects.toBeInstanceOf(EgressUnreachableError);
    await expect(resolving.resolve("[::1]")).rejects.toBeInstanceOf(EgressDeniedError);
    for (const name of ["localhost", "LOCALHOST.", "api.localhost"]) await expect(resolving.resolve(name), name).rejects.toBeInstanceOf(EgressDeniedError);
  });

  it("its lookup hands a client the checked address, and an error for a refused one", async () => {
    const resolving = new EgressPolicy({ resolveAll: table({ "ok.example": ["93.184.216.34"], "inside.example": ["127.0.0.1"] }) });
    const look = (host: string, all: boolean) => new Promise<unknown>((resolve) => resolving.lookup(host, { all }, (err, address, family) => resolve(err ?? { address, family })));
    expect(await look("ok.example", false)).toEqual({ address: "93.184.216.34", family: 4 });
    expect(await look("ok.example", true)).toEqual({ address: [{ address: "93.184.216.34", family: 4 }], family: undefined });
    expect(await look("inside.example", false)).toBeInstanceOf(EgressDeniedError);
  });
});
