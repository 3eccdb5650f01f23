/**
 * A build context's .dockerignore, with Docker's rules (moby/patternmatcher)
 * as kilnd's builder applies them (src/common/dockerignore.c, whose
 * algorithm this follows so that the SDK leaves out exactly what the
 * builder would): one pattern a line, `#` and blank lines skipped, each
 * pattern trimmed and cleaned; `*` any run of characters but `/`, `?` one,
 * `[...]` a class (`^` or `!` negates), `\` quotes, `**` (a whole component)
 * any number of directories, none too. A path is ignored when the last
 * pattern matching it or one of its parents is not a `!` exception.
 * Matching is linear in pattern times path: no regular expressions.
 */

export const MAX_BYTES = 1 << 20;
export const MAX_PATTERNS = 4096;

/** A `[...]` class at p[i] against c: [matched 0/1 or -1 unclosed, index past it]. */
function klass(p: string, i: number, c: string): [number, number] {
  let j = i + 1;
  const neg = j < p.length && (p[j] === "^" || p[j] === "!");
  if (neg) j++;
  let hit = false;
  let first = true;
  while (j < p.length && (p[j] !== "]" || first)) {
    first = false;
    let lo = p[j];
    if (lo === "\\" && j + 1 < p.length) lo = p[++j];
    let hi = lo;
    if (j + 2 < p.length && p[j + 1] === "-" && p[j + 2] !== "]") {
      j += 2;
      hi = p[j];
      if (hi === "\\" && j + 1 < p.length) hi = p[++j];
    }
    if (c >= lo && c <= hi) hit = true;
    j++;
  }
  if (j >= p.length) return [-1, i];
  return [hit !== neg ? 1 : 0, j + 1];
}

/** One component pattern against one path component: 1, 0, or -1 (a bad pattern). */
function comp(p: string, s: string): number {
  let pi = 0, si = 0, starP = 0, starS = 0, star = false;
  while (si < s.length) {
    if (pi < p.length && p[pi] === "*") {
      while (pi < p.length && p[pi] === "*") pi++;
      star = true; starP = pi; starS = si;
      continue;
    }
    if (pi < p.length) {
      let next = pi + 1;
      let ok: number;
      if (p[pi] === "?") ok = 1;
      else if (p[pi] === "[") {
        [ok, next] = klass(p, pi, s[si]);
        if (ok < 0) return ok;
      } else if (p[pi] === "\\") {
        if (pi + 1 >= p.length) return -1;
        ok = p[pi + 1] === s[si] ? 1 : 0;
        next = pi + 2;
      } else ok = p[pi] === s[si] ? 1 : 0;
      if (ok) { pi = next; si++; continue; }
    }
    if (!star) return 0;
    pi = starP;
    si = ++starS;
  }
  while (pi < p.length && p[pi] === "*") pi++;
  return pi === p.length ? 1 : 0;
}

function comps(p: string[], s: string[]): number {
  let pi = 0, si = 0, starP = 0, starS = 0, star = false;
  while (si < s.length) {
    if (pi < p.length && p[pi] === "**") {
      while (pi < p.length && p[pi] === "**") pi++;
      star = true; starP = pi; starS = si;
      continue;
    }
    if (pi < p.length) {
      const ok = comp(p[pi], s[si]);
      if (ok < 0) return ok;
      if (ok) { pi++; si++; continue; }
    }
    if (!star) return 0;
    pi = starP;
    si = ++starS;
  }
  while (pi < p.length && p[pi] === "**") pi++;
  return pi === p.length ? 1 : 0;
}

/** A cleaned pattern against a whole relative path. */
export function match(pat: string, path: string): boolean {
  const p = pat.split("/").filter(Boolean);
  const s = path.split("/").filter(Boolean);
  if (p.length > 1 && p[p.length - 1] === "**" && p[p.length - 2] !== "**") {
    // A trailing `**` after others (Docker's `dir/**`) wants something below.
    for (let k = s.length - 1; k >= 1; k--) if (comps(p.slice(0, -1), s.slice(0, k)) > 0) return true;
    return false;
  }
  return comps(p, s) > 0;
}

