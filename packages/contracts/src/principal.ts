import { z } from "zod";

const name = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9._:@-]+$/, "expected an identifier");

/**
 * The authenticated caller. It comes only from the API's authentication or a human approver and travels
 * in every event envelope; nothing a model writes can change it.
 */
export const PrincipalSchema = z.object({
  tenant: name,
  subject: name,
  roles: z.array(name).max(32),
  session: name.optional(),
});
export type Principal = z.infer<typeof PrincipalSchema>;
