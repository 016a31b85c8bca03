"""Which lines of the code under test ran, for tools/gate-pr's report of the changed lines no case
executed. Embedded into recheck and run in the bridge's module right after python/bridge.py (one
namespace), before any code under test is imported.
"""


def _record_lines_run():
    """Which lines of the code under test ran, for tools/gate-pr's report of the changed lines no
    case executed. With RECHECK_LINES_OF (files, joined by os.pathsep) and RECHECK_LINES_TO (a
    file) set, every line of those files that runs inside a function (not a module's or a class
    body's, which run at import), and each function's first line when it is called, is appended to the file
    as `PATH:LINE` the first time this process runs it. The line is written at once, so a case
    checked in a fork that ends without cleaning up has written its lines already."""
    import os
    import sys
    import threading

    watched = {os.path.realpath(f) for f in os.environ.get("RECHECK_LINES_OF", "").split(os.pathsep) if f}
    target = os.environ.get("RECHECK_LINES_TO")
    if not watched or not target:
        return
    seen = set()
    names = {}

    def note(filename, line):
        if (filename, line) in seen:
            return
        seen.add((filename, line))
        with open(target, "a") as out:
            out.write(f"{filename}:{line}\n")

    def in_function(frame, event, arg):
        if event == "line":
            note(names[frame.f_code.co_filename], frame.f_lineno)
        return in_function

    def on_call(frame, event, arg):
        code = frame.f_code
        filename = names.get(code.co_filename)
        if filename is None:
            filename = names.setdefault(code.co_filename, os.path.realpath(code.co_filename))
        # A function's code only (CO_OPTIMIZED): a module's or a class body's lines run at import.
        if filename not in watched or not code.co_flags & 1:
            return None
        note(filename, code.co_firstlineno)
        return in_function

    sys.settrace(on_call)
    threading.settrace(on_call)


_record_lines_run()
