"""The PostgreSQL team store, for classrooms and JupyterHub (docs/architecture.md, "Store").

This version has its foundations: connecting (:mod:`.connect`: the URL, credentials, the
roles refused, the pool), the schema and its migrations (:mod:`.schema`, applied by
``mibyan-admin pg migrate`` only) and the checks an admin runs (:mod:`.check`). The
``SessionStore`` API on top of it is not ported yet; SQLite stays the store a kernel uses.
Needs the ``postgres`` extra (``pip install mibyan-jupyter[postgres]``); psycopg is imported
only inside the functions that use it.
"""

from mibyan_jupyter.store.pg.connect import ENV_URL, PgDatabase, database_url, parse_url
from mibyan_jupyter.store.pg.schema import LATEST, migrate, pg_migrations
from mibyan_jupyter.store.pg.scrub import scrub

__all__ = [
    "ENV_URL",
    "LATEST",
    "PgDatabase",
    "database_url",
    "migrate",
    "parse_url",
    "pg_migrations",
    "scrub",
]
