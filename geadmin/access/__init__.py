"""Sign-in and roles (layer 2). Empty until the access-control issue lands here."""
