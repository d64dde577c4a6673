import { RunContextSchema, RunIdSchema } from "@toolgate/contracts";
import { z } from "zod";
import { BudgetsSchema } from "./budgets.js";

/** Body of `POST /v1/runs`: a managed run. */
export const StartRunSchema = z.object({
  model: z.string().min(1).max(128),
  input: z
    .string()
    .max(64 * 1024)
    .default(""),
  context: RunContextSchema.default({}),
  /** Tighter budgets for this run; the server's budgets are the ceiling. */
  budgets: BudgetsSchema.partial().default({}),
});

/** Body of `POST /v1/tool-calls`: bring-your-own-loop. */
export const SubmitCallsSchema = z.object({
  run_id: RunIdSchema.optional(),
  context: RunContextSchema.default({}),
  calls: z
    .array(
      z.object({
        id: z.string().min(1).max(256),
        name: z.string().max(256),
        // Providers send either a JSON text (OpenAI) or an object (Anthropic, Gemini): both become text here,
        // and policy parses it, so INVALID_JSON is reported in one place.
        arguments: z.union([z.string(), z.record(z.string(), z.unknown())]).transform((a) => (typeof a === "string" ? a : JSON.stringify(a))),
      }),
    )
    .min(1)
    .max(64),
  wait_ms: z.number().int().min(0).max(60_000).default(0),
});

/** Query of reads that may wait for a change. */
export const WaitQuerySchema = z.object({ wait_ms: z.coerce.number().int().min(0).max(60_000).default(0) });

/** Body of `POST /v1/providers/{provider}/tool-calls`: a provider-native model response, bring-your-own-loop. */
export const SubmitProviderResponseSchema = z.object({
  run_id: RunIdSchema.optional(),
  context: RunContextSchema.default({}),
  /** The model's output exactly as the provider returned it (a Responses object, a chat completion, a message…). */
  response: z.unknown(),
  wait_ms: z.number().int().min(0).max(60_000).default(0),
});
