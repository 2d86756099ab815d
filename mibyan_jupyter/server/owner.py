"""Whose sessions the sessions API serves: the server's own user's, and no one else's.

The user is the one the server process runs for: ``JUPYTERHUB_USER``, else the OS user
(store/audit.py ``current_user``), the very name the kernels this server starts record
their sessions under, since they inherit its environment. Not jupyter_server's
authenticated user, for two reasons:

* Without JupyterHub that user is a made-up name per browser ("Anonymous Io"), which no
  kernel records, so the panel would show nothing.
* On JupyterHub a single-user server runs as (or for) one hub user, and the hub lets only
  them in, or someone they or an admin granted access to *their* server (JupyterHub's
  ``access:servers`` scope, sharing). Such a visitor acts on the owner's server, with the
  owner's files and kernels; the sessions there are the owner's too.

So a shared SQLite file (``MIBYAN_DB`` pointing several users' servers at one file) shows
each server its user's sessions, and those from before schema 6 only to the file's owner
(store/scope.py, the one rule). A session of another user is answered exactly as a
missing one, ``not_found`` (never ``forbidden``, which would confirm that it exists), and
an id prefix only ever matches the user's own sessions. This is the environment's word,
not a guarantee: the server process can read the whole file (docs/architecture.md,
"Admin policy"). On the PostgreSQL team store (``MIBYAN_DB_URL``: server/service.py) the
user is the URL's login role, and row-level security is the guarantee: the listing is
that role's own sessions, and ``scope=course`` what the ``review`` policy lets it read of
others' (an instructor's students'; server/sessions.py ``course_sessions``).
"""

from __future__ import annotations

from mibyan_jupyter.store.scope import UserScope, user_scope
from mibyan_jupyter.store.sessions import SessionStore


class OwnSessions(SessionStore):
    """The server's store: every session it finds by id or prefix is its user's (the
    store's :meth:`~SessionStore.get` keeps to the current user's), so every route (one
    session, its messages, transcript, export, fork, rename, delete) is scoped by the one
    lookup they all make; :attr:`scope` scopes the listing and search as well."""

    @property
    def scope(self) -> UserScope:
        """The server user's sessions in this database (its owner: the older ones too)."""
        return user_scope(self.db)
