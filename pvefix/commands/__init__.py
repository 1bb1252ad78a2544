"""One module per subcommand; each returns an exit code or raises a PvefixError."""
