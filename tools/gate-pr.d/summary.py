"""The summary tools/gate-pr prints on every way out: read from each stage's JSON report and log.

    python3 summary.py --out DIR --verdict TEXT --base TEXT --head TEXT --claims TEXT
                       [--causes FILE] STAGE:EXIT...

It leads with the verdict and the finding that decides it (the first alarm's bucket: its
property, the stage and case, its evidence, its minimized case and replay line), then the files
and claims held, one line per stage (seed, cases, exit, its closing line), the deciding stage's
table, the other alarms' buckets, the pre-existing findings counted by known cause
(docs/known-causes.json), and the verdict again (CI logs are read from the bottom). A stage
whose report is missing or half-written is named with its error output's last lines instead.
"""
import argparse
import json
import os
import re
import sys

PREFIX = "tools/gate-pr: "
SHOWN_ALARMS = 5


def read_report(path):
    try:
        with open(path, encoding="utf-8") as file:
            report = json.load(file)
        return report if isinstance(report, dict) else None
    except (OSError, ValueError):
        return None


def read_lines(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return [line.rstrip("\n") for line in file]
    except OSError:
        return []


def known_causes(path):
    try:
        with open(path, encoding="utf-8") as file:
            causes = json.load(file).get("causes", [])
        return [(c["id"], [re.compile(s) for s in c["signatures"]]) for c in causes]
    except (OSError, ValueError, KeyError, re.error, AttributeError):
        return []


def cause_of(bucket, causes):
    return next((name for name, patterns in causes if any(p.search(bucket.get("signature", "")) for p in patterns)),
                None)


def deciding_bucket(report):
    """The alarm bucket holding the report's first alarm (lowest case), else the first alarm bucket."""
    alarms = [b for b in report.get("buckets", []) if b.get("alarm") and b.get("count", 0) > 0]
    if not alarms:
        return None
    return min(alarms, key=lambda b: (b.get("first_case", 0) if b.get("first_case", -1) >= 0 else 1 << 62))


def describe_bucket(bucket, stage, seed, indent="  "):
    lines = [f"{indent}{bucket.get('classification')} {bucket.get('property')} in case {bucket.get('first_case')} "
             f"of the {stage} (seed {seed}, draw seed {bucket.get('draw_seed')}; {bucket.get('count')} findings "
             f"of this cause)"]
    example = bucket.get("example", "")
    if example:
        lines.append(f"{indent}  {example if len(example) <= 400 else example[:397] + '...'}")
    if bucket.get("minimized"):
        lines.append(f"{indent}  minimized: {bucket['minimized']} ({bucket.get('minimized_ops')} ops)")
    elif bucket.get("file"):
        lines.append(f"{indent}  case: {bucket['file']} (not minimized)")
    if bucket.get("replay"):
        lines.append(f"{indent}  replay: {bucket['replay']}")
    return lines


def main(argv):
    parser = argparse.ArgumentParser()
    for name in ("out", "verdict", "base", "head", "claims"):
        parser.add_argument("--" + name, required=True)
    parser.add_argument("--causes", default="")
    parser.add_argument("stages", nargs="*", metavar="STAGE:EXIT")
    args = parser.parse_args(argv)
    causes = known_causes(args.causes) if args.causes else []

    stages = []
    for entry in args.stages:
        name, _, code = entry.rpartition(":")
        report = read_report(os.path.join(args.out, name + ".json"))
        stages.append({"name": name, "exit": int(code), "report": report,
                       "log": read_lines(os.path.join(args.out, name + ".log")),
                       "err": read_lines(os.path.join(args.out, name + ".err"))})

    deciding = None
    for stage in stages:
        if stage["report"] and deciding_bucket(stage["report"]):
            deciding = stage
            break
    out = []
    out.append(PREFIX + args.verdict)
    if deciding:
        bucket = deciding_bucket(deciding["report"])
        out.append(PREFIX + "the finding that decides it:")
        out += describe_bucket(bucket, deciding["name"], deciding["report"].get("seed"))
    out.append(PREFIX + "base " + args.base)
    out.append(PREFIX + "head " + args.head)
    out.append(PREFIX + "claims held: " + args.claims + "; every other property against eager mode and the base")
    if not stages:
        out.append(PREFIX + "no stage ran")
    for stage in stages:
        report = stage["report"]
        closing = next((line for line in reversed(stage["log"]) if line.strip()), "")
        if report:
            figures = (f"seed {report.get('seed')}, {report.get('cases')} cases in "
                       f"{float(report.get('seconds', 0)):.0f} s" + (", interrupted" if report.get("interrupted") else ""))
        else:
            figures = "no report written"
        out.append(f"{PREFIX}{stage['name']}: exit {stage['exit']}: {figures}: {closing or '(no closing line)'} "
                   f"({os.path.join(args.out, stage['name'] + '.json')}, {os.path.join(args.out, stage['name'] + '.xml')})")
        if stage["exit"] not in (0, 1) and stage["exit"] < 128 or (stage["exit"] == 1 and not report):
            said = [line for line in stage["err"] if line.strip() and not line.startswith("[")]
            out += ["  " + line for line in said[-20:]] or ["  (it printed nothing on its error output)"]
    shown = deciding or next((s for s in stages if s["report"]), None)
    if shown:
        table, inside = [], False
        for line in shown["log"]:
            if line.startswith("property "):
                inside = True
            if inside:
                if not line.strip():
                    break
                table.append(line)
        if table:
            out.append(f"{PREFIX}the {shown['name']}'s verdicts per property:")
            out += table
    for stage in stages:
        report = stage["report"]
        if not report:
            continue
        buckets = [b for b in report.get("buckets", []) if b.get("count", 0) > 0]
        alarms = [b for b in buckets if b.get("alarm")]
        first = deciding_bucket(report) if stage is deciding else None
        others = [b for b in alarms if b is not first]
        if others:
            out.append(f"{PREFIX}{stage['name']}: {sum(b['count'] for b in alarms)} alarms of {len(alarms)} causes"
                       + (f"; the first {SHOWN_ALARMS} besides the one above" if len(others) > SHOWN_ALARMS else "")
                       + ":")
            for bucket in others[:SHOWN_ALARMS]:
                out += describe_bucket(bucket, stage["name"], report.get("seed"))
        existing = [b for b in buckets if not b.get("alarm")]
        if existing:
            by_cause = {}
            for bucket in existing:
                name = cause_of(bucket, causes) or "no known cause"
                by_cause[name] = by_cause.get(name, 0) + bucket["count"]
            listed = ", ".join(f"{name} {count}" for name, count in
                               sorted(by_cause.items(), key=lambda item: (-item[1], item[0])))
            out.append(f"{PREFIX}{stage['name']}: {sum(by_cause.values())} findings the base shares or the head fixes, "
                       f"in {len(existing)} bucket{'s' if len(existing) != 1 else ''}, by known cause (docs/known-causes.md): {listed}")
    out.append(PREFIX + args.verdict)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
