/** Something a command started that must not outlive it: a stack of services, a private server. */
export interface Stoppable {
  stop(): Promise<void>;
}

const started = new Set<Stoppable>();
let installed = false;

/**
 * Has `thing` stopped if the command is interrupted (SIGINT, SIGTERM) before it stops it itself: a stack's
 * services are child processes and would otherwise outlive the command, burning CPU under whatever runs next — a
 * benchmark's figures included. Everything registered is stopped, the latest first (a stack before the servers it
 * runs on), and the command then exits 130 (SIGINT) or 143 (SIGTERM); a second signal ends it at once. Returns the function that unregisters `thing`, for the command's
 * own stop.
 */
export function stopOnInterrupt(thing: Stoppable): () => void {
  started.add(thing);
  if (!installed) {
    installed = true;
    process.once("SIGINT", () => void stopAll(130));
    process.once("SIGTERM", () => void stopAll(143));
  }
  return () => started.delete(thing);
}

async function stopAll(exitCode: number): Promise<void> {
  console.error(`interrupted: stopping the ${started.size} stack(s) and server(s) it started`);
  for (const thing of [...started].reverse()) {
    await thing.stop().catch((error: unknown) => console.error(`  could not stop it: ${String(error)}`));
  }
  process.exit(exitCode);
}
