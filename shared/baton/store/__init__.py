"""The Postgres store: connections, migrations, and one SQL module per aggregate."""
