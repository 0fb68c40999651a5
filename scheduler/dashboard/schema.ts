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

/** A node id or a model name as the fleet's actions take it: a bound on what is read, not a rule of names (an unknown one is a 404 or a 400 naming it). */
const name = (what: string) => z.string({ error: "a string" }).min(1, { error: "a non-empty string" }).max(256, { error: "at most 256 characters" }).meta({ description: what });

/** `POST /admin/api/fleet/pins` and `DELETE /admin/api/fleet/pins`. */
export const FleetPinRequest = z
  .looseObject({
    model: name("A model of the operator's catalog: its id or an alias."),
    node: name("The node's id."),
  })
  .meta({ id: "FleetPinRequest" });

/** `POST /admin/api/fleet/unload`. */
export const FleetUnloadRequest = z
  .looseObject({
    model: name("The replica's model: its catalog id or an alias."),
    node: name("The node's id."),
    force: z.boolean({ error: "true or false" }).optional().meta({
      description:
        "Unload a replica that answers requests (it takes no new one; its node lets them finish, stopping them after a minute). Default false: such a replica is refused with 409.",
    }),
  })
  .meta({ id: "FleetUnloadRequest" });

/** The longest a drained node's requests may take to finish (s). */
export const MAX_DRAIN_S = 3600;

/** `POST /admin/api/fleet/nodes/{id}/drain` (its body may be absent). */
export const FleetDrainRequest = z
  .looseObject({
    deadline_s: z
      .int({ error: `a whole number of seconds from 0 to ${MAX_DRAIN_S}` })
      .min(0)
      .max(MAX_DRAIN_S)
      .optional()
      .meta({ description: `How long the node's running requests may take to finish before its link closes, in seconds (0–${MAX_DRAIN_S}). Default 60.` }),
  })
  .meta({ id: "FleetDrainRequest" });
