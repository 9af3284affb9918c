"""Invalid selectors: InvalidSelectorException with position, caret and what was expected."""

from __future__ import annotations

import pytest

from jmspy.errors import InvalidSelectorException, JMSException
from jmspy.selector import compile_selector


def error_for(text: str) -> InvalidSelectorException:
    with pytest.raises(InvalidSelectorException) as info:
        compile_selector(text)
    return info.value


def assert_error(text: str, position: int, *fragments: str) -> InvalidSelectorException:
    """Check position attributes, message header, every fragment and the caret column."""
    exc = error_for(text)
    message = str(exc)
    assert exc.position == position, message
    assert exc.selector == text
    assert message.startswith(f"Invalid selector at position {position}: "), message
    for fragment in fragments:
        assert fragment in message, message
    *_, source_line, caret_line = message.split("\n")
    line_start = text.rfind("\n", 0, position) + 1
    assert caret_line == "  " + " " * (position - line_start) + "^", message
    assert source_line.startswith("  ")
    return exc


def test_error_message_matches_documented_format_exactly() -> None:
    exc = error_for("region = ")
    assert str(exc) == (
        "Invalid selector at position 9: expected a value after '=', found end of input\n"
        "  region = \n"
        "           ^"
    )


def test_invalid_selector_exception_is_a_jms_exception_with_code() -> None:
    exc = error_for("a =")
    assert isinstance(exc, JMSException)
    assert exc.error_code == "INVALID_SELECTOR"


# -- missing operands ------------------------------------------------------------------------


def test_missing_right_operand_of_comparison_reports_end_of_input() -> None:
    assert_error("region = ", 9, "expected a value after '='", "found end of input")


def test_missing_operand_after_and_names_the_and() -> None:
    assert_error("a = 1 AND", 9, "expected a value after 'AND'", "end of input")


def test_missing_operand_between_operators_names_the_found_token() -> None:
    assert_error("a = * 2", 4, "expected a value after '='", "found '*'")


def test_empty_parentheses_report_the_closing_paren() -> None:
    assert_error("()", 1, "expected a value after '('", "found ')'")


def test_missing_and_in_between() -> None:
    assert_error("a BETWEEN 1 OR 2", 12, "expected AND in 'BETWEEN ... AND ...'", "'OR'")


# -- lexical errors --------------------------------------------------------------------------


def test_unterminated_string_points_at_the_opening_quote() -> None:
    assert_error("name = 'abc", 7, "unterminated string literal", "''")


def test_unterminated_string_after_escaped_quote() -> None:
    assert_error("name = 'it''s", 7, "unterminated string literal")


def test_unknown_character_is_named_with_its_code_point() -> None:
    assert_error("a # 1", 2, "unexpected character '#'", "U+0023")


def test_double_quotes_get_a_hint_to_use_single_quotes() -> None:
    assert_error('a = "x"', 4, "unexpected character '\"'", "single quotes")


def test_bang_equals_gets_a_hint_to_use_angle_brackets() -> None:
    assert_error("a != 1", 2, "use <>")


def test_double_ampersand_gets_a_hint_to_use_and() -> None:
    assert_error("a && b", 2, "use AND / OR")


@pytest.mark.parametrize(
    ("text", "position", "fragment"),
    [
        ("x = 1e", 4, "malformed number '1e'"),
        ("x = 1e+", 4, "malformed number '1e+'"),
        ("x = 10abc", 4, "malformed number '10abc'"),
        ("x = 1.2.3", 4, "malformed number '1.2.3'"),
        ("x = 0x1F", 4, "hex, octal and type suffixes are not supported"),
        ("x = 10L", 4, "malformed number '10L'"),
    ],
)
def test_malformed_numbers_point_at_the_number(text: str, position: int, fragment: str) -> None:
    assert_error(text, position, fragment)


def test_number_with_too_many_digits_is_rejected_not_crashing() -> None:
    assert_error("x = " + "9" * 5000, 4, "too many digits")


