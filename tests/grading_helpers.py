"""What the grading tests share."""
from relrl.grading.numbers import first_number, normalize


def parse_number(text: str) -> float | None:
    """The value of the first number of `text` as the grader reads it (percent as a fraction)."""
    number = first_number(normalize(text or ""))
    return number.value if number is not None else None
