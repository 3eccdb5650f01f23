/**
 * Just enough tar for Files.uploadDir/downloadDir (Node): a directory tree
 * to a POSIX ustar archive (pax records for long names), and an archive
 * back into a directory. Extraction takes the archive as hostile: absolute
 * names, "..", a path through a symlink, device nodes and unknown types
 * are refused, so nothing is written outside the target directory.
 */

import type { PackFilter } from "./dockerignore.js";

const BLOCK = 512;
const enc = new TextEncoder();
const dec = new TextDecoder();

function octal(n: number, len: number): string {
  return n.toString(8).padStart(len - 1, "0") + "\0";
}

function header(name: string, type: string, size: number, mode: number, mtime: number, link = ""): Uint8Array {
  const h = new Uint8Array(BLOCK);
  const put = (s: string | Uint8Array, off: number, len: number) => {
    const b = typeof s === "string" ? enc.encode(s) : s;
    h.set(b.subarray(0, len), off);
  };
  put(name, 0, 100);
  put(octal(mode & 0o7777, 8), 100, 8);
  put(octal(0, 8), 108, 8);
  put(octal(0, 8), 116, 8);
  put(octal(size, 12), 124, 12);
  put(octal(Math.max(0, Math.floor(mtime)), 12), 136, 12);
  put(type, 156, 1);
  put(link, 157, 100);
  put("ustar\0", 257, 6);
  put("00", 263, 2);
  h.fill(0x20, 148, 156);
  let sum = 0;
  for (const b of h) sum += b;
  put(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8);
  return h;
}

function pad(n: number): Uint8Array {
  return new Uint8Array((BLOCK - (n % BLOCK)) % BLOCK);
}

function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let len = enc.encode(body).length + 1;
  while (String(len).length + enc.encode(body).length !== len) len = String(len).length + enc.encode(body).length;
  return `${len}${body}`;
}

/** Entries for one member: a pax header first when ustar cannot hold it. */
function member(name: string, type: string, size: number, mode: number, mtime: number, link = ""): Uint8Array[] {
  const out: Uint8Array[] = [];
  let pax = "";
  if (enc.encode(name).length > 100) pax += paxRecord("path", name);
  if (enc.encode(link).length > 100) pax += paxRecord("linkpath", link);
  if (pax) {
    const p = enc.encode(pax);
    out.push(header("PaxHeader", "x", p.length, 0o644, 0), p, pad(p.length));
  }
  out.push(header(name, type, size, mode, mtime, link));
  return out;
}

/** The tree below dir as a tar archive (files, directories, symlinks). */
/**
 * dir as a tar; `keep` (default: everything) says which paths are listed
 * and which directories walked (a build context's .dockerignore,
 * dockerignore.ts).
 */
export async function packDir(dir: string, keep?: PackFilter): Promise<Blob> {
  const fs = await import("node:fs/promises");
  const path = await import("node:path");
  const parts: Uint8Array[] = [];
  const walk = async (rel: string): Promise<void> => {
    const names = (await fs.readdir(path.join(dir, rel))).sort();
    for (const n of names) {
      const r = rel ? `${rel}/${n}` : n;
      const full = path.join(dir, r);
      const st = await fs.lstat(full);
      const mtime = st.mtimeMs / 1000;
      const k = keep ? keep(r, st.isDirectory()) : { list: true, walk: true };
      if (st.isDirectory()) {
        if (k.list) parts.push(...member(`${r}/`, "5", 0, st.mode, mtime));
        if (k.walk) await walk(r);
      } else if (!k.list) {
        continue;
      } else if (st.isSymbolicLink()) {
        parts.push(...member(r, "2", 0, st.mode, mtime, await fs.readlink(full)));
      } else if (st.isFile()) {
        const data = await fs.readFile(full);
        parts.push(...member(r, "0", data.length, st.mode, mtime), data, pad(data.length));
      }
    }
  };
  await walk("");
  parts.push(new Uint8Array(2 * BLOCK));
  return new Blob(parts as unknown as BlobPart[]);
}

