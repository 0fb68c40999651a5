/** The upload parser and the per-client key, against a real HTTP server on loopback. */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { ApiError } from "../../core/errors.js";
import type { StagedUpload } from "../jobs/index.js";
import { clientKey } from "./app.js";
import { parseUpload } from "./upload.js";

describe("parseUpload", () => {
  it("stops at once, with nothing left, when a part cannot be written (a folder gone, a failing disk)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kiln-upload-"));
    const discarded: string[] = [];
    let failure: ApiError | undefined;
    const server = createServer((req, res) => {
      parseUpload(
        req,
        { fileBytes: 1024 ** 2, files: 10 },
        {
          // a path in a folder that does not exist: the write fails with ENOENT
          stage: async (fileName): Promise<StagedUpload> => ({ id: "x", path: join(dir, "missing", "input"), fileName, bytes: 0, ticket: { prepaid: 0 } }),
          charge: async () => undefined,
          discard: async (files) => void discarded.push(...files.map((f) => f.fileName)),
        },
      ).then(
        () => res.end("parsed"),
        (err: ApiError) => {
          failure = err;
          res.statusCode = err.status;
          res.end(err.code);
        },
      );
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const form = new FormData();
      form.append("audio", new Blob([new Uint8Array(256 * 1024)]), "a.wav");
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, { method: "POST", body: form });
      expect(res.status).toBe(503);
      expect(await res.text()).toBe("upload_failed");
      expect(failure!.message).toBe("audio: the upload could not be stored (ENOENT); try again later");
      expect(discarded).toEqual(["a.wav"]);
      expect(readdirSync(dir)).toEqual([]);
    } finally {
      server.close();
    }
  });
});

describe("clientKey", () => {
  it("unwraps IPv4-mapped addresses and counts an IPv6 /64 as one client", () => {
    expect(clientKey("::ffff:203.0.113.7")).toBe("203.0.113.7");
    expect(clientKey("203.0.113.7")).toBe("203.0.113.7");
    expect(clientKey("2001:db8:1:2::1")).toBe(clientKey("2001:db8:1:2:ffff:ffff:ffff:ffff"));
    expect(clientKey("2001:db8:1:2::1")).not.toBe(clientKey("2001:db8:1:3::1"));
    expect(clientKey(undefined)).toBe("unknown");
  });
});
