import type { TestProject } from "vitest/node";
import { startInfra, type TestInfra } from "./infra.js";

declare module "vitest" {
  export interface ProvidedContext {
    toolgateInfra: TestInfra;
  }
}

/** Vitest global setup: one set of servers for the whole run, handed to every worker with `provide`. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { infra, teardown } = await startInfra();
  project.provide("toolgateInfra", infra);
  return teardown;
}
