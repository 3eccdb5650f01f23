"""A build context's .dockerignore, with Docker's rules (moby/patternmatcher),
as kilnd's builder applies them (src/common/dockerignore.c, whose algorithm
this follows line for line so that the SDK leaves out exactly what the
builder would): one pattern a line, `#` lines and blank lines skipped, each
pattern trimmed and cleaned; `*` any run of characters but `/`, `?` one,
`[...]` a class (`^` or `!` negates), `\\` quotes, `**` (a whole component)
any number of directories, none too. A path is ignored when the last pattern
matching it or one of its parent directories is not a `!` exception.
Matching is linear in pattern times path (no regular expressions), so a
hostile .dockerignore costs what a benign one does."""

from __future__ import annotations

from typing import List, Optional, Tuple

MAX_BYTES = 1 << 20
MAX_PATTERNS = 4096
_SPACE = " \t\r\v\f"


def _class(p: str, i: int, c: str) -> Tuple[int, int]:
    """A `[...]` class at p[i] against c: (matched 0/1, index past it), or (-1, i) unclosed."""
    j = i + 1
    neg = j < len(p) and p[j] in "^!"
    if neg:
        j += 1
    hit, first = False, True
    while j < len(p) and (p[j] != "]" or first):
        first = False
        lo = p[j]
        if lo == "\\" and j + 1 < len(p):
            j += 1
            lo = p[j]
        hi = lo
        if j + 2 < len(p) and p[j + 1] == "-" and p[j + 2] != "]":
            j += 2
            hi = p[j]
            if hi == "\\" and j + 1 < len(p):
                j += 1
                hi = p[j]
        if lo <= c <= hi:
            hit = True
        j += 1
    if j >= len(p):
        return -1, i
    return int(hit != neg), j + 1


def _comp(p: str, s: str) -> int:
    """One component pattern against one path component: 1, 0, or -1 (bad pattern)."""
    pi = si = star_p = star_s = 0
    star = False
    while si < len(s):
        if pi < len(p) and p[pi] == "*":
            while pi < len(p) and p[pi] == "*":
                pi += 1
            star, star_p, star_s = True, pi, si
            continue
        if pi < len(p):
            nxt = pi + 1
            if p[pi] == "?":
                ok = 1
            elif p[pi] == "[":
                ok, nxt = _class(p, pi, s[si])
                if ok < 0:
                    return ok
            elif p[pi] == "\\":
                if pi + 1 >= len(p):
                    return -1
                ok = int(p[pi + 1] == s[si])
                nxt = pi + 2
            else:
                ok = int(p[pi] == s[si])
            if ok:
                pi, si = nxt, si + 1
                continue
        if not star:
            return 0
        pi = star_p
        star_s += 1
        si = star_s
    while pi < len(p) and p[pi] == "*":
        pi += 1
    return int(pi == len(p))


def _comps(p: List[str], s: List[str]) -> int:
    pi = si = star_p = star_s = 0
    star = False
    while si < len(s):
        if pi < len(p) and p[pi] == "**":
            while pi < len(p) and p[pi] == "**":
                pi += 1
            star, star_p, star_s = True, pi, si
            continue
        if pi < len(p):
            ok = _comp(p[pi], s[si])
            if ok < 0:
                return ok
            if ok:
                pi, si = pi + 1, si + 1
                continue
        if not star:
            return 0
        pi = star_p
        star_s += 1
        si = star_s
    while pi < len(p) and p[pi] == "**":
        pi += 1
    return int(pi == len(p))


def match(pat: str, path: str) -> bool:
    """A cleaned .dockerignore pattern against a whole relative path."""
    p = [c for c in pat.split("/") if c]
    s = [c for c in path.split("/") if c]
    if len(p) > 1 and p[-1] == "**" and p[-2] != "**":
        # A trailing `**` after others (Docker's `dir/**`) wants something below.
        return any(_comps(p[:-1], s[:k]) > 0 for k in range(len(s) - 1, 0, -1))
    return _comps(p, s) > 0


