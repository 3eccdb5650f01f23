/**
 * The scripted conversation every framework test drives through that
 * framework's own agent loop: a model that, whatever framework wraps it,
 * calls the kiln tools in this order, one per turn, and then answers with
 * every tool result it was given. The tests check that each call reached
 * a real sandbox (the results can only come from one: python's output, a
 * file written then read back and reversed by a shell pipe, a directory
 * listing, kilnd's "no such file" error) and that the sandbox is gone
 * when the conversation is over.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";

import { NotFound, Sandbox } from "@kiln/sdk";

export interface Step { name: string; args: Record<string, unknown> }

export const TOOL_NAMES = ["run_code", "shell", "read_file", "write_file", "list_dir"];

export function conversation() {
  const token = `kiln${randomBytes(6).toString("hex")}`;
  const dir = `/tmp/${token}`;
  const steps: Step[] = [
    { name: "run_code", args: { code: "import sys; print(6*7, sys.version_info[0])" } },
    { name: "write_file", args: { path: `${dir}/note.txt`, content: token } },
    { name: "shell", args: { command: `rev ${dir}/note.txt; uname -s` } },
    { name: "read_file", args: { path: `${dir}/note.txt` } },
    { name: "list_dir", args: { path: dir } },
    { name: "read_file", args: { path: `${dir}/missing.txt` } },
  ];
  /** The model's turn: the next tool call, or null when it is time to answer. */
  const next = (resultsSoFar: number): Step | null => steps[resultsSoFar] ?? null;
  const answer = (results: string[]) => `RESULTS\n${results.map((r, i) => `[${i}] ${r}`).join("\n")}`;
  return { token, dir, steps, next, answer };
}

/**
 * What the model was given back, in order, checked against what the
 * sandbox must have answered; final is the framework's answer to the
 * caller, which must carry the results too.
 */
export async function checkRoundTrip(c: ReturnType<typeof conversation>, results: string[], final: string,
  sandboxId: string | undefined) {
  assert.equal(results.length, c.steps.length, `the model got ${results.length} tool results, wanted ${c.steps.length}: ${JSON.stringify(results)}`);
  assert.match(results[0], /\b42 3\b/, `run_code: python printed 6*7 and its major version: ${results[0]}`);
  assert.match(results[1], new RegExp(`wrote ${c.token.length} bytes to ${c.dir}/note.txt`), `write_file: ${results[1]}`);
  const reversed = [...c.token].reverse().join("");
  assert.ok(results[2].includes(reversed) && results[2].includes("Linux"), `shell: rev of the file, uname: ${results[2]}`);
  assert.equal(results[3].trim(), c.token, `read_file gave back what write_file wrote: ${results[3]}`);
  assert.match(results[4], /^file\b.*note\.txt$/m, `list_dir shows the file: ${results[4]}`);
  assert.match(results[5], /missing\.txt|no such file|not found/i, `a failing tool call reaches the model as an error: ${results[5]}`);
  assert.notEqual(results[5].trim(), c.token, "the failed read returned no content");
  for (const r of results.slice(0, 5)) assert.ok(final.includes(r.trim().split("\n")[0]), `the final answer carries ${r}`);
  assert.ok(sandboxId && /^sbx_/.test(sandboxId), `the session made a sandbox: ${sandboxId}`);
  await assert.rejects(Sandbox.get(sandboxId!), NotFound, "the conversation's sandbox was deleted at its end");
}

/** A tool result as text, whatever wrapper the framework put it in. */
export function text(v: unknown): string {
  if (typeof v === "string") return v;
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    if (typeof o.text === "string") return o.text;
    if (typeof o.value === "string") return o.value;
    if ("value" in o) return JSON.stringify(o.value);
    if (Array.isArray(v)) return v.map(text).join("");
  }
  return JSON.stringify(v);
}
