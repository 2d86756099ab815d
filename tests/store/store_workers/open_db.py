"""Open (and so migrate) a session database when told to; used by the migration race
test. Usage: ``open_db.py PATH``. Prints ``ready`` once imported, waits for a line on
stdin (the parent releases every worker at once), then opens the file and prints
``ok <schema version>``, or ``error <exception>`` and exits 1.
"""

from __future__ import annotations

import sys

from mibyan_jupyter.store.db import Database


def main() -> int:
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        with Database(sys.argv[1]) as db:
            version = db.conn.execute("PRAGMA user_version").fetchone()[0]
    except Exception as error:
        print(f"error {type(error).__name__}: {error}", flush=True)
        return 1
    print(f"ok {version}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
