// Typechecks the TypeScript of the SDK's guide (docs/sdk-typescript.md) against the built SDK
// (dist/, through the package's own name): each ```ts block becomes a module of build/docs/,
// led by one import of what it imports and the names the guide's snippets take as given
// (a registry, a client, a definition...), declared. Run by `make check` after the build, so a
// change of the SDK's API that the guide does not follow fails there.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const sdk = join(dirname(fileURLToPath(import.meta.url)), "..");
const guide = join(sdk, "..", "..", "docs", "sdk-typescript.md");
const out = join(sdk, "build", "docs");

// What the snippets use without defining it; and the SDK names every block is given (those
// declarations need, and Runner, which the guide's later blocks use as its first imports it).
const GIVEN = {
  gateway: "string",
  registry: "Registry",
  signal: "AbortSignal",
  definition: "DefinitionJson",
  input: "JsonObject",
  chargeCard: 'Parameters<Registry["register"]>[1]',
  orders: "{ id: string }[]",
  baton: "BatonClient",
};
const FOR_GIVEN = ["BatonClient", "Registry", "Runner", "DefinitionJson", "JsonObject"];
// Names the SDK exports as types only (imported with `type`, as verbatimModuleSyntax asks).
const TYPE_ONLY = new Set(["DefinitionJson", "JsonObject", "InstanceJson", "JobContext"]);

const blocks = [...readFileSync(guide, "utf8").matchAll(/^```ts\n([\s\S]*?)^```/gm)].map(
  (m) => m[1],
);
if (blocks.length === 0) throw new Error(`no \`\`\`ts block in ${guide}`);

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
blocks.forEach((block, i) => {
  const names = new Set(FOR_GIVEN);
  const body = [];
  for (const line of block.split("\n")) {
    const own = line.match(/^import \{([^}]*)\} from "@baton\/worker";$/);
    if (own) {
      for (const name of own[1].split(","))
        if (name.trim()) names.add(name.trim().replace(/^type /, ""));
    } else {
      body.push(line);
    }
  }
  const text = body.join("\n");
  const given = Object.entries(GIVEN)
    .filter(([name]) => !new RegExp(`\\b(?:const|let|function) ${name}\\b`).test(text))
    .map(([name, type]) => `declare const ${name}: ${type};`);
  const unique = [...names].map((n) => (TYPE_ONLY.has(n) ? `type ${n}` : n));
  const source = [
    `// docs/sdk-typescript.md, block ${i + 1} (written by scripts/check-docs.mjs)`,
    'import assert from "node:assert/strict";',
    `import { ${unique.join(", ")} } from "@baton/worker";`,
    ...given,
    "export {};",
    text,
  ].join("\n");
  writeFileSync(join(out, `block${String(i + 1).padStart(2, "0")}.ts`), source);
});
writeFileSync(
  join(out, "tsconfig.json"),
  JSON.stringify({
    compilerOptions: {
      target: "ES2022",
      lib: ["ES2024"],
      module: "NodeNext",
      moduleResolution: "NodeNext",
      types: ["node"],
      typeRoots: [join(sdk, "node_modules", "@types")],
      strict: true,
      noEmit: true,
      skipLibCheck: true,
    },
    include: ["*.ts"],
  }),
);
try {
  execFileSync(join(sdk, "node_modules", ".bin", "tsc"), ["-p", join(out, "tsconfig.json")], {
    stdio: "inherit",
  });
} catch {
  console.error(
    `the guide's TypeScript (${guide}) no longer typechecks against the SDK: see above`,
  );
  process.exit(1);
}
