"""The lines a change can run, and which of them ran: for tools/gate-pr's report of the head's
changed lines that no case executed.

A changed line is a line of the head's file that the diff against the base's file adds or
replaces; where lines are only deleted, the head's line at that place. Of those, the lines that
can run are the ones inside a function (a module's or a class body's statements run at import,
when nothing is being checked; comments, docstrings and blank lines never run), as Python's
compiler maps the function's code to lines.
"""
import difflib
import os


def changed_lines(base_text, head_text):
    """The head's line numbers (from 1) that the change adds or replaces, or at which it deletes."""
    base, head = base_text.splitlines(), head_text.splitlines()
    changed = set()
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, base, head, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            changed.update(range(j1 + 1, j2 + 1))
        elif tag == "delete" and j1 < len(head):
            changed.add(j1 + 1)
    return changed


def lines_that_run(head_text, filename):
    """The lines of functions' code (CO_OPTIMIZED), each function's first line included."""
    lines = set()

    def walk(code):
        if code.co_flags & 1:
            lines.add(code.co_firstlineno)
            lines.update(line for _, _, line in code.co_lines() if line is not None)
        for constant in code.co_consts:
            if hasattr(constant, "co_lines"):
                walk(constant)

    walk(compile(head_text, filename, "exec"))
    return lines


def ranges(numbers):
    """12, 13, 14, 20 as '12-14, 20'."""
    out, numbers = [], sorted(numbers)
    i = 0
    while i < len(numbers):
        j = i
        while j + 1 < len(numbers) and numbers[j + 1] == numbers[j] + 1:
            j += 1
        out.append(str(numbers[i]) if i == j else f"{numbers[i]}-{numbers[j]}")
        i = j + 1
    return ", ".join(out)


def ran_lines(paths, filename):
    """The lines of `filename` that the RECHECK_LINES_TO files at `paths` say ran."""
    real = os.path.realpath(filename)
    ran = set()
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as file:
                for entry in file:
                    name, _, line = entry.strip().rpartition(":")
                    if name == real and line.isdigit():
                        ran.add(int(line))
        except OSError:
            pass
    return ran


def coverage_of_change(base_file, head_file, line_files):
    """What the change can run and what of it ran: a dict for the summary and the JSON report,
    or one with "error" when a file cannot be read or compiled."""
    try:
        with open(base_file, encoding="utf-8") as file:
            base_text = file.read()
        with open(head_file, encoding="utf-8") as file:
            head_text = file.read()
        runnable = lines_that_run(head_text, head_file)
    except (OSError, SyntaxError, ValueError) as error:
        return {"error": f"{type(error).__name__}: {error}"}
    changed = changed_lines(base_text, head_text)
    can_run = changed & runnable
    ran = ran_lines(line_files, head_file) & can_run
    return {"file": head_file, "changed": sorted(changed), "can_run": sorted(can_run), "ran": sorted(ran),
            "not_run": sorted(can_run - ran)}
