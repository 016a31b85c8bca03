"""Headless Chromium for the browser tests (tests/*_in_browser.py): finding it, and running it
the one way they all need."""
import shutil
import subprocess


def find():
    """The browser's path (Debian's `chromium`), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def run(browser, *args, window=None, wait_ms=None):
    """Runs it headless on ARGS (--dump-dom URL, --screenshot=PNG URL); `wait_ms`: virtual time for
    a page's scripts to draw. --no-sandbox: CI runs as root, where the sandbox refuses to start."""
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--force-device-scale-factor=1"]
    if window:
        flags.append(f"--window-size={window[0]},{window[1]}")
    if wait_ms:
        flags.append(f"--virtual-time-budget={wait_ms}")
    return subprocess.run(flags + list(args), capture_output=True, text=True, timeout=120)


def main_of(main, doc):
    """The two-argument entry point the browser tests share: RECHECK OUT_DIR."""
    import sys
    if len(sys.argv) != 3:
        print(doc)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