/** Go's filepath.Clean, then a leading '/' dropped. */
function clean(s: string): string {
  const abs = s.startsWith("/");
  const out: string[] = [];
  for (const c of s.split("/")) {
    if (c === "" || c === ".") continue;
    if (c === "..") {
      if (out.length && out[out.length - 1] !== "..") out.pop();
      else if (!abs) out.push("..");
      continue;
    }
    out.push(c);
  }
  return out.join("/") || ".";
}

function patternOk(p: string): boolean {
  for (let i = 0; i < p.length;) {
    if (p[i] === "\\") {
      if (i + 1 >= p.length) return false;
      i += 2;
    } else if (p[i] === "[") {
      const [ok, j] = klass(p, i, "a");
      if (ok < 0) return false;
      i = j;
    } else i++;
  }
  return true;
}

const SPACE = /^[ \t\r\v\f]+|[ \t\r\v\f]+$/g;

/** The patterns of one .dockerignore; an Error naming the line for a bad one. */
export class DockerIgnore {
  readonly patterns: { pat: string; exception: boolean }[] = [];
  readonly exceptions: boolean;

  constructor(text = "") {
    if (new TextEncoder().encode(text).length > MAX_BYTES) throw new Error(`.dockerignore is over ${MAX_BYTES} bytes`);
    if (text.startsWith("\ufeff")) text = text.slice(1);
    text.split("\n").forEach((raw, i) => {
      const line = i + 1;
      let s = raw.replace(SPACE, "");
      if (!s || s.startsWith("#")) return;
      const exception = s.startsWith("!");
      if (exception) {
        s = s.slice(1).replace(/^[ \t]+/, "");
        if (!s) throw new Error(`.dockerignore line ${line}: '!' with no pattern`);
      }
      const pat = clean(s);
      if (!patternOk(pat)) throw new Error(`.dockerignore line ${line}: '${pat}': a bad pattern (an unclosed '[' or a trailing '\\')`);
      if (this.patterns.length === MAX_PATTERNS) throw new Error(`.dockerignore has more than ${MAX_PATTERNS} patterns`);
      this.patterns.push({ pat, exception });
    });
    this.exceptions = this.patterns.some((p) => p.exception);
  }

  /** Is rel (relative to the context, '/'-separated) left out? */
  ignored(rel: string): boolean {
    if (!this.patterns.length || rel === ".") return false;
    const parts = rel.split("/");
    const prefixes: string[] = [];
    for (let k = parts.length; k >= 1; k--) prefixes.push(parts.slice(0, k).join("/"));
    let ignored = false;
    for (const { pat, exception } of this.patterns) {
      // An exception matters only once something is ignored; a pattern only while nothing is.
      if (exception !== ignored) continue;
      if (prefixes.some((p) => match(pat, p))) ignored = !exception;
    }
    return ignored;
  }
}

/** What packDir keeps of a path: list it (and, for a directory, walk it). */
export type PackFilter = (rel: string, isDir: boolean) => { list: boolean; walk: boolean };

/**
 * The filter of a build context at `dir` (Node): what its .dockerignore
 * keeps, and the Dockerfile and .dockerignore always (the builder reads
 * them whatever it says). An ignored directory is walked only when a `!`
 * pattern may keep something below it or it holds the Dockerfile.
 */
export async function contextFilter(dir: string, dockerfile = "Dockerfile"): Promise<PackFilter> {
  const fs = await import("node:fs/promises");
  const path = await import("node:path");
  let ign = new DockerIgnore();
  const file = path.join(dir, ".dockerignore");
  const st = await fs.lstat(file).catch(() => null);
  if (st) {
    if (!st.isFile()) throw new Error(`${file}: not a regular file`);
    if (st.size > MAX_BYTES) throw new Error(`${file}: over ${MAX_BYTES} bytes`);
    ign = new DockerIgnore(await fs.readFile(file, "utf8"));
  }
  const df = dockerfile.replace(/^(\.\/)+/, "");
  const always = new Set([".dockerignore", df]);
  return (rel, isDir) => {
    const ignored = ign.ignored(rel) && !always.has(rel);
    // A directory holding the Dockerfile is walked even if ignored.
    return { list: !ignored, walk: isDir && (!ignored || ign.exceptions || df.startsWith(rel + "/")) };
  };
}