# -- parentheses and trailing garbage ----------------------------------------------------------


def test_unclosed_parenthesis_names_where_it_was_opened() -> None:
    assert_error("(a = 1", 6, "expected ')' to close the '(' at position 0", "end of input")


def test_unclosed_inner_parenthesis_before_another_token() -> None:
    assert_error("(a = (1 + 2 b)", 12, "expected ')' to close the '(' at position 5")


def test_unmatched_closing_parenthesis() -> None:
    assert_error("a = 1)", 5, "unexpected ')' without a matching '('")


def test_trailing_identifier_after_complete_expression() -> None:
    assert_error("a = 1 b", 6, "expected AND, OR, an operator or end of input", "identifier 'b'")


def test_trailing_keyword_after_complete_expression() -> None:
    assert_error("a = 'x' ESCAPE 'y'", 8, "found keyword 'ESCAPE'")


def test_chained_comparison_is_rejected_with_a_hint() -> None:
    assert_error("a = 1 = 2", 6, "cannot be chained", "AND / OR")


# -- keywords ----------------------------------------------------------------------------------


@pytest.mark.parametrize("word", ["AND", "or", "Between", "LIKE", "in", "IS", "escape"])
def test_keyword_used_as_identifier_is_rejected(word: str) -> None:
    assert_error(f"{word} = 1", 0, f"keyword '{word}'", "reserved word")


def test_keyword_used_as_right_hand_identifier_is_rejected() -> None:
    assert_error("a = between", 4, "keyword 'between'", "reserved word")


def test_null_as_a_value_points_to_is_null() -> None:
    assert_error("x = NULL", 4, "IS NULL")


def test_not_must_be_followed_by_between_in_or_like_after_an_operand() -> None:
    assert_error("a NOT b", 6, "expected BETWEEN, IN or LIKE after NOT", "identifier 'b'")


def test_is_must_be_followed_by_null_or_not_null() -> None:
    assert_error("a IS 5", 5, "expected NULL or NOT NULL after 'IS'", "number 5")
    assert_error("a IS NOT 5", 9, "expected NULL after 'NOT'")


# -- IN ----------------------------------------------------------------------------------------


def test_in_list_with_number_is_rejected() -> None:
    assert_error("a IN (1, 'x')", 6, "IN list items must be string literals", "number 1")


def test_in_list_with_identifier_is_rejected() -> None:
    assert_error("a IN ('x', b)", 11, "must be string literals", "identifier 'b'")


def test_empty_in_list_is_rejected() -> None:
    assert_error("a IN ()", 6, "expected a string literal in the IN list", "found ')'")


def test_in_without_parenthesis_is_rejected() -> None:
    assert_error("a IN 'x'", 5, "expected '(' after IN")


def test_in_list_missing_comma_is_rejected() -> None:
    assert_error("a IN ('x' 'y')", 10, "expected ',' or ')'", "opened at position 5")


def test_unclosed_in_list_is_rejected() -> None:
    assert_error("a IN ('x'", 9, "expected ',' or ')'", "end of input")


def test_in_with_non_identifier_left_operand_is_rejected() -> None:
    assert_error("5 IN ('x')", 0, "IN needs an identifier on its left", "the number 5")


# -- LIKE / ESCAPE -----------------------------------------------------------------------------


def test_escape_longer_than_one_character_is_rejected() -> None:
    assert_error("a LIKE 'x' ESCAPE 'ab'", 18, "exactly one character", "'ab'")


def test_empty_escape_is_rejected() -> None:
    assert_error("a LIKE 'x' ESCAPE ''", 18, "exactly one character")


def test_escape_that_is_not_a_string_is_rejected() -> None:
    assert_error("a LIKE 'x' ESCAPE 1", 18, "expected a string literal after ESCAPE")


def test_pattern_ending_in_escape_character_is_rejected() -> None:
    assert_error("a LIKE 'x!' ESCAPE '!'", 7, "ends with the escape character")


