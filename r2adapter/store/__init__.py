"""Postgres: embedded server, migrations, connection pool, loaders."""
