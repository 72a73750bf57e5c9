"""The data model at the bottom of the layers: the report's schema, the table of its metrics, the statistics
behind a verdict, how numbers are written, and reading and writing report files. It imports only the base
modules (errors, shape, toml_file), so everything above may use it."""
