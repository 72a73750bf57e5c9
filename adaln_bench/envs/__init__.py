"""One Python environment per framework: the envs file, and building environments with uv or venv + pip."""
