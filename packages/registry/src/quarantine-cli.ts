// `toolgate-contracts quarantine list|approve`: what the catalog holds back as untrusted, and releasing one exact definition.
import { parseArgs } from "node:util";
import { connect } from "@nats-io/transport-node";
import { HashSchema } from "@toolgate/contracts";
import { ContractCatalog, type QuarantineEntry } from "./contract-catalog.js";
import { operatorIdentity } from "./operator-identity.js";

const USAGE = `usage: toolgate-contracts quarantine <list | approve <tool name> <definition hash>> --nats <url> [options]

  list                      every quarantined definition: tool, version, definition hash, why, whether approved
  approve <name> <hash>     release exactly this definition of this tool (a changed definition stays quarantined)
                            --by <approver>   who approves (recorded with the approval; required)

options
  --nats <url>              the catalog's NATS server(s), comma-separated
  --stream <name>           the catalog stream (default TOOLGATE_CONTRACTS)
  --prefix <subject>        the catalog's subject prefix (default toolgate.contracts)
  --json                    print list as JSON`;

/** Runs the quarantine command with the arguments after `quarantine`; resolves with the exit code. */
export async function quarantineCommand(argv: readonly string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...argv],
    allowPositionals: true,
    options: {
      nats: { type: "string" },
      stream: { type: "string" },
      prefix: { type: "string" },
      by: { type: "string" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h" },
    },
  });
  const [action, name, hash] = positionals;
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if ((action !== "list" && action !== "approve") || values.nats === undefined) {
    console.error(USAGE);
    return 2;
  }
  if (action === "approve") {
    if (name === undefined || hash === undefined || !HashSchema.safeParse(hash).success) {
      console.error("approve needs a tool name and a definition hash (sha256:<64 hex>), as `quarantine list` prints them");
      return 2;
    }
    if (values.by === undefined || values.by.trim() === "") {
      console.error("approve needs --by <approver>");
      return 2;
    }
  }
  const nc = await connect({ servers: values.nats.split(","), name: "toolgate-contracts-quarantine", ...operatorIdentity() });
  try {
    const catalog = await ContractCatalog.connect(nc, {
      resyncIntervalMs: 0,
      ...(values.stream ? { stream: values.stream } : {}),
      ...(values.prefix ? { subjectPrefix: values.prefix } : {}),
    });
    try {
      if (action === "list") return list(catalog.quarantined(), values.json);
      const outcome = await catalog.approveDefinition(name!, hash!, values.by!.trim());
      if (!outcome.ok) {
        console.error(`${outcome.code}: ${outcome.message}`);
        return 1;
      }
      for (const ref of outcome.released) console.log(`${outcome.created ? "released" : "already released"} ${ref.name}@${ref.version} ${ref.hash}`);
      return 0;
    } finally {
      catalog.close();
    }
  } finally {
    await nc.close();
  }
}

function list(entries: readonly QuarantineEntry[], json: boolean): number {
  if (json) {
    console.log(JSON.stringify(entries, null, 2));
    return 0;
  }
  if (entries.length === 0) console.log("nothing is quarantined");
  for (const entry of entries) {
    const status = entry.approval ? `approved by ${entry.approval.approved_by} at ${entry.approval.approved_at}` : "QUARANTINED";
    console.log(`${entry.ref.name}@${entry.ref.version}  ${entry.definition_hash}  ${status}${entry.source ? `  (${entry.source})` : ""}`);
    // Findings may quote the definition's text: only visible characters are printed.
    for (const reason of entry.reasons) console.log(`    ${reason.rule.padEnd(28)} ${reason.pointer || "/"}  ${visible(reason.message)}`);
  }
  return 0;
}

function visible(text: string): string {
  return text.replace(/[\p{Cf}\p{Cc}]/gu, (c) => `<U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}>`);
}
