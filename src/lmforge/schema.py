"""The base of every typed configuration model: unknown keys are errors, assignments validated.

A leaf module: the objectives define their ``Config`` on it without importing ``config/``,
which embeds those Configs in ``params.yaml``'s schema."""

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)