function field(h: Uint8Array, off: number, len: number): string {
  const s = h.subarray(off, off + len);
  const nul = s.indexOf(0);
  return dec.decode(nul >= 0 ? s.subarray(0, nul) : s);
}

function num(h: Uint8Array, off: number, len: number): number {
  const s = field(h, off, len).trim();
  return s ? parseInt(s, 8) : 0;
}

/** Extract a tar archive into dest (made if missing). Returns the number of entries. */
export async function unpack(tar: Uint8Array, dest: string): Promise<number> {
  const fs = await import("node:fs/promises");
  const path = await import("node:path");
  await fs.mkdir(dest, { recursive: true });
  const root = await fs.realpath(dest);
  let off = 0;
  let count = 0;
  let longName: string | undefined;
  let longLink: string | undefined;
  const dirs: Array<[string, number, number]> = [];
  while (off + BLOCK <= tar.length) {
    const h = tar.subarray(off, off + BLOCK);
    off += BLOCK;
    if (h.every((b) => b === 0)) break;
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : h[i];
    if (sum !== num(h, 148, 8)) throw new Error(`tar: a bad header checksum at byte ${off - BLOCK}`);
    const type = String.fromCharCode(h[156] || 0x30);
    const size = num(h, 124, 12);
    if (off + size > tar.length) throw new Error("tar: the archive ends inside an entry");
    const data = tar.subarray(off, off + size);
    off += size + ((BLOCK - (size % BLOCK)) % BLOCK);
    if (type === "x" || type === "L" || type === "K" || type === "g") {
      if (type === "L") longName = field(data, 0, data.length);
      if (type === "K") longLink = field(data, 0, data.length);
      if (type === "x") {
        for (const rec of dec.decode(data).split("\n")) {
          const m = /^\d+ (path|linkpath)=(.*)$/s.exec(rec);
          if (m && m[1] === "path") longName = m[2];
          if (m && m[1] === "linkpath") longLink = m[2];
        }
      }
      continue;
    }
    const prefix = field(h, 345, 155);
    let name = longName ?? (prefix && field(h, 257, 6) === "ustar" ? `${prefix}/${field(h, 0, 100)}` : field(h, 0, 100));
    const link = longLink ?? field(h, 157, 100);
    longName = longLink = undefined;
    if (name.startsWith("/")) throw new Error(`tar entry '${name}': an absolute name`);
    const parts = name.split("/").filter((p) => p !== "" && p !== ".");
    if (parts.includes("..")) throw new Error(`tar entry '${name}': '..' in its name`);
    name = parts.join("/");
    if (!name) continue;
    // Every directory on the way must be a real directory below root.
    let dir = root;
    for (const p of parts.slice(0, -1)) {
      dir = path.join(dir, p);
      const st = await fs.lstat(dir).catch(() => undefined);
      if (!st) await fs.mkdir(dir);
      else if (!st.isDirectory()) throw new Error(`tar entry '${name}': its path goes through '${p}', not a directory`);
    }
    const full = path.join(dir, parts[parts.length - 1]);
    const old = await fs.lstat(full).catch(() => undefined);
    const mode = num(h, 100, 8) & 0o7777;
    if (type === "5") {
      if (old && !old.isDirectory()) await fs.unlink(full);
      if (!old || !old.isDirectory()) await fs.mkdir(full);
      dirs.push([full, mode, num(h, 136, 12)]);
    } else if (type === "0" || type === "7") {
      if (old?.isDirectory()) throw new Error(`tar entry '${name}': a directory is in its place`);
      if (old) await fs.unlink(full);
      await fs.writeFile(full, data, { flag: "wx", mode });
      await fs.chmod(full, mode);
    } else if (type === "2") {
      if (old?.isDirectory()) throw new Error(`tar entry '${name}': a directory is in its place`);
      if (old) await fs.unlink(full);
      await fs.symlink(link, full);
    } else {
      throw new Error(`tar entry '${name}': entry type '${type}' is refused`);
    }
    count++;
  }
  for (const [d, mode] of dirs.reverse()) await fs.chmod(d, mode);
  return count;
}
