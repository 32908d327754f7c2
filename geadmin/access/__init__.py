"""Sign-in and roles (layer 2): who is acting, and what their role lets them do.

roles.py    the roles and the one table of actions and the role each needs
users.py    the local users file (TOML, argon2 hashes) and password checks, rate-limited
identity.py the signed-in identity, sessions with an idle timeout, the sign-in mode
guard.py    the one guarded path every mutation takes: check the role, audit a refusal
"""
