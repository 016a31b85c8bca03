"""The summary tools/gate-pr prints on every way out: read from each stage's JSON report and log.

    python3 summary.py --out DIR --status N --claims-held LIST --base TEXT --head TEXT --claims TEXT
                       [--base-file FILE --head-file FILE] [--causes FILE] STAGE:EXIT...

Exits with the gate's status: the one given (0 pass, 1 an alarm, 2 an error, 130 or 143
interrupted), or 3 where the gate found nothing and no case ran any line the change can run
(not reached: a pass would say nothing about the change). Writes the gate's own reports,
DIR/gate.json and DIR/gate.xml (JUnit): the verdict, each stage, and the change's lines that ran
and did not.

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
from xml.sax.saxutils import escape, quoteattr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import changed_lines  # noqa: E402

NOT_REACHED = 3

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
    for name in ("out", "status", "claims-held", "base", "head", "claims"):
        parser.add_argument("--" + name, required=True)
    parser.add_argument("--base-file", default="")
    parser.add_argument("--head-file", default="")
    parser.add_argument("--causes", default="")
    parser.add_argument("--functions", default="", help="functions.py's list: the trees' checkpoint functions")
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

    status = int(args.status)
    change = None
    if args.base_file and args.head_file:
        change = changed_lines.coverage_of_change(
            args.base_file, args.head_file, [os.path.join(args.out, s["name"] + ".lines") for s in stages])
        if status == 0 and stages and not change.get("error") and change["can_run"] and not change["ran"]:
            status = NOT_REACHED
    verdict = verdict_of(status, args.claims_held, args.out)

    deciding = None
    for stage in stages:
        if stage["report"] and deciding_bucket(stage["report"]):
            deciding = stage
            break
    out = []
    out.append(PREFIX + verdict)
    if deciding:
        bucket = deciding_bucket(deciding["report"])
        out.append(PREFIX + "the finding that decides it:")
        out += describe_bucket(bucket, deciding["name"], deciding["report"].get("seed"))
    out.append(PREFIX + "base " + args.base)
    out.append(PREFIX + "head " + args.head)
    out.append(PREFIX + "claims held: " + args.claims + "; every other property against eager mode and the base")
    if not stages:
        out.append(PREFIX + "no stage ran")
    functions = read_functions(args.functions) if args.functions else []
    out += describe_functions(functions, stages)
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
    if change is not None:
        out.append(PREFIX + describe_change(change))
    out.append(PREFIX + verdict)
    print("\n".join(out))
    write_reports(args, status, verdict, stages, change, functions)
    return status


def read_functions(path):
    """functions.py's list: (id, attr, subject, where, what) per checkpoint function a tree holds."""
    rows = [line.split("\t") for line in read_lines(path) if line.count("\t") == 5]
    return [(ident, attr, "" if subject == "-" else subject, where, what, run)
            for ident, attr, subject, where, what, run in rows]


def describe_functions(functions, stages):
    """One line per checkpoint function: what ran of it (its stages' cases), or why nothing did."""
    lines = []
    for ident, _, subject, where, what, run in functions:
        own = [s for s in stages if s["name"].rpartition(".")[0] == ident]
        if where == "base":
            said = "not run: the head removes it"
        elif where == "head":
            said = "not run: only the head holds it (no base to hold it to)"
        elif not own and run.startswith("opt-in: "):
            said = f"not run unless --functions names it: {run[len('opt-in: '):]}"
        elif not own:
            said = "not run (not chosen, or the gate ended first)"
        else:
            said = ", ".join(f"{s['name'].rpartition('.')[2]} {(s['report'] or {}).get('cases', 'no')} cases" for s in own)
        lines.append(f"{PREFIX}function {ident} ({what}{'; subject ' + subject if subject else ''}): {said}")
    return lines


def verdict_of(status, claims_held, out):
    if status == 0:
        return ("PASS: the head is no worse than the base" if claims_held == "none" else
                f"PASS: the head is no worse than the base and keeps its claims ({claims_held})")
    if status == 1:
        return f"FAIL: the head regresses (reports and cases under {out})"
    if status == NOT_REACHED:
        return "NOT REACHED: no case ran a line the change can run (listed below): nothing was checked of it"
    if status in (130, 143):
        return f"INTERRUPTED: no verdict (what ran is listed below; reports under {out})"
    return "ERROR: the gate could not run the code (the reason under its stage below)"


def describe_change(change):
    if change.get("error"):
        return f"the change's lines: not worked out ({change['error']})"
    name = os.path.basename(change["file"])
    if not change["can_run"]:
        return (f"the change: {len(change['changed'])} changed lines of {name}, none of them in a function "
                f"(comments, docstrings, import-time statements): nothing in it runs when a case runs")
    said = (f"the change: {len(change['can_run'])} changed lines of {name} run in functions; "
            f"{len(change['ran'])} of them ran in some case")
    if change["not_run"]:
        said += f"; no case ran {name}:{changed_lines.ranges(change['not_run'])}"
    return said


def write_reports(args, status, verdict, stages, change, functions):
    """DIR/gate.json and DIR/gate.xml, each written whole (a temporary file renamed)."""
    report = {"tool": "gate-pr", "status": status, "verdict": verdict, "base": args.base, "head": args.head,
              "claims": args.claims,
              "functions": [{"id": ident, "attr": attr, "subject": subject or None, "held_by": where, "what": what,
                             "stages": [s["name"] for s in stages if s["name"].rpartition(".")[0] == ident]}
                            for ident, attr, subject, where, what, _ in functions],
              "stages": [{"name": s["name"], "exit": s["exit"], "report": os.path.join(args.out, s["name"] + ".json"),
                          "seed": (s["report"] or {}).get("seed"), "cases": (s["report"] or {}).get("cases")}
                         for s in stages],
              "change": change}
    cases = []
    for s in stages:
        failed = s["exit"] not in (0, 130, 143)
        message = quoteattr("exit " + str(s["exit"]))
        body = f"<failure message={message}/>" if failed else ""
        cases.append(f'    <testcase classname="gate-pr" name={quoteattr(s["name"])}>{body}</testcase>')
    if change is not None and not change.get("error"):
        text = escape(describe_change(change))
        if change["can_run"] and not change["ran"]:
            body = f'<failure message="no case ran a line the change can run">{text}</failure>'
        elif not change["can_run"]:
            body = f'<skipped message="no changed line runs in a function"/><system-out>{text}</system-out>'
        else:
            body = f"<system-out>{text}</system-out>"
        cases.append(f'    <testcase classname="gate-pr" name="changed lines run">{body}</testcase>')
    failures = sum(1 for c in cases if "<failure" in c)
    xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n  <testsuite name="gate-pr" tests="{len(cases)}" '
           f'failures="{failures}">\n' + "\n".join(cases) + "\n  </testsuite>\n</testsuites>\n")
    for name, text in (("gate.json", json.dumps(report, indent=2) + "\n"), ("gate.xml", xml)):
        path = os.path.join(args.out, name)
        try:
            with open(path + ".tmp", "w", encoding="utf-8") as file:
                file.write(text)
            os.replace(path + ".tmp", path)
        except OSError as error:
            print(f"{PREFIX}cannot write {path}: {error.strerror}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
