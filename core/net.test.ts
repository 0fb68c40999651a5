import { describe, expect, it } from "vitest";
import { withoutPassword } from "./net.js";

describe("withoutPassword", () => {
  it.each([
    ["postgres://kiln:simple@db/kiln", "postgres://kiln:***@db/kiln"],
    ["postgres://kiln:p@ss/w0rd@db:5432/kiln", "postgres://kiln:***@db:5432/kiln"], // unencoded / and @ in the password
    ["postgres://db/kiln?sslmode=require&password=abc", "postgres://db/kiln?sslmode=require&password=***"],
    ["postgres://db/kiln?sslpassword=abc", "postgres://db/kiln?sslpassword=***"],
    ["redis://:secret@r:6379", "redis://:***@r:6379"],
    ["postgres://kiln@db/kiln", "postgres://kiln@db/kiln"],
    ["/var/lib/kiln/kiln.db", "/var/lib/kiln/kiln.db"],
  ])("masks the credentials of %s", (url, masked) => {
    expect(withoutPassword(url)).toBe(masked);
  });
});
