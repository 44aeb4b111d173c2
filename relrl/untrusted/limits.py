"""The default bounds of the untrusted readers; every reader takes them as keyword arguments.

MAX_BYTES: a whole JSON text (a result file with every completion inline can be hundreds of MB).
MAX_YAML_BYTES: a recipe, config.yaml or pipeline.yaml (kilobytes; the composer is Python).
MAX_DEPTH: nesting of lists and objects (results nest about five deep).
MAX_INT_DIGITS: Python's own default limit for int(str), so anything Python reads we read.
MAX_NUMBER_CHARS: a float literal (17 significant digits suffice for any double).
"""
MAX_BYTES = 1024 * 1024 * 1024
MAX_YAML_BYTES = 256 * 1024
MAX_DEPTH = 200
MAX_INT_DIGITS = 4300
MAX_NUMBER_CHARS = 400
