"""Sign-in and roles (layer 2): who is acting, and what their role lets them do.

- roles.py      the roles and the one table of actions and the role each needs
- users.py      the local users file (TOML, argon2 hashes): who may sign in, and their password checks
- signin.py     a sign-in around the password check: rate-limited per user and address, bounded
- identity.py   the signed-in identity, the sign-in mode, OIDC roles, which requests may skip sign-in
- token.py      sign-in with the token `geadmin up` prints when no users are configured (Jupyter's way)
- sessions.py   how long a session lasts (idle, age), roles read again, OIDC logins across tabs, a
                sign-in kept across reloads (BrowserSessions)
- guard.py      the one guarded path every mutation takes: check the role, audit a refusal
- bootstrap.py  the compose stack's first admin, a random password in a 0600 file
- startup.py    the sign-in a dashboard will use, refused up front where anyone could drive it
"""
