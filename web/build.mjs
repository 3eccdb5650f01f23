// Bundles the dashboard into OUT (default ../build/web): app-HASH.js and
// app-HASH.css (the hash in the name lets kilnd cache them as immutable),
// and index.html naming them. Run by `make` (docs/dashboard.md).
import * as esbuild from "esbuild";
import { mkdirSync, readFileSync, writeFileSync, readdirSync, rmSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] || join(here, "../build/web"));
mkdirSync(out, { recursive: true });
for (const f of readdirSync(out)) if (/^app-.*\.(js|css)$/.test(f)) rmSync(join(out, f));

const result = await esbuild.build({
  entryPoints: { app: join(here, "src/main.ts") },
  bundle: true,
  minify: true,
  format: "iife",
  target: ["chrome110", "firefox115", "safari16"],
  entryNames: "[name]-[hash]",
  outdir: out,
  metafile: true,
  legalComments: "eof",
  logLevel: "warning",
});
const outputs = Object.keys(result.metafile.outputs).map((p) => basename(p));
const js = outputs.find((f) => f.endsWith(".js"));
const css = outputs.find((f) => f.endsWith(".css"));
if (!js || !css) throw new Error(`esbuild made ${outputs.join(", ")}: want a .js and a .css`);
const html = readFileSync(join(here, "index.html"), "utf8").replace("APP_JS", js).replace("APP_CSS", css);
writeFileSync(join(out, "index.html"), html);
console.log(`web: ${out}/{index.html,${js},${css}}`);
