"""Slimmed installs of real vLLM and SGLang for a GPU machine that has no network and a 64 MiB carry.

`tools/slim_frameworks.py` is the entry point; docs/compat.md says what is left out and why.
"""
