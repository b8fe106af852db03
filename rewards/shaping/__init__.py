"""Shaping and control rewards, added to a verifier's reward with weights; none of them says "correct".

- style.py: length (DAPO's overlong punishment, Kimi's length reward, the cosine length-scaled reward),
  repetition and language consistency;
- format.py: the R1-style format, reasoning inside `<think>...</think>` then the answer;
- controls.py: the controls of the spurious-reward check (`random`, `constant`, `format_only`).
"""
