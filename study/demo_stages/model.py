"""Stage `tiny`: build the pipeline's built-in model into the cache, or reuse it.

  python -m relrl.models.tiny_build        (model: tiny; the pipeline's tolerance rule)
  python -m relrl.models.tiny_tool_build   (model: tiny-tool)

The build is skipped by the builder itself when the cache holds the model.
"""
from __future__ import annotations

from study.demo_stages.pipeline import Pipeline


class ModelStage(Pipeline):
    def tiny(self) -> None:
        """The built-in model, built once into the cache (tiny-tool's build checks itself under
        the complement rule, whatever the pipeline's)."""
        if self.cfg.model == "tiny":
            self.run("tiny", ["-m", "relrl.models.tiny_build", *self.rule])
        else:
            self.run("tiny-tool", ["-m", "relrl.models.tiny_tool_build"])