def test_escape_before_ordinary_character_is_rejected() -> None:
    assert_error("a LIKE 'x!y' ESCAPE '!'", 7, "must be followed by '_', '%' or itself")


def test_like_pattern_must_be_a_string_literal() -> None:
    assert_error("a LIKE b", 7, "expected a string literal pattern after LIKE", "identifier 'b'")


def test_like_with_non_identifier_left_operand_is_rejected() -> None:
    assert_error("'x' LIKE 'x'", 0, "LIKE needs an identifier on its left")


def test_is_null_with_non_identifier_left_operand_is_rejected() -> None:
    assert_error("1 + 2 IS NULL", 0, "IS NULL needs an identifier on its left")


# -- static type errors ------------------------------------------------------------------------


def test_ordering_comparison_with_string_literal_is_rejected() -> None:
    assert_error("a > 'x'", 4, "'>' compares numbers only", "only = and <>")


def test_ordering_comparison_with_boolean_literal_is_rejected() -> None:
    assert_error("TRUE <= a", 0, "'<=' compares numbers only", "the boolean TRUE")


def test_arithmetic_on_string_literal_is_rejected() -> None:
    assert_error("1 + 'a' = 2", 4, "'+' needs numeric operands", "the string 'a'")


def test_arithmetic_on_comparison_is_rejected() -> None:
    assert_error("(a = 1) * 2 = 2", 1, "'*' needs numeric operands", "a boolean expression")


def test_unary_minus_on_string_is_rejected() -> None:
    assert_error("-'a' = 1", 1, "unary '-' needs numeric operands")


def test_between_with_string_bounds_is_rejected() -> None:
    assert_error("x BETWEEN 'a' AND 'b'", 10, "BETWEEN needs numeric operands")


def test_and_with_numeric_operand_is_rejected() -> None:
    assert_error("a = 1 AND 5", 10, "AND needs boolean operands", "the number 5")


def test_or_with_string_operand_is_rejected() -> None:
    assert_error("'x' OR a", 0, "OR needs boolean operands")


def test_not_with_arithmetic_operand_is_rejected() -> None:
    assert_error("NOT x + 1", 4, "NOT needs boolean operands", "arithmetic expression")


def test_top_level_arithmetic_is_rejected_at_its_start() -> None:
    assert_error("  qty + 1", 2, "must be a boolean expression", "arithmetic expression")


def test_top_level_string_literal_is_rejected() -> None:
    assert_error("'abc'", 0, "must be a boolean expression", "the string 'abc'")


# -- layout of the message ---------------------------------------------------------------------


def test_multiline_selector_shows_only_the_offending_line() -> None:
    text = "a = 1 AND\n  b = "
    exc = assert_error(text, len(text), "expected a value after '='")
    assert str(exc).split("\n")[1] == "    b = "


def test_tabs_are_shown_as_spaces_so_the_caret_lines_up() -> None:
    exc = assert_error("a\t= #", 4, "unexpected character '#'")
    assert str(exc).split("\n")[1] == "  a = #"


# -- nesting limits ----------------------------------------------------------------------------


def test_reasonable_nesting_is_accepted() -> None:
    assert compile_selector("(" * 40 + "a = 1" + ")" * 40).matches({"a": 1}.get)
    assert compile_selector("NOT " * 40 + "a = 1").matches({"a": 1}.get)


def test_excessive_parenthesis_nesting_is_an_invalid_selector_not_a_crash() -> None:
    exc = error_for("(" * 500 + "a = 1" + ")" * 500)
    assert "nests more than" in str(exc)


def test_excessively_long_arithmetic_chain_is_an_invalid_selector_not_a_crash() -> None:
    exc = error_for("a" + " + a" * 1000 + " > 1")
    assert "nests more than" in str(exc)


def test_excessive_unary_and_not_nesting_is_an_invalid_selector() -> None:
    assert "nests more than" in str(error_for("a = " + "-" * 500 + "1"))
    assert "nests more than" in str(error_for("NOT " * 500 + "a"))
