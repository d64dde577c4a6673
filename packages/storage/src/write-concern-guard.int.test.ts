import { testInfra } from "@toolgate/testkit";
import { describe, expect, it } from "vitest";
import { connectMongo } from "./mongo-connection.js";
import { WriteConcernError } from "./write-concern-guard.js";

function urlWith(parameter: string, value: string): string {
  const url = new URL(testInfra().mongoUrl);
  url.searchParams.set(parameter, value);
  return url.toString();
}

describe("connectMongo's write concern guard", () => {
  it("connects with journaled majority writes, which every deployment accepts", async () => {
    const client = await connectMongo({ url: testInfra().mongoUrl, appName: "guard-test", maxPoolSize: 2 });
    try {
      expect(client.options.writeConcern).toMatchObject({ w: "majority", journal: true });
      await client.db("admin").command({ ping: 1 });
    } finally {
      await client.close();
    }
  });

  it("refuses a URL that turns journaling off, naming the setting and the override", async () => {
    const refusal = await connectMongo({ url: urlWith("journal", "false"), appName: "guard-test", maxPoolSize: 2 }).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(WriteConcernError);
    const error = refusal as WriteConcernError;
    expect(error.code).toBe("MONGO_WRITE_CONCERN_UNSAFE");
    expect(error.setting).toBe("MONGO_URL write concern");
    expect(error.message).toMatch(
      /^write concern w: "majority", j: false on a (standalone server|replica set|sharded cluster) acknowledges writes before they are journaled: use j: true \(for development only, TOOLGATE_UNSAFE_ALLOW=mongo-write-concern starts anyway\)$/,
    );
  });

  it("connects anyway when the override allows it, after handing it the refusal", async () => {
    const allowed: WriteConcernError[] = [];
    const client = await connectMongo({
      url: urlWith("journal", "false"),
      appName: "guard-test",
      maxPoolSize: 2,
      allowUnsafe: (refusal) => allowed.push(refusal) > 0,
    });
    try {
      expect(allowed.map((r) => r.code)).toEqual(["MONGO_WRITE_CONCERN_UNSAFE"]);
      await client.db("admin").command({ ping: 1 });
    } finally {
      await client.close();
    }
  });
});
