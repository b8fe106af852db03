"""The code verifier: is this code completion correct?

- verifier.py: the program of a completion, its verdict against the row's `tests`, and the `code_pass_rate` /
  `code_binary` rewards;
- tests_format.py: the two test formats of code datasets (stdin/stdout cases, assert-style tests) and how each
  turns into programs for the sandbox;
- sandbox/: where the programs run: the isolation, the launcher and the trusted judge of assert-style tests
  (standard library only; its docstring says what is isolated and how).

Nothing is imported here, so that importing the sandbox does not import the verifier.
"""
