/** The admin API's request bodies (zod: validated by the routes, shown by the OpenAPI document). */
import { z } from "zod";
import { issueCode, refusal } from "../../core/schema.js";
import { ACCOUNT_NAME_RULE, isValidAccountName, TIERS } from "../auth/index.js";

/** A form's empty field is an absent one; a form's number arrives as text. */
const formNumber = (v: unknown): unknown => (v === "" ? undefined : typeof v === "string" && /^\d+$/.test(v) ? Number(v) : v);

/** `POST /admin/api/keys`. */
export const CreateKeyRequest = z
  .looseObject({
    account: z
      .string({ error: "a string" })
      .trim()
      .refine(isValidAccountName, refusal("invalid_account", ACCOUNT_NAME_RULE))
      .meta({ description: `The account the key is for: ${ACCOUNT_NAME_RULE}.` }),
    tier: z.enum(TIERS, { error: `one of ${TIERS.join(", ")}` }),
    rpm: z
      .preprocess(formNumber, z.int({ error: "a whole number of at least 1" }).min(1).nullish())
      .meta({ description: "Requests per minute; required for the enterprise tier, else the tier's own." }),
  })
  .superRefine((b, ctx) => {
    if (b.tier === "enterprise" && (b.rpm === undefined || b.rpm === null)) {
      ctx.addIssue({ code: "custom", path: ["rpm"], message: "required for the enterprise tier", params: issueCode("invalid_rpm"), input: b.rpm });
    }
  })
  .meta({ id: "CreateKeyRequest" });
