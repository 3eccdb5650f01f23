// Fork one prepared sandbox into 4 branches, try a different approach in
// each, keep the best branch and delete the others. Forks copy memory and
// disk copy-on-write: every branch starts from the parent's exact state.
import { Sandbox } from "@kiln/sdk";

const approaches = {
  "bubble sort": "def sort(a):\n  a = a[:]\n  for i in range(len(a)):\n    for j in range(len(a) - 1 - i):\n      if a[j] > a[j + 1]: a[j], a[j + 1] = a[j + 1], a[j]\n  return a",
  "insertion sort": "def sort(a):\n  out = []\n  for x in a:\n    i = len(out)\n    while i and out[i - 1] > x: i -= 1\n    out.insert(i, x)\n  return out",
  "merge sort": "def sort(a):\n  if len(a) < 2: return a\n  l, r = sort(a[:len(a)//2]), sort(a[len(a)//2:])\n  out = []\n  while l and r: out.append((l if l[0] <= r[0] else r).pop(0))\n  return out + l + r",
  "built-in sorted": "def sort(a):\n  return sorted(a)",
};
// Times a candidate on the shared data; prints the seconds, or fails if it sorts wrong.
const bench = "import json, time\nfrom candidate import sort\ndata = json.load(open('/work/data.json'))\n" +
  "t = time.perf_counter(); out = sort(data); t = time.perf_counter() - t\nassert out == sorted(data)\nprint(t)\n";

await using parent = await Sandbox.create({ template: "base", ttlSeconds: 600 });
await parent.exec("mkdir -p /work && python3 -c \"import json, random; random.seed(7); " +
  "json.dump([random.random() for _ in range(1000)], open('/work/data.json', 'w'))\"");
const branches = await parent.forkTree(4);          // 4 identical children, one pause
const scores = await Promise.all(Object.entries(approaches).map(async ([name, code], i) => {
  const sb = branches[i];
  let seconds = Infinity;                           // a branch that fails just loses
  try {
    await sb.files.write("/work/candidate.py", code);
    await sb.files.write("/work/bench.py", bench);
    const r = await sb.exec("python3 bench.py", { cwd: "/work", timeout: 120 });
    if (r.exitCode === 0) seconds = Number(r.stdout);
  } catch (e) {
    console.log(`${name}: ${e}`);
  }
  console.log(`${name.padEnd(16)} ${sb.id}  ${seconds < Infinity ? `${seconds.toFixed(4)} s` : "failed"}`);
  return { name, sb, seconds };
}));
scores.sort((a, b) => a.seconds - b.seconds);
const best = scores[0].seconds < Infinity ? scores[0] : undefined;
if (best) {
  const report = await best.sb.promote();           // keep it; its 3 siblings go in one call
  console.log(`best: ${best.name}; kept ${report.kept}, deleted ${report.deleted.length} siblings`);
} else {
  for (const loser of scores) await loser.sb.delete();
  console.log("no branch succeeded; all deleted");
}
