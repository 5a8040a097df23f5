"""The package version and how to install the package, each in one place."""

__all__ = ["__version__", "install_hint"]

__version__ = "0.1.0"


def install_hint(extra: str | None = None) -> str:
    """The command that installs the package (with ``extra``). Until it is on an index, that is from a checkout or
    from the wheel ``python -m build`` writes into ``dist/``; a command that cannot work is never suggested."""
    spec = f"[{extra}]" if extra else ""
    return (
        f"pip install '.{spec}' in a checkout of otel-responses "
        f"(or pip install 'dist/otel_responses-{__version__}-py3-none-any.whl{spec}' after python -m build)"
    )
