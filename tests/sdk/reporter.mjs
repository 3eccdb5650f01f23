// A node --test reporter that prints kiln's test lines: "PASS name: detail"
// and "FAIL name: why", one per test (subtests named parent/child, spaces
// as underscores, after KILN_TEST_PREFIX). A file that fails to load, a
// failing hook and a skipped test count as failures.
import { basename } from "node:path";

function oneLine(s) {
  return String(s ?? "").replace(/\s+/g, " ").trim().slice(0, 600);
}

export default async function* reporter(source) {
  const names = [];
  for await (const event of source) {
    const d = event.data ?? {};
    if (event.type === "test:start") {
      names[d.nesting] = d.name;
      names.length = d.nesting + 1;
    } else if (event.type === "test:pass" || event.type === "test:fail") {
      names[d.nesting] = d.name;
      const file = d.file ? basename(d.file).replace(/\.(test\.)?(m?js|ts)$/, "") : "";
      const name = (process.env.KILN_TEST_PREFIX ?? "") + names.slice(0, d.nesting + 1).join("/").replace(/\s+/g, "_");
      if (d.details?.type === "suite" && event.type === "test:pass") continue;
      if (event.type === "test:pass") {
        if (d.skip || d.todo) yield `FAIL ${name}: skipped (a test must not skip itself)\n`;
        else yield `PASS ${name}: ${file} ${Math.round(d.details?.duration_ms ?? 0)} ms\n`;
      } else {
        const err = d.details?.error;
        const cause = err?.cause ?? err;
        yield `FAIL ${name}: ${oneLine(cause?.message ?? cause)}\n`;
        if (cause?.stack) yield `${cause.stack.split("\n").slice(0, 8).map((l) => `  ${l}`).join("\n")}\n`;
      }
    } else if (event.type === "test:diagnostic" && /fail|cancel/i.test(d.message ?? "") && !/^(fail|cancelled) 0$/.test(d.message)) {
      yield `  ${d.message}\n`;
    } else if (event.type === "test:stderr" || event.type === "test:stdout") {
      yield d.message;
    }
  }
}
