from toolrun.tools._docstrings import parse_docstring


def test_plain_docstring_is_all_description() -> None:
    parsed = parse_docstring("Find tasks.\n\n    Returns the matching ones, newest first.\n")
    assert parsed.description == "Find tasks.\n\nReturns the matching ones, newest first."
    assert parsed.params == {}


def test_empty_docstring() -> None:
    assert parse_docstring(None).description == ""
    assert parse_docstring("").description == ""


def test_google_multiline_param_is_joined() -> None:
    parsed = parse_docstring(
        """Search.

        Args:
            query: Words to find,
                over several lines.
            limit (int): Max.

        Returns:
            The hits.
        """
    )
    assert parsed.description == "Search."
    assert parsed.params == {"query": "Words to find, over several lines.", "limit": "Max."}
    assert parsed.returns == "The hits."