def _clean(s: str) -> str:
    """Go's filepath.Clean, then a leading '/' dropped."""
    absolute = s.startswith("/")
    out: List[str] = []
    for c in s.split("/"):
        if c in ("", "."):
            continue
        if c == "..":
            if out and out[-1] != "..":
                out.pop()
            elif not absolute:
                out.append("..")
            continue
        out.append(c)
    return "/".join(out) or "."


def _pattern_ok(p: str) -> bool:
    i = 0
    while i < len(p):
        if p[i] == "\\":
            if i + 1 >= len(p):
                return False
            i += 2
        elif p[i] == "[":
            ok, j = _class(p, i, "a")
            if ok < 0:
                return False
            i = j
        else:
            i += 1
    return True


class DockerIgnore:
    """The patterns of one .dockerignore; ValueError naming the line for a bad one."""

    def __init__(self, text: str = "") -> None:
        self.patterns: List[Tuple[str, bool]] = []
        if len(text.encode()) > MAX_BYTES:
            raise ValueError(f".dockerignore is over {MAX_BYTES} bytes")
        if text.startswith("\ufeff"):
            text = text[1:]
        for line, raw in enumerate(text.split("\n"), 1):
            s = raw.strip(_SPACE)
            if not s or s.startswith("#"):
                continue
            exception = s.startswith("!")
            if exception:
                s = s[1:].lstrip(" \t")
                if not s:
                    raise ValueError(f".dockerignore line {line}: '!' with no pattern")
            pat = _clean(s)
            if not _pattern_ok(pat):
                raise ValueError(f".dockerignore line {line}: {pat!r}: a bad pattern "
                                 "(an unclosed '[' or a trailing '\\')")
            if len(self.patterns) == MAX_PATTERNS:
                raise ValueError(f".dockerignore has more than {MAX_PATTERNS} patterns")
            self.patterns.append((pat, exception))
        self.exceptions = any(e for _, e in self.patterns)

    def ignored(self, rel: str) -> bool:
        """Is rel (relative to the context, '/'-separated) left out?"""
        if not self.patterns or rel == ".":
            return False
        parts = rel.split("/")
        prefixes = ["/".join(parts[:k]) for k in range(len(parts), 0, -1)]
        ignored = False
        for pat, exception in self.patterns:
            # An exception matters only once something is ignored; a pattern only while nothing is.
            if exception != ignored:
                continue
            if any(match(pat, p) for p in prefixes):
                ignored = not exception
        return ignored


def context_files(root: str, dockerfile: Optional[str] = None) -> Tuple[List[str], int]:
    """The paths under root (relative, '/'-separated, sorted per directory) a
    build sends: what root/.dockerignore keeps, and the Dockerfile and
    .dockerignore always (the builder reads them whatever it says); and how
    many paths it left out. Symlinks are listed, not followed."""
    import os
    import stat

    ign = DockerIgnore()
    path = os.path.join(root, ".dockerignore")
    if os.path.lexists(path):
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise ValueError(f"{path}: not a regular file")
        with open(path, "rb") as f:
            ign = DockerIgnore(f.read(MAX_BYTES + 1).decode("utf-8", errors="replace"))
    df = (dockerfile or "Dockerfile")
    while df.startswith("./"):
        df = df[2:]
    keep_always = {".dockerignore", df}
    out: List[str] = []
    left_out = 0

    def walk(rel: str, depth: int) -> None:
        nonlocal left_out
        if depth > 64:
            raise ValueError(f"{root}/{rel}: more than 64 directory levels (kilnd refuses a deeper context)")
        for name in sorted(os.listdir(os.path.join(root, rel) if rel else root)):
            p = f"{rel}/{name}" if rel else name
            ignored = ign.ignored(p) and p not in keep_always
            holds_df = df.startswith(p + "/")
            if stat.S_ISDIR(os.lstat(os.path.join(root, p)).st_mode) and (not ignored or ign.exceptions or holds_df):
                if not ignored:
                    out.append(p)
                walk(p, depth + 1)
            elif ignored:
                left_out += 1
            else:
                out.append(p)

    walk("", 0)
    return out, left_out
